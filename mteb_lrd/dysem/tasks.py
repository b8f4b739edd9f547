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

from mteb_lrd import _compat

__all__ = ["DIMENSIONS_KEY", "MAIN_SCORE", "model_similarity_task"]

MAIN_SCORE = "spearman"
DIMENSIONS_KEY = "mean_dimensions"
_CLASSES: dict[type, type] = {}


def _score_subset(self: Any, model: Any, data_split: Any, **kwargs: Any) -> dict[str, Any]:
    """The task's own subset scoring, plus ``mean_dimensions`` from the model's last similarity."""
    if hasattr(model, "last_similarity_stats"):
        model.last_similarity_stats = None  # never report a previous subset's #Dim
    scores = getattr(super(type(self), self), _compat.SUBSET_METHODS[0])(model, data_split, **kwargs)
    stats = getattr(model, "last_similarity_stats", None) or {}
    if DIMENSIONS_KEY in stats:
        scores[DIMENSIONS_KEY] = float(stats[DIMENSIONS_KEY])
    return scores


def _fill_main_score(self: Any, scores: dict[str, Any]) -> None:
    scores["main_score"] = scores[MAIN_SCORE]


def _scored_by_model_similarity(cls: type[Any]) -> type[Any]:
    """A direct subclass of ``cls`` (same name and module; single inheritance, so instances can be
    re-classed) whose subset and main-score methods (mteb's private names, from
    :mod:`mteb_lrd._compat`) are the two functions above."""
    body = {
        _compat.SUBSET_METHODS[0]: _score_subset,
        _compat.MAIN_SCORE_METHOD: _fill_main_score,
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
    if cls in _CLASSES.values():  # already a copy scored by the model's similarity
        return copy.copy(task)
    if cls not in _CLASSES:
        _CLASSES[cls] = _scored_by_model_similarity(cls)
    wrapped = copy.copy(task)
    wrapped.__class__ = _CLASSES[cls]
    return wrapped
