"""Leaderboard tables: one row per model or variant (never averaged together), Markdown output."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mteb_lrd.integration.results import ModelVariant

__all__ = ["LRD_COLUMNS", "Leaderboard", "leaderboard", "to_markdown"]

# Model-level LRD scores shown in the table, d0L first (the paper's strongest selection score).
LRD_COLUMNS: dict[str, str] = {
    "frenet_d0L": "d0L",
    "nrs_mean_jaccard": "NRS mean J",
    "gfmi_mean_auc": "GFMI mean AUC",
}


@dataclass(frozen=True)
class Leaderboard:
    """A table: ``columns`` names, ``rows`` of cells (``None`` = missing), ``tasks`` in column order."""

    columns: list[str]
    rows: list[list[Any]]
    tasks: list[str]


def _variant_cell(variant: ModelVariant) -> str:
    kwargs = variant.experiment_kwargs or {}
    if not kwargs:
        return "base"
    parts = []
    if "removed_blocks" in kwargs:
        parts.append(f"removed {kwargs['removed_blocks']} of {kwargs.get('num_blocks', '?')}")
    parts.extend(f"{key}={kwargs[key]}" for key in ("rule", "budget") if key in kwargs)
    parts.extend(
        f"{k}={v}" for k, v in kwargs.items() if k not in ("removed_blocks", "num_blocks", "rule", "budget")
    )
    return ", ".join(parts)


def leaderboard(
    variants: Sequence[ModelVariant],
    tasks: Sequence[str] | None = None,
    lrd_columns: dict[str, str] | None = None,
) -> Leaderboard:
    """Build the leaderboard.

    Args:
        variants: from :func:`mteb_lrd.integration.results.load_variants`.
        tasks: task columns, in order; default: every task seen, sorted.
        lrd_columns: ``{summary key: column title}``; default :data:`LRD_COLUMNS`.

    Returns:
        Columns ``Model``, ``Variant``, one per task (main score × 100), ``Mean`` (over the tasks the
        variant has, ``None`` when one is missing), then the LRD model-level scores averaged over tasks.
        Rows sorted by mean score, best first.
    """
    lrd_columns = LRD_COLUMNS if lrd_columns is None else lrd_columns
    task_names = list(tasks) if tasks is not None else sorted({t for v in variants for t in v.tasks})
    rows = []
    for variant in variants:
        scores = [variant.tasks[t].main_score * 100 if t in variant.tasks else None for t in task_names]
        mean = float(np.mean(scores)) if scores and all(s is not None for s in scores) else None
        summary = variant.lrd_summary()
        rows.append(
            [variant.model, _variant_cell(variant), *scores, mean, *(summary.get(k) for k in lrd_columns)]
        )
    rows.sort(
        key=lambda row: (row[2 + len(task_names)] is None, -(row[2 + len(task_names)] or 0.0), row[0], row[1])
    )
    columns = ["Model", "Variant", *task_names, "Mean", *lrd_columns.values()]
    return Leaderboard(columns, rows, task_names)


def _format(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.2f}" if abs(value) >= 1 or value == 0 else f"{value:.3f}"
    return str(value).replace("|", "\\|")


def to_markdown(board: Leaderboard) -> str:
    """The table as GitHub Markdown."""
    lines = [
        "| " + " | ".join(board.columns) + " |",
        "|" + "|".join(["---"] * 2 + ["---:"] * (len(board.columns) - 2)) + "|",
    ]
    lines.extend("| " + " | ".join(_format(cell) for cell in row) + " |" for row in board.rows)
    return "\n".join(lines) + "\n"
