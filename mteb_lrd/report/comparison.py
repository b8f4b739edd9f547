"""Like with like: which tasks a leaderboard may average over, and which LRD scores may be averaged.

A model-level column (mean score, best layer, LRD scores) is computed over the **shared tasks**:
the tasks every row of the table has. A row with more tasks keeps them in its task columns, but they
never enter a number that is compared with a row that lacks them.

The LRD scores differ in how their scale depends on the number of texts N they were computed on:

- Frenet (d0L, speed, curvature) are angles between r-dimensional subspaces: their range does not
  depend on N (N only changes the sampling noise), so they average across tasks.
- NRS (Jaccard of k-nearest-neighbour sets, fixed k) depends on N: the neighbourhood of k points is
  a smaller share of a larger sample, and chance agreement is about k / N.
- GFMI is unnormalised mutual information (nats × percentile): it grows with N.

NRS and GFMI summaries are therefore averaged, or compared across rows, only when every row used the
same number of texts on every task averaged (the caps give every model the same subset of a task).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mteb_lrd.report.result_files import ModelVariant

__all__ = [
    "N_DEPENDENT_METRICS",
    "Comparability",
    "comparable_lrd",
    "mean_over",
    "metric_of",
    "shared_tasks",
]

# The LRD metric families whose scale depends on the number of texts (see the module docstring).
N_DEPENDENT_METRICS = frozenset({"nrs", "gfmi"})


def metric_of(summary_key: str) -> str:
    """The metric family of a summary key: ``frenet_d0L`` -> ``frenet``."""
    return summary_key.split("_", 1)[0]


def shared_tasks(variants: Sequence[ModelVariant], tasks: Sequence[str]) -> list[str]:
    """The tasks of ``tasks`` (in that order) that every variant has; ``[]`` without variants."""
    if not variants:
        return []
    return [task for task in tasks if all(task in variant.tasks for variant in variants)]


@dataclass(frozen=True)
class Comparability:
    """Whether a model-level LRD score may be compared across the rows of a table.

    Attributes:
        comparable: ``True`` when the score may be averaged over the shared tasks and compared.
        reason: why not (``""`` when comparable).
    """

    comparable: bool
    reason: str = ""


def comparable_lrd(variants: Sequence[ModelVariant], summary_key: str, tasks: Sequence[str]) -> Comparability:
    """Whether ``summary_key`` averaged over ``tasks`` is comparable across ``variants``.

    Frenet scores always are (given shared tasks); NRS and GFMI scores only when the number of texts
    each used (``n_used``) is one and the same value for every variant and task.
    """
    if not tasks:
        return Comparability(False, "no task is shared by every row")
    metric = metric_of(summary_key)
    if metric not in N_DEPENDENT_METRICS:
        return Comparability(True)
    counts = {variant.tasks[task].n_used().get(metric) for variant in variants for task in tasks}
    if None in counts:
        return Comparability(False, "the number of texts it used is not recorded everywhere")
    if len(counts) > 1:
        low, high = min(counts), max(counts)  # type: ignore[type-var]
        return Comparability(False, f"computed on different numbers of texts ({low}–{high})")
    return Comparability(True)


def mean_over(values: Sequence[float | None]) -> float | None:
    """The mean of ``values``; ``None`` when any is missing or non-finite (never a partial mean)."""
    if not values or any(v is None or not np.isfinite(v) for v in values):
        return None
    return float(np.mean(values))  # type: ignore[arg-type]
