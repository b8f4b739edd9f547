"""Scoring STS tasks by the model's own similarity, with its joint-set size recorded.

MTEB's STS tasks take ``cosine_spearman`` as the main score and compute it on whatever ``encode``
returned; DySem's similarity is not a cosine of fixed vectors, so MTEB records it under
``spearman`` (the model's similarity function). :func:`model_similarity_task` returns a copy of a
task whose main score is that ``spearman`` and whose scores gain ``mean_dimensions`` (the mean
``|S(x) ∪ S(y)|``, "#Dim", or ``d`` for a dense model). For a cosine model both main scores agree.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["model_similarity_task", "MAIN_SCORE", "DIMENSIONS_KEY"]

MAIN_SCORE = "spearman"
DIMENSIONS_KEY = "mean_dimensions"
_CLASSES: dict[type, type] = {}


def _scored_by_model_similarity(cls: type) -> type:
    """A subclass of the STS task class ``cls`` (single inheritance, so instances can be re-classed)."""

    def _evaluate_subset(self: Any, model: Any, data_split: Any, **kwargs: Any) -> Any:
        if hasattr(model, "last_similarity_stats"):
            model.last_similarity_stats = None  # never report a previous subset's #Dim
        scores = cls._evaluate_subset(self, model, data_split, **kwargs)
        stats = getattr(model, "last_similarity_stats", None) or {}
        if DIMENSIONS_KEY in stats:
            scores[DIMENSIONS_KEY] = float(stats[DIMENSIONS_KEY])
        return scores

    def _add_main_score(self: Any, scores: dict[str, Any]) -> None:
        scores["main_score"] = scores[MAIN_SCORE]

    body = {
        "_evaluate_subset": _evaluate_subset,
        "_add_main_score": _add_main_score,
        "__module__": cls.__module__,
    }
    return type(cls.__name__, (cls,), body)


def model_similarity_task(task: Any) -> Any:
    """A copy of the STS task ``task`` scored by the model's own similarity (``spearman``).

    Args:
        task: an instance of an MTEB ``AbsTaskSTS`` subclass.

    Raises:
        TypeError: for a task of another type.
    """
    from mteb.abstasks.sts import AbsTaskSTS

    if not isinstance(task, AbsTaskSTS):
        raise TypeError(f"model_similarity_task needs an STS task, got {type(task).__name__}")
    cls = type(task)
    if cls not in _CLASSES:
        _CLASSES[cls] = _scored_by_model_similarity(cls)
    wrapped = copy.copy(task)
    wrapped.__class__ = _CLASSES[cls]
    return wrapped
