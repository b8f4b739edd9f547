"""Text + label families: Classification (a classifier trained on ``train``) and Clustering.

Rows hold ``text`` (a string) and ``label`` (a string or an integer; one kind per task). For
Classification the labels of all splits are mapped to ``0 .. K-1`` in sorted order (strings
alphabetically, integers numerically) before mteb sees them: mteb's binary average precision
assumes the positive class is ``1``, so two string labels (``"neg"`` / ``"pos"``) would crash in
scikit-learn and two integers other than 0 / 1 would too. With two labels, the one that sorts
second is the positive class. Every label of an evaluation split must occur in ``train``.
Clustering keeps the labels as they are (V-measure only compares partitions).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mteb_lrd.tasks.local_tasks.validation import LocalTaskError, Rows, label, text

__all__ = ["classification_splits", "clustering_split", "label_mapping"]


def _texts_and_labels(rows: Rows, what: str) -> tuple[list[str], list[str | int], list[str]]:
    rows.require(what)
    texts, labels = [], []
    for location, row in rows:
        texts.append(text(row, location, "text"))
        labels.append(label(row, location, "label"))
    return texts, labels, rows.locations


def _one_kind(labels: list[str | int], locations: list[str]) -> None:
    kind = type(labels[0])
    for value, location in zip(labels, locations, strict=True):
        if type(value) is not kind:
            raise LocalTaskError(
                f"{location}: label {value!r} ({type(value).__name__}) is not of the kind of "
                f"{labels[0]!r} ({kind.__name__}, at {locations[0]}); "
                "use one kind of label (all strings or all integers)"
            )


def label_mapping(labels: list[str | int]) -> dict[str | int, int]:
    """``{label: index}`` in sorted order: the deterministic mapping applied to classification labels."""
    return {value: index for index, value in enumerate(sorted(set(labels)))}


def classification_splits(splits: Mapping[str, Rows]) -> dict[str, Any]:
    """Classification splits (``train`` and the eval splits of one subset) with labels mapped to ``0 .. K-1``.

    Raises:
        LocalTaskError: for a missing or mistyped field, mixed label kinds, fewer than two labels in
            ``train``, or an eval label absent from ``train`` (each naming its file and line).
    """
    from datasets import Dataset

    if "train" not in splits:
        raise LocalTaskError("classification needs a 'train' split")
    ordered = {"train": splits["train"], **splits}  # train first: its labels are the reference
    parsed = {name: _texts_and_labels(rows, "labelled texts") for name, rows in ordered.items()}
    every_label = [value for _, labels, _ in parsed.values() for value in labels]
    every_location = [where for _, _, locations in parsed.values() for where in locations]
    _one_kind(every_label, every_location)
    train_labels = set(parsed["train"][1])
    if len(train_labels) < 2:
        raise LocalTaskError(
            f"{splits['train'].source}: only one label ({next(iter(train_labels))!r}); need two or more"
        )
    for _, labels, locations in parsed.values():
        for value, location in zip(labels, locations, strict=True):
            if value not in train_labels:
                raise LocalTaskError(
                    f"{location}: label {value!r} does not occur in {splits['train'].source}; "
                    f"train has {sorted(train_labels)}"
                )
    mapping = label_mapping(list(train_labels))
    return {
        name: Dataset.from_dict({"text": texts, "label": [mapping[value] for value in labels]})
        for name, (texts, labels, _) in parsed.items()
    }


def clustering_split(rows: Rows) -> Any:
    """A Clustering split: ``text`` and ``label`` per row (at least two distinct labels)."""
    from datasets import Dataset

    texts, labels, locations = _texts_and_labels(rows, "texts to cluster")
    _one_kind(labels, locations)
    if len(set(labels)) < 2:
        raise LocalTaskError(f"{rows.source}: only one label ({labels[0]!r}); clustering needs two or more")
    return Dataset.from_dict({"sentences": texts, "labels": labels})
