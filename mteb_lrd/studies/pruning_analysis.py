"""The pruning study's statistics over cells (spec §6): score changes against Random per budget."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mteb_lrd.studies.statistics import bootstrap_ci, wilcoxon_paired

__all__ = ["analyse_pruning"]


def analyse_pruning(records: Sequence[Mapping[str, Any]], *, n_resamples: int = 10_000) -> dict[str, Any]:
    """Per budget and method: mean / median Δ, bootstrap CI of the mean, Wilcoxon vs Random, win share, speed-up.

    Random is the mean over its seeds within each cell; the other methods are paired with it by cell.
    """
    cells: dict[tuple[str, str], dict[tuple[str, float], list[dict[str, Any]]]] = {}
    for rec in records:
        key = (rec["model"]["name"], rec["task"])
        for choice in rec["choices"]:
            cells.setdefault(key, {}).setdefault((choice["method"], float(choice["budget"])), []).append(
                choice
            )
    budgets = sorted({b for per in cells.values() for _, b in per})
    methods = list(dict.fromkeys(m for per in cells.values() for m, _ in per))
    table: dict[str, dict[str, dict[str, float]]] = {}
    for budget in budgets:
        random = np.array([np.mean([c["delta"] for c in per[("random", budget)]]) for per in cells.values()])
        for method in methods:
            deltas = np.array(
                [np.mean([c["delta"] for c in per[(method, budget)]]) for per in cells.values()]
            )
            speed = np.array(
                [np.mean([c["speedup"] for c in per[(method, budget)]]) for per in cells.values()]
            )
            low, high = bootstrap_ci(deltas, n_resamples=n_resamples, seed=0)
            table.setdefault(method, {})[f"{budget:g}"] = {
                "mean": float(deltas.mean()),
                "median": float(np.median(deltas)),
                "ci_low": low,
                "ci_high": high,
                "wilcoxon_p_vs_random": float("nan")
                if method == "random"
                else wilcoxon_paired(deltas, random),
                "share_beats_random": float(np.mean(deltas > random)),
                "speedup": float(speed.mean()),
                "random_spread": float(
                    np.mean([np.std([c["delta"] for c in per[("random", budget)]]) for per in cells.values()])
                ),
            }
    return {"cells": [list(k) for k in cells], "budgets": budgets, "methods": methods, "table": table}
