"""A DySem study run in chunks of test pairs, joined into the whole study's table and comparisons.

A study longer than one run (a 1.5B model on a CPU: hours) is split by ``mteb-lrd dysem --rows
START:STOP``: each chunk scores only those pairs of every test set, reuses the first chunk's dev
choices (``--choices-from``) and writes a summary with its per-pair predictions. :func:`assemble`
checks that the chunks were made with the same choices and cover every pair exactly once, and
computes from the joined predictions what one run over all pairs reports: Spearman × 100 per method
and task, the mean #Dim (weighted by pairs), and the paired bootstrap of DySem against each method.
Pure: summaries in, summary out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from mteb_lrd.metrics.statistics import PAIRED_RESAMPLES, PAIRED_SEED

__all__ = ["SHARED_KEYS", "assemble", "coverage"]

SHARED_KEYS: tuple[str, ...] = ("dev", "language_order", "settings", "source_k", "prompt", "component",
                                "dtype", "max_pairs", "baselines", "grid")  # fmt: skip
"""What every chunk of one study must share (the model's identity is part of ``dev``)."""


def coverage(chunks: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
    """Per task: the pairs the chunks cover and the task's total (overlaps counted once)."""
    spans: dict[str, set[int]] = {}
    totals: dict[str, int] = {}
    for chunk in chunks:
        for task, described in chunk["tasks"].items():
            start, stop = described["rows"]
            spans.setdefault(task, set()).update(range(start, stop))
            totals[task] = int(described["total_pairs"])
    return {task: (len(spans[task]), totals[task]) for task in spans}


def _check(chunks: Sequence[Mapping[str, Any]]) -> None:
    if not chunks:
        raise ValueError("no chunk summaries to assemble")
    for i, chunk in enumerate(chunks):
        if "predictions" not in chunk or any("rows" not in d for d in chunk["tasks"].values()):
            raise ValueError(f"summary {i} is not a chunk (run with --rows START:STOP)")
        if not chunk["tasks"]:
            raise ValueError(f"chunk {i} holds no test pair")
        differ = [key for key in SHARED_KEYS if chunk.get(key) != chunks[0].get(key)]
        if differ:
            raise ValueError(f"chunk {i} was made with other {', '.join(differ)} than chunk 0")


def _ordered(chunks: Sequence[Mapping[str, Any]], task: str) -> list[Mapping[str, Any]]:
    """The chunks holding ``task``, by row; raises ValueError unless they tile its pairs exactly."""
    holding = sorted((c for c in chunks if task in c["tasks"]), key=lambda c: c["tasks"][task]["rows"][0])
    expected = 0
    for chunk in holding:
        start, stop = chunk["tasks"][task]["rows"]
        if start != expected:
            problem = "overlap" if start < expected else "are missing"
            raise ValueError(f"{task}: rows {min(start, expected)}-{max(start, expected)} {problem}")
        expected = stop
    total = int(holding[0]["tasks"][task]["total_pairs"])
    if expected != total:
        raise ValueError(f"{task}: rows {expected}-{total} are missing")
    return holding


def _joined(holding: Sequence[Mapping[str, Any]], task: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Gold scores and each method's similarities over all pairs (methods every chunk ran)."""
    parts = [chunk["predictions"][task] for chunk in holding]
    gold = np.concatenate([np.asarray(p["gold"], dtype=np.float64) for p in parts])
    methods = list(parts[0]["models"])
    if any(list(p["models"]) != methods for p in parts):
        ran = sorted({m for p in parts for m in p["models"]})
        raise ValueError(f"{task}: the chunks ran different methods ({', '.join(ran)})")
    return gold, {
        m: np.concatenate([np.asarray(p["models"][m], dtype=np.float64) for p in parts]) for m in methods
    }


def _common_run(chunks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The settings every chunk was asked alike (their ``run`` fields with one value in all; the
    first chunk alone also records the inputs of the dev choices the others reuse)."""
    runs = [dict(c.get("run") or {}) for c in chunks]
    return {key: value for key, value in runs[0].items() if all(key in r and r[key] == value for r in runs)}


def _dimensions(holding: Sequence[Mapping[str, Any]], task: str, method: str) -> float:
    """The mean #Dim over all pairs: the chunks' means weighted by their pairs."""
    means = [float(c["table"][method][task]["mean_dimensions"]) for c in holding]
    pairs = [int(c["tasks"][task]["pairs"]) for c in holding]
    return float(np.average(means, weights=pairs))


def assemble(chunks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The summary one run over every pair would give, from the summaries of its chunks.

    Args:
        chunks: chunk summaries (``mteb-lrd dysem --rows``), in any order.

    Returns:
        A summary as :func:`mteb_lrd.dysem.study.run_study` writes (``table``, ``paired``, ...),
        with ``chunks``: each chunk's rows per task, and no per-pair predictions.

    Raises:
        ValueError: no chunk, a summary that is not a chunk, chunks made with other choices, or
            chunks that miss or overlap pairs (named).
    """
    from mteb_lrd.metrics.statistics import paired_spearman_difference

    _check(chunks)
    chunks = sorted(chunks, key=lambda c: min(d["rows"][0] for d in c["tasks"].values()))
    first = chunks[0]
    reference = first["paired"]["reference"]
    tasks = list(dict.fromkeys(t for chunk in chunks for t in chunk["tasks"]))
    table: dict[str, dict[str, dict[str, float]]] = {method: {} for method in first["table"]}
    paired: dict[str, dict[str, dict[str, float | int]]] = {}
    described: dict[str, dict[str, Any]] = {}
    for task in tasks:
        holding = _ordered(chunks, task)
        gold, similarities = _joined(holding, task)
        described[task] = {
            "pairs": len(gold),
            "translations": all(c["tasks"][task]["translations"] for c in holding),
        }
        for method, values in similarities.items():
            table[method][task] = {"spearman": 100 * float(spearmanr(gold, values)[0]),
                                                  "mean_dimensions": _dimensions(holding, task, method)}  # fmt: skip
        if reference in similarities:
            paired[task] = {
                other: paired_spearman_difference(similarities[reference], values, gold,
                                                  n_resamples=PAIRED_RESAMPLES, seed=PAIRED_SEED).to_dict()
                for other, values in similarities.items() if other != reference
            }  # fmt: skip
    summary = {
        key: value for key, value in first.items() if key not in ("tasks", "table", "paired", "predictions")
    }
    summary.update(tasks=described, table=table,
                   paired={"reference": reference, "n_resamples": PAIRED_RESAMPLES, "seed": PAIRED_SEED,
                           "tasks": paired},
                   run=_common_run(chunks),
                   chunks=[{t: d["rows"] for t, d in c["tasks"].items()} for c in chunks],
                   forward_texts=sum(int(c["forward_texts"]) for c in chunks),
                   forward_batches=sum(int(c["forward_batches"]) for c in chunks),
                   wall_seconds=sum(float(c["wall_seconds"]) for c in chunks))  # fmt: skip
    return summary
