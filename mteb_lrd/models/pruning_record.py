"""The pruning record a pruned model carries on its transformers config (``config.mteb_lrd_pruning``):
base model and revision, removed blocks in the base model's numbering, number of blocks, rule and
budget. It survives ``save`` / ``save_pretrained`` and a plain reload."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mteb_lrd.extraction.architectures import UnsupportedArchitectureError, unwrap_transformers_model

__all__ = ["PRUNING_CONFIG_KEY", "in_base_numbering", "pruning_record"]

PRUNING_CONFIG_KEY = "mteb_lrd_pruning"
"""Attribute of the transformers config that holds the pruning record (saved in ``config.json``)."""


def pruning_record(model: object) -> dict[str, Any] | None:
    """The pruning record of a model (SentenceTransformer, transformers model or mteb wrapper), or ``None``."""
    for candidate in (model, getattr(model, "model", None)):
        if candidate is None:
            continue
        try:
            config = getattr(unwrap_transformers_model(candidate), "config", None)
        except UnsupportedArchitectureError:
            continue
        record = getattr(config, PRUNING_CONFIG_KEY, None)
        if isinstance(record, Mapping) and record.get("removed_blocks"):
            return dict(record)
    return None


def in_base_numbering(
    previous: Mapping[str, Any] | None, removed: Sequence[int], num_blocks: int
) -> tuple[list[int], int]:
    """Blocks ``removed`` from a model of ``num_blocks`` blocks, numbered as in its base model when
    the model is itself pruned (``previous``: its pruning record), and the base's number of blocks."""
    if previous is None:
        return sorted(int(b) for b in removed), num_blocks
    kept = [i for i in range(previous["num_blocks"]) if i not in set(previous["removed_blocks"])]
    return sorted([*previous["removed_blocks"], *(kept[i] for i in removed)]), int(previous["num_blocks"])
