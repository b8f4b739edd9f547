"""Sentence-pair families: STS (graded score), PairClassification (0 / 1 label), BitextMining (aligned rows).

Each ``<split>.jsonl`` row holds ``sentence1`` and ``sentence2`` (strings) and, for STS, a finite
``score`` within the task's ``score_range``; for PairClassification a ``label`` (or ``labels``) that
is 0 or 1 (``true`` / ``false`` and ``1.0`` / ``0.0`` accepted; ``0.7`` is an error, never
truncated). BitextMining rows are translations of each other: row ``i``'s ``sentence1`` must be
found among all ``sentence2``.
"""

from __future__ import annotations

from typing import Any

from mteb_lrd.tasks.local_tasks.validation import (
    LocalTaskError,
    Rows,
    first_present,
    integer,
    number,
    text,
)

__all__ = ["bitext_split", "pair_split", "sts_split"]


def _sentences(rows: Rows) -> tuple[list[str], list[str]]:
    first, second = [], []
    for location, row in rows:
        first.append(text(row, location, "sentence1"))
        second.append(text(row, location, "sentence2"))
    return first, second


def sts_split(rows: Rows, score_range: tuple[float, float]) -> Any:
    """An STS split: ``sentence1``, ``sentence2``, ``score`` (finite, within ``score_range``)."""
    from datasets import Dataset

    rows.require("sentence pairs")
    first, second = _sentences(rows)
    scores = [number(row, location, "score", bounds=score_range) for location, row in rows]
    if len(set(scores)) < 2:
        raise LocalTaskError(
            f"{rows.source}: every score is {scores[0]}; a correlation needs at least two values"
        )
    return Dataset.from_dict({"sentence1": first, "sentence2": second, "score": scores})


def pair_split(rows: Rows) -> Any:
    """A PairClassification split: ``sentence1``, ``sentence2``, ``label`` / ``labels`` in {0, 1}."""
    from datasets import Dataset

    rows.require("sentence pairs")
    key = first_present(rows, ("labels", "label"))
    first, second = _sentences(rows)
    labels = [integer(row, location, key, allowed=(0, 1)) for location, row in rows]
    return Dataset.from_dict({"sentence1": first, "sentence2": second, "labels": labels})


def bitext_split(rows: Rows) -> Any:
    """A BitextMining split: ``sentence1`` and its translation ``sentence2`` on each row."""
    from datasets import Dataset

    rows.require("sentence pairs")
    first, second = _sentences(rows)
    return Dataset.from_dict({"sentence1": first, "sentence2": second})
