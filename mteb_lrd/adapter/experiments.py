"""Pruned models as mteb experiments of their base model, however mteb meets them.

A pruned model (:func:`mteb_lrd.prune`) is an ordinary SentenceTransformer or transformers model;
its pruning record lives on the transformers config (``config.mteb_lrd_pruning``), so it survives
``save`` / ``save_pretrained`` / ``push_to_hub`` and a plain reload. mteb builds a
SentenceTransformer's metadata in the public classmethod ``ModelMeta.from_sentence_transformer_model``
(``mteb.evaluate(st, ...)`` wraps every SentenceTransformer in ``SentenceTransformerEncoderWrapper``,
which calls it). :func:`install_hook` wraps that classmethod so that a model carrying a record gets the
base model's name and revision, the pruning as ``experiment_kwargs`` (results go to
``<base>/<revision>/experiments/<removed blocks ...>/``, next to the base and never over it) and its
real parameter count (``model_meta.json`` of the experiment). Models without a record are untouched.

The hook is installed when :func:`mteb_lrd.prune` builds a pruned model and by the mteb plugin
(``plugins/``); :func:`mteb_lrd.with_layer_dynamics` and the ``mteb-lrd`` commands name pruned models
through :func:`pruned_meta` directly. In a program that only loads a saved pruned folder and calls
plain ``mteb.evaluate``, call :func:`install_hook` first.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from mteb.models import ModelMeta

from mteb_lrd.extraction.architectures import locate
from mteb_lrd.models.pruning_record import in_base_numbering, pruning_record

__all__ = [
    "EXPERIMENT_KEYS",
    "experiment_kwargs",
    "install_hook",
    "hook_installed",
    "pruned_meta",
    "variant_meta",
]

EXPERIMENT_KEYS: tuple[str, ...] = ("removed_blocks", "num_blocks", "rule", "budget")
"""Record fields that name the experiment (the base model's name and revision name the folder above)."""

_ORIGINAL = "__mteb_lrd_original__"


def experiment_kwargs(record: Mapping[str, Any]) -> dict[str, Any]:
    """The experiment part of a pruning record (``removed_blocks``, ``num_blocks``, ``rule``, ``budget``)."""
    return {key: record[key] for key in EXPERIMENT_KEYS if record.get(key) is not None}


def _parameter_count(model: object) -> int | None:
    parameters = getattr(model, "parameters", None)
    if not callable(parameters):
        return None
    return int(sum(p.numel() for p in parameters()))


def pruned_meta(meta: ModelMeta, model: object) -> ModelMeta:
    """``meta`` updated for a pruned ``model``; unchanged when the model carries no pruning record.

    The name and revision become the base model's (unless the record has none), the record's
    experiment fields join ``experiment_kwargs`` (other experiment settings, e.g. mteb's
    ``output_dtypes``, are kept), and ``n_parameters`` / ``memory_usage_mb`` are the pruned model's own.
    """
    record = pruning_record(model)
    if record is None:
        return meta
    updates: dict[str, Any] = {
        "experiment_kwargs": {**dict(meta.experiment_kwargs or {}), **experiment_kwargs(record)}
    }
    if record.get("base_model"):
        updates["name"] = record["base_model"]
        updates["revision"] = record.get("base_revision") or "no_revision_available"
    return _with_parameters(meta.model_copy(update=updates), _parameter_count(model))


def _with_parameters(meta: ModelMeta, count: int | None) -> ModelMeta:
    """``meta`` with ``count`` parameters and the memory they take (unchanged for ``None``)."""
    if count is None:
        return meta
    counted = meta.model_copy(update={"n_parameters": count})
    return counted.model_copy(
        update={"memory_usage_mb": counted.calculate_memory_usage_mb(fetch_from_hf=False)}
    )


def variant_meta(meta: ModelMeta, model: object, blocks: Sequence[int]) -> ModelMeta:
    """``meta`` (mteb's, of ``model``) for the variant of ``model`` without ``blocks``: the
    experiment a copy pruned by :func:`mteb_lrd.prune` is stored under, with its parameter count, so
    a variant's results never land on the full model's. Unchanged for no blocks.

    The variant of a model pruned by a rule drops the rule and budget: its blocks are not the rule's
    choice (as :func:`mteb_lrd.prune` records a pruned model pruned further)."""
    if not blocks:
        return meta
    located = locate(model)
    removed, num_blocks = in_base_numbering(pruning_record(model), blocks, located.num_blocks)
    kept = {k: v for k, v in dict(meta.experiment_kwargs or {}).items() if k not in EXPERIMENT_KEYS}
    kwargs = {**kept, "removed_blocks": removed, "num_blocks": num_blocks}
    count = _parameter_count(model)
    if count is not None:
        count -= sum(p.numel() for b in set(blocks) for p in located.blocks[b].parameters())
    return _with_parameters(meta.model_copy(update={"experiment_kwargs": kwargs}), count)


def hook_installed() -> bool:
    """Whether ``ModelMeta.from_sentence_transformer_model`` is wrapped."""
    return hasattr(ModelMeta.__dict__["from_sentence_transformer_model"].__func__, _ORIGINAL)


def install_hook() -> None:
    """Wrap ``ModelMeta.from_sentence_transformer_model`` (public) so pruned models become experiments.

    Idempotent; models without a pruning record get exactly mteb's own metadata.
    """
    if hook_installed():
        return
    original = ModelMeta.__dict__["from_sentence_transformer_model"].__func__

    @functools.wraps(original)
    def from_sentence_transformer_model(cls: type[ModelMeta], model: Any, *args: Any, **kwargs: Any) -> Any:
        return pruned_meta(original(cls, model, *args, **kwargs), model)

    setattr(from_sentence_transformer_model, _ORIGINAL, original)
    ModelMeta.from_sentence_transformer_model = classmethod(from_sentence_transformer_model)  # type: ignore[method-assign,assignment]
