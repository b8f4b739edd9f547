"""The exhaustive pruning reference: every candidate block set of a size scored, and each method's
choice of that size ranked among them (its percentile, with the oracle, the median and the worst set
beside it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mteb_lrd.pruning.rules import block_key

__all__ = ["exhaustive_reference", "midrank_percentile"]


def midrank_percentile(reference: Sequence[float] | np.ndarray, value: float) -> float:
    """``100 · (#sets below + ½ · #sets tied) / #sets``: where ``value`` falls among ``reference``
    (0: below every set, 100: above every set, 50: the median; ties share their ranks).

    Raises:
        ValueError: an empty reference.
    """
    ref = np.asarray(reference, dtype=np.float64)
    if ref.size == 0:
        raise ValueError("the reference has no block set")
    below = np.count_nonzero(ref < value)
    tied = np.count_nonzero(ref == value)
    return float(100.0 * (below + 0.5 * tied) / ref.size)


def _cell_rows(record: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One cell's reference rows (per size) and choice rows (per method and size: its distinct sets, and
    a seeded method's (Random's) distinct draws, so two seeds that drew one set count twice)."""
    model, task = record["model"]["name"], record["task"]
    references, choices = [], []
    for size, sets in sorted(record.get("subsets", {}).items(), key=lambda item: int(item[0])):
        keys = list(sets)
        deltas = np.array([sets[k] for k in keys], dtype=np.float64)
        order = np.argsort(deltas, kind="stable")
        references.append({
            "model": model, "task": task, "size": int(size), "n_sets": int(deltas.size),
            "oracle": float(deltas[order[-1]]), "oracle_blocks": keys[order[-1]],
            "median": float(np.median(deltas)),
            "worst": float(deltas[order[0]]), "worst_blocks": keys[order[0]],
        })  # fmt: skip
        seen: set[tuple[str, Any, str]] = set()
        for choice in record["choices"]:
            key = block_key(choice["blocks"])
            draw = (choice["method"], choice.get("seed"), key)  # a seeded method's draws count one each
            if len(choice["blocks"]) != int(size) or draw in seen:
                continue
            seen.add(draw)
            choices.append({
                "model": model, "task": task, "size": int(size), "method": choice["method"], "blocks": key,
                "delta": float(choice["delta"]), "percentile": midrank_percentile(deltas, float(choice["delta"])),
            })  # fmt: skip
    return references, choices


def exhaustive_reference(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The reference over the cells whose records hold ``subsets`` (``--all-subsets``).

    Returns:
        ``{"cells": per (model, task, size) the number of sets, the oracle / median / worst Δ and the
        oracle's and worst's blocks; "choices": per (model, task, size, method, distinct block set)
        its Δ and percentile (per seed for Random); "summary": per (method, size) the mean percentile over models (each
        model's mean over its cells and distinct sets first: the model is the unit), with
        ``n_models`` and ``n_cells``}``; empty lists when no record has subsets.
    """
    cells: list[dict[str, Any]] = []
    choices: list[dict[str, Any]] = []
    for record in records:
        references, chosen = _cell_rows(record)
        cells += references
        choices += chosen
    summary = []
    for method, size in sorted({(c["method"], c["size"]) for c in choices}, key=lambda k: (k[1], k[0])):
        rows = [c for c in choices if c["method"] == method and c["size"] == size]
        models = sorted({c["model"] for c in rows})
        per_model = [np.mean([c["percentile"] for c in rows if c["model"] == m]) for m in models]
        summary.append({
            "method": method, "size": size, "mean_percentile": float(np.mean(per_model)),
            "per_model": dict(zip(models, map(float, per_model), strict=True)),
            "n_models": len(models), "n_cells": len({(c["model"], c["task"]) for c in rows}),
        })  # fmt: skip
    return {"cells": cells, "choices": choices, "summary": summary}
