"""Uncertainty of per-layer scores: a bootstrap over the pairs of an STS subset.

While the per-layer loop runs, :func:`captured_pair_scores` records the similarity series and the
gold scores that mteb's STS task correlates for its main score (the task's own
``_calculate_scores`` sees them); :func:`pair_interval` then resamples the pairs once for all
layers. Other task types have no per-item series exposed by mteb, so their per-layer scores carry
no interval.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from mteb_lrd import _compat
from mteb_lrd.metrics.bootstrap import bootstrap_spearman

__all__ = ["captured_pair_scores", "pair_interval"]

# STS main scores that are a Spearman correlation, and the evaluator's series each correlates
_SERIES = {"cosine_spearman": "cosine_scores", "spearman": "similarity_scores"}


@contextmanager
def captured_pair_scores(task: Any) -> Iterator[list[tuple[np.ndarray, np.ndarray]] | None]:
    """While active, each subset evaluation of an STS ``task`` appends ``(series, gold)``; yields
    ``None`` (and changes nothing) for other tasks and main scores."""
    from mteb.abstasks.sts import AbsTaskSTS

    key = _SERIES.get(str(task.metadata.main_score))
    original = getattr(task, _compat.STS_SCORES, None)
    if not isinstance(task, AbsTaskSTS) or key is None or not callable(original):
        yield None
        return
    captured: list[tuple[np.ndarray, np.ndarray]] = []

    def calculate(scores: Any, normalized_scores: list[float]) -> Any:
        series = scores.get(key)
        if series is None:  # no similarity function of its own: mteb falls back on cosine
            series = scores["cosine_scores"]
        captured.append(
            (np.asarray(series, dtype=np.float64), np.asarray(normalized_scores, dtype=np.float64))
        )
        return original(scores, normalized_scores)

    setattr(task, _compat.STS_SCORES, calculate)
    try:
        yield captured
    finally:
        delattr(task, _compat.STS_SCORES)


def pair_interval(captured: list[tuple[np.ndarray, np.ndarray]] | None, layers: int) -> dict[str, Any] | None:
    """The per-layer bootstrap interval over pairs (see :func:`~mteb_lrd.metrics.bootstrap.bootstrap_spearman`)
    from one capture per layer; ``None`` when the captures do not line up (another count, other
    gold scores) or there are fewer than 3 pairs."""
    if captured is None or len(captured) != layers or layers == 0:
        return None
    gold = captured[0][1]
    if gold.size < 3 or any(g.shape != gold.shape or not np.array_equal(g, gold) for _, g in captured):
        return None
    series = np.stack([s for s, _ in captured])
    return bootstrap_spearman(series, gold, over="pairs").to_dict()
