"""Every user error through the command line: one line on stderr naming the path, exit code 2, before computing."""

from __future__ import annotations

import errno
import json
import os
import re
from pathlib import Path

import mteb
import pytest
from sentence_transformers import SentenceTransformer

from mteb_lrd import with_layer_dynamics
from mteb_lrd.adapter.seams import ResultFileError
from mteb_lrd.cli import main
from mteb_lrd.cli.checks import HUB_HINT, error_line

RUN = {"co2_tracker": False, "show_progress_bar": False}


def _one_line(capsys, command: str) -> str:
    """The error line: the last line on stderr, the only one naming the command, no traceback."""
    err = capsys.readouterr().err
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.strip()]
    assert "Traceback" not in err, err
    errors = [line for line in lines if line.startswith("mteb-lrd ")]
    assert len(errors) == 1 and lines[-1] == errors[0], err
    assert errors[0].startswith(f"mteb-lrd {command}: error: "), errors[0]
    return errors[0]


@pytest.fixture
def texts_file(tmp_path, texts):
    path = tmp_path / "texts.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return path


@pytest.fixture
def local_sts(tmp_path, texts):
    folder = tmp_path / "tinysts"
    folder.mkdir()
    rows = [
        {"sentence1": texts[i], "sentence2": texts[(i * 3 + 1) % 16], "score": (i * 7) % 6} for i in range(16)
    ]
    (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


@pytest.fixture
def no_model_loading(monkeypatch):
    """Fail loudly if a command gets as far as loading a model (checks must come first)."""

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the checks")

    import mteb_lrd.extraction.extractor as extractor
    import mteb_lrd.models.loading as loading

    # the commands call loading.resolve_model_path through the module: one patch covers them all
    monkeypatch.setattr(loading, "resolve_model_path", refuse)
    monkeypatch.setattr(extractor, "load_model", refuse)


def _profile(model, texts_file, *extra):
    return main(["profile", "--model", str(model), "--texts", str(texts_file), "--no-progress",
                 "--nrs-k", "4", "--gfmi-k", "5", *map(str, extra)])  # fmt: skip


# -- folders and files that cannot be written -----------------------------------------------------


def test_read_only_results_folder_stops_before_computing(tmp_path, monkeypatch, capsys, no_model_loading):
    results = tmp_path / "results"
    results.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == results else real_access(p, mode))
    assert main(["run", "--task", "demo", "--results", str(results)]) == 2
    line = _one_line(capsys, "run")
    assert f"--results {results} is not writable" in line


def test_results_folder_inside_a_read_only_folder(tmp_path, monkeypatch, capsys, no_model_loading):
    parent = tmp_path / "locked"
    parent.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == parent else real_access(p, mode))
    assert main(["run", "--task", "demo", "--results", str(parent / "new" / "results")]) == 2
    assert f"cannot be created: {parent} is not writable" in _one_line(capsys, "run")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_really_read_only_folder(tmp_path, capsys, no_model_loading):
    results = tmp_path / "results"
    results.mkdir(mode=0o555)
    assert main(["run", "--task", "demo", "--results", str(results)]) == 2
    assert "not writable" in _one_line(capsys, "run")


def test_results_path_that_is_a_file(tmp_path, capsys, no_model_loading):
    results = tmp_path / "results"
    results.write_text("not a folder")
    assert main(["run", "--task", "demo", "--results", str(results)]) == 2
    assert f"--results {results} is a file, not a folder" in _one_line(capsys, "run")


def test_cache_dir_that_is_a_file(tiny_st_dir, texts_file, tmp_path, capsys, no_model_loading):
    cache = tmp_path / "cache"
    cache.write_text("x")
    assert _profile(tiny_st_dir, texts_file, "--cache-dir", cache) == 2
    assert f"--cache-dir {cache} is a file, not a folder" in _one_line(capsys, "profile")


def test_output_file_that_is_a_folder(tiny_st_dir, texts_file, tmp_path, capsys, no_model_loading):
    out = tmp_path / "lrd.json"
    out.mkdir()
    assert _profile(tiny_st_dir, texts_file, "--out", out) == 2
    assert f"--out {out} is a folder; give a file name" in _one_line(capsys, "profile")


def test_folder_where_a_cache_shard_should_be(tiny_st_dir, texts_file, tmp_path, capsys):
    cache = tmp_path / "cache"
    assert _profile(tiny_st_dir, texts_file, "--cache-dir", cache) == 0
    shard = next(cache.rglob("*.npz"))
    shard.unlink()
    shard.mkdir()
    capsys.readouterr()
    assert _profile(tiny_st_dir, texts_file, "--cache-dir", cache) == 2
    line = _one_line(capsys, "profile")
    assert f"cache entry {shard} is a folder, not a file" in line
    assert shard.is_dir()  # left for the user to look at


def test_unreadable_cache_shard_is_named_and_kept(tiny_st_dir, texts_file, tmp_path, capsys, monkeypatch):
    cache = tmp_path / "cache"
    assert _profile(tiny_st_dir, texts_file, "--cache-dir", cache) == 0
    shard = next(cache.rglob("*.npz"))
    before = shard.read_bytes()
    import numpy as np

    def denied(path, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(np, "load", denied)
    capsys.readouterr()
    assert _profile(tiny_st_dir, texts_file, "--cache-dir", cache) == 2
    line = _one_line(capsys, "profile")
    assert f"cannot read cache entry {shard}" in line and "Permission denied" in line
    assert shard.read_bytes() == before


# -- models and tasks that are not there ----------------------------------------------------------


@pytest.mark.parametrize("command", ["profile", "run"])
def test_missing_model_path(tmp_path, texts_file, capsys, command, no_model_loading):
    missing = tmp_path / "models" / "mine"
    argv = ["profile", "--texts", str(texts_file)] if command == "profile" else ["run", "--task", "demo"]
    assert main([*argv, "--model", str(missing), "--results" if command == "run" else "--no-progress",
                 *([str(tmp_path / "r")] if command == "run" else [])]) == 2  # fmt: skip
    line = _one_line(capsys, command)
    assert f"--model {missing}: no such folder" in line and "Repo id" not in line


def test_model_path_that_is_a_file(tmp_path, texts_file, capsys, no_model_loading):
    model = tmp_path / "model.bin"
    model.write_bytes(b"x")
    assert main(["profile", "--texts", str(texts_file), "--model", str(model)]) == 2
    assert f"--model {model} is a file; give the model's folder" in _one_line(capsys, "profile")


def test_hub_task_offline_is_one_line(tmp_path, capsys, monkeypatch, no_model_loading):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["run", "--task", "STS22", "--results", str(tmp_path / "r")]) == 2
    line = _one_line(capsys, "run")
    assert "task 'STS22' reads the dataset" in line and "needs the Hugging Face Hub" in line
    assert "--local-task" in line


def test_hub_model_id_offline_is_one_line(texts_file, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert (
        main(["profile", "--model", "someorg/some-model", "--texts", str(texts_file), "--no-progress"]) == 2
    )
    line = _one_line(capsys, "profile")
    assert "huggingface.co" in line and HUB_HINT in line


def test_malformed_local_task_row_through_the_cli(tiny_st_dir, local_sts, tmp_path, capsys):
    with (local_sts / "test.jsonl").open("a") as handle:
        handle.write(json.dumps({"sentence1": "a", "sentence2": "b", "score": 0.7e9}) + "\n")
    code = main(["run", "--model", str(tiny_st_dir), "--local-task", f"{local_sts}=STS",
                 "--results", str(tmp_path / "r")])  # fmt: skip
    assert code == 2
    assert f"{local_sts / 'test.jsonl'}:17: field 'score' is 700000000.0, outside" in _one_line(capsys, "run")


# -- a torn or malformed <Task>.json --------------------------------------------------------------


@pytest.mark.parametrize("damage", ["torn", "not json"])
def test_torn_result_file_is_moved_aside_naming_it_and_rerun(tiny_st_dir, local_sts, tmp_path, damage):
    """mteb-lrd run writes through AtomicResultCache: an unreadable <Task>.json is kept aside under a
    name that the warning gives, and the task is run again (resumable; nothing is lost)."""
    results = tmp_path / "r"
    argv = ["run", "--model", str(tiny_st_dir), "--local-task", f"{local_sts}=STS", "--results", str(results)]
    assert main(argv) == 0
    (task_file,) = results.rglob("tinysts.json")
    text = task_file.read_text()
    damaged = {"torn": text[: len(text) // 2], "not json": "<html>"}[damage]
    task_file.write_text(damaged)
    with pytest.warns(
        UserWarning, match=rf"{re.escape(str(task_file))} could not be read .* moved to tinysts\.json\.torn-"
    ):
        assert main(argv) == 0
    assert json.loads(task_file.read_text())["task_name"] == "tinysts"
    (aside,) = task_file.parent.glob("tinysts.json.torn-*")
    assert aside.read_text() == damaged


def test_malformed_result_file_stops_the_run_naming_it(tiny_st_dir, local_sts, tmp_path, capsys):
    results = tmp_path / "r"
    argv = ["run", "--model", str(tiny_st_dir), "--local-task", f"{local_sts}=STS", "--results", str(results)]
    assert main(argv) == 0
    (task_file,) = results.rglob("tinysts.json")
    task_file.write_text("[1, 2]")  # valid JSON of the wrong shape: not a torn write, so not moved aside
    capsys.readouterr()
    assert main(argv) == 2
    line = _one_line(capsys, "run")
    assert f"{task_file}: cannot read this mteb result file, it is torn or was edited" in line
    assert "--overwrite" in line
    assert main([*argv, "--overwrite"]) == 0  # the documented way out works
    assert json.loads(task_file.read_text())["task_name"] == "tinysts"


def test_torn_result_file_is_named_for_plain_models_too(tiny_st_dir, tmp_path):
    from tests.mteb_helpers import sts_task

    cache = mteb.ResultCache(tmp_path)
    model = SentenceTransformer(str(tiny_st_dir), device="cpu")
    with_layer_dynamics(model)  # installs the seams
    mteb.evaluate(model, [sts_task()], cache=cache, **RUN)
    (task_file,) = tmp_path.rglob("TinySTS.json")
    task_file.write_text(task_file.read_text()[:100])
    with pytest.raises(ResultFileError, match=rf"{task_file}: cannot read"):
        mteb.evaluate(model, [sts_task()], cache=cache, **RUN)


# -- error_line: one line for each error class ------------------------------------------------------


@pytest.mark.parametrize(
    ("err", "expected"),
    [
        (FileNotFoundError(errno.ENOENT, "No such file or directory", "/x/y.json"),
         "/x/y.json: No such file or directory"),
        (PermissionError(errno.EACCES, "Permission denied", "/x"), "/x: Permission denied"),
        (IsADirectoryError(errno.EISDIR, "cache entry /c/a.npz is a folder"), "cache entry /c/a.npz is a folder"),
        (KeyError("gemma-4"), "unknown or missing key 'gemma-4'"),
        (KeyError("unknown panel model 'x'; known: a, b"), "unknown panel model 'x'; known: a, b"),
        (KeyError(3), "missing key 3"),
        (ValueError("line one\n  line two"), "line one line two"),
        (ConnectionError("Couldn't reach 'mteb/sts22' on the Hub (OfflineModeIsEnabled)"),
         f"Couldn't reach 'mteb/sts22' on the Hub (OfflineModeIsEnabled): {HUB_HINT}"),
    ],
)  # fmt: skip
def test_error_line_is_one_line_naming_the_thing(err, expected):
    assert error_line(err) == expected


# -- the same models through the Python API ---------------------------------------------------------


@pytest.mark.parametrize("entry", ["extract_layer_states", "with_layer_dynamics", "LayerExtractor"])
def test_python_entry_points_name_a_model_that_is_not_there(entry, tmp_path, monkeypatch):
    import mteb_lrd

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def load(model):
        if entry == "extract_layer_states":
            return mteb_lrd.extract_layer_states(model, ["a text"], show_progress_bar=False)
        return getattr(mteb_lrd, entry)(model)

    missing = tmp_path / "nope"
    with pytest.raises(FileNotFoundError, match=f"model {missing}: no such folder"):
        load(str(missing))
    with pytest.raises(FileNotFoundError, match="model ./nope: no such folder"):
        load("./nope")
    weights = tmp_path / "model.bin"
    weights.write_bytes(b"x")
    with pytest.raises(NotADirectoryError, match="is a file; give the model's folder"):
        load(weights)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(OSError, match="a folder without a loadable model") as folder_error:
        load(str(empty))
    with pytest.raises(
        OSError, match="'someorg/some-model': no such folder, and not a model id that could be loaded"
    ) as hub:
        load("someorg/some-model")
    for err in (folder_error.value, hub.value):
        assert "Repo id" not in str(err) and "pass a model folder" in str(err)
        assert "Errno None" not in str(err)  # one plain line
    assert "HF_HUB_OFFLINE is set" in str(hub.value)


def test_a_tilde_model_path_is_expanded(tiny_st_dir, monkeypatch):
    from mteb_lrd.extraction.loading import model_location

    monkeypatch.setenv("HOME", str(tiny_st_dir.parent))
    assert model_location(f"~/{tiny_st_dir.name}") == str(tiny_st_dir)
    assert model_location("org/name") == "org/name"  # a Hub id is left to the loader


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["select", "--report-only", "--out", "{tmp}/empty"],
         "mteb-lrd select: error: no records in {tmp}/empty/records"),
        (["prune-study", "--report-only", "--out", "{tmp}/empty"],
         "mteb-lrd prune-study: error: no records in {tmp}/empty/records"),
        (["panel", "prepare"], "mteb-lrd panel: error: name at least one model, or pass --all"),
        (["panel", "prepare", "no-such-model"], "mteb-lrd panel: error: unknown panel model(s) no-such-model; known: "),
    ],
)  # fmt: skip
def test_study_and_panel_commands_report_errors_as_one_line(argv, expected, tmp_path, capsys):
    assert main([arg.format(tmp=tmp_path) for arg in argv]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(expected.format(tmp=tmp_path))
