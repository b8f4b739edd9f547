"""The pruning study's statistics over cells (spec §6): score changes against Random per budget."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mteb_lrd.metrics.bootstrap import bootstrap_mean
from mteb_lrd.metrics.permutation import sign_flip
from mteb_lrd.metrics.statistics import wilcoxon_paired
from mteb_lrd.studies.exhaustive_reference import exhaustive_reference

__all__ = ["analyse_pruning", "pooled_vs_random", "random_seed_spread"]


def random_seed_spread(per_seed_means: Mapping[int, float]) -> dict[str, float]:
    """Random's spread over its seeds: mean, population std, min and max of the per-seed mean Δ.

    A rule whose mean Δ lies inside ``[min, max]`` is indistinguishable from some Random draw, however
    its Wilcoxon p-value against the seed-averaged Random looks.
    """
    values = np.array(list(per_seed_means.values()), dtype=np.float64)
    if values.size == 0:
        nan = float("nan")
        return {"n_seeds": 0, "mean": nan, "std": nan, "min": nan, "max": nan}
    return {
        "n_seeds": int(values.size),
        "mean": float(values.mean()),
        "std": float(values.std()),
        "min": float(values.min()),
        "max": float(values.max()),
    }


def _per_model(cells: list[tuple[str, str]], values: np.ndarray) -> np.ndarray:
    """The mean of ``values`` (one per cell) over each model's cells: the model as the unit."""
    models = list(dict.fromkeys(model for model, _ in cells))
    return np.array([values[[i for i, (m, _) in enumerate(cells) if m == model]].mean() for model in models])


def analyse_pruning(records: Sequence[Mapping[str, Any]], *, n_resamples: int = 10_000) -> dict[str, Any]:
    """Per budget and method: mean / median Δ, bootstrap CI of the mean, Wilcoxon vs Random, win share, speed-up.

    Random is the mean over its seeds within each cell; the other methods are paired with it by cell.
    Cells of one model are not independent: ``model_p_vs_random`` is an exact sign-flip test over
    models of each model's mean (over its tasks) of Δ − Random's Δ, with ``n_models`` its effective n
    (the cell-level Wilcoxon is kept, labelled as over cells that share models).
    Per budget, ``random_seeds`` gives Random's spread over seeds (:func:`random_seed_spread` of each
    seed's mean Δ over cells) and every method's entry says whether its mean Δ lies inside that range
    (``within_random_range``). ``base`` lists each cell's unpruned score and the decoder's text
    template: score changes of a model that does not do the task (a low base score) say nothing.
    ``exhaustive`` ranks each choice among every candidate set of its size where the records hold
    them (:func:`~mteb_lrd.studies.exhaustive_reference.exhaustive_reference`).
    """
    cells: dict[tuple[str, str], dict[tuple[str, float], list[dict[str, Any]]]] = {}
    base = [
        {
            "model": rec["model"]["name"],
            "task": rec["task"],
            "base_score": float(rec["base_score"]),
            "template": rec["model"].get("template"),
        }
        for rec in records
    ]
    for rec in records:
        key = (rec["model"]["name"], rec["task"])
        for choice in rec["choices"]:
            cells.setdefault(key, {}).setdefault((choice["method"], float(choice["budget"])), []).append(
                choice
            )
    budgets = sorted({b for per in cells.values() for _, b in per})
    methods = list(dict.fromkeys(m for per in cells.values() for m, _ in per))
    table: dict[str, dict[str, dict[str, float]]] = {}
    spreads: dict[str, dict[str, float]] = {}
    for budget in budgets:
        random = np.array([np.mean([c["delta"] for c in per[("random", budget)]]) for per in cells.values()])
        by_seed: dict[int, list[float]] = {}
        for per in cells.values():
            for c in per[("random", budget)]:
                by_seed.setdefault(int(c["seed"]), []).append(float(c["delta"]))
        complete = {s: float(np.mean(v)) for s, v in by_seed.items() if len(v) == len(cells)}
        spread = random_seed_spread(complete)
        spreads[f"{budget:g}"] = spread
        for method in methods:
            deltas = np.array(
                [np.mean([c["delta"] for c in per[(method, budget)]]) for per in cells.values()]
            )
            speed = np.array(
                [np.mean([c["speedup"] for c in per[(method, budget)]]) for per in cells.values()]
            )
            low, high = _interval_over_models(deltas, n_resamples)
            per_model = _per_model(list(cells), deltas - random)
            table.setdefault(method, {})[f"{budget:g}"] = {
                "mean": float(deltas.mean()),
                "median": float(np.median(deltas)),
                "ci_low": low,
                "ci_high": high,
                "wilcoxon_p_vs_random": float("nan")
                if method == "random"
                else wilcoxon_paired(deltas, random),
                "share_beats_random": float(np.mean(deltas > random)),
                "n_models": len(per_model),
                "model_p_vs_random": float("nan") if method == "random" else sign_flip(per_model).p,
                "speedup": float(speed.mean()),
                "random_spread": float(
                    np.mean([np.std([c["delta"] for c in per[("random", budget)]]) for per in cells.values()])
                ),
                "within_random_range": bool(spread["min"] <= deltas.mean() <= spread["max"]),
            }
    return {
        "cells": [list(k) for k in cells],
        "base": base,
        "budgets": budgets,
        "methods": methods,
        "table": table,
        "random_seeds": spreads,
        "exhaustive": exhaustive_reference(records),
    }


def _interval_over_models(deltas: np.ndarray, resamples: int) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean over models (NaN with a single model)."""
    if deltas.size < 2:
        return float("nan"), float("nan")
    interval = bootstrap_mean(deltas[None, :], resamples=resamples, seed=0, over="models")
    return float(interval.low[0]), float(interval.high[0])


def pooled_vs_random(
    records: Sequence[Mapping[str, Any]], methods: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Each method against Random over every budget and task, the model as the unit.

    Per model: the mean over its (task, budget) pairs of the method's Δ minus Random's mean Δ over
    seeds at that task and budget; then the exact sign-flip test over models
    (:func:`~mteb_lrd.metrics.permutation.sign_flip`).

    Returns:
        ``{method: {"difference", "p", "exact", "n_models", "n_cells"}}`` for the methods with a choice
        in some cell that also has Random.
    """
    per_model: dict[str, dict[str, list[float]]] = {}
    cells: dict[str, set[tuple[str, str]]] = {}
    for rec in records:
        name = rec["model"]["name"]
        by: dict[tuple[str, float], list[float]] = {}
        for choice in rec["choices"]:
            by.setdefault((choice["method"], float(choice["budget"])), []).append(float(choice["delta"]))
        for (method, budget), deltas in by.items():
            random = by.get(("random", budget))
            if method in methods and random:
                per_model.setdefault(method, {}).setdefault(name, []).append(
                    float(np.mean(deltas) - np.mean(random))
                )
                cells.setdefault(method, set()).add((name, rec["task"]))
    out = {}
    for method, models in per_model.items():
        means = np.array([np.mean(v) for v in models.values()])
        test = sign_flip(means)
        out[method] = {"difference": float(means.mean()), "p": test.p, "exact": test.exact,
                       "n_models": int(means.size), "n_cells": len(cells[method])}  # fmt: skip
    return out
