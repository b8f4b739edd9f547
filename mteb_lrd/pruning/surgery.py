"""Removing or skipping transformer blocks: the pruned-model wrapper and a reversible scan mode.

Block ``i`` is the module ``blocks[i]`` (``model.encoder.layer[i]``, ``model.layers[i]``, ...), the
block that *produces* hidden state ``h_{i+1}``. Removing a block deletes it from its ``ModuleList``
and keeps the model self-consistent: ``config.num_hidden_layers``, ``config.layer_types`` and every
``layer_idx`` attribute (which indexes the KV cache) follow the kept blocks. Replacing a block by a
pass-through module instead would silently shift hidden-state indices, and changing only
``num_hidden_layers`` silently truncates Qwen2-style models (see the integration spec).
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from torch import nn

from mteb_lrd.extraction.architectures import locate, unwrap_transformers_model

__all__ = [
    "PRUNING_CONFIG_KEY",
    "PRUNING_FILE",
    "PrunedModel",  # noqa: F822 (built lazily, see __getattr__)
    "choose_blocks",
    "prune",
    "skip_blocks",
    "validate_blocks",
]

# Sidecar written next to a saved pruned SentenceTransformer so the experiment metadata survives a
# save / load round trip (the model itself reloads as a plain SentenceTransformer without it).
PRUNING_FILE = "mteb_lrd_pruning.json"
# The same record on the transformers config: it travels with save_pretrained / SentenceTransformer.save,
# so a pruned model loaded any way is still scored as an experiment by with_layer_dynamics.
PRUNING_CONFIG_KEY = "mteb_lrd_pruning"


def _record_on_config(model: object, experiment_kwargs: dict) -> None:
    setattr(unwrap_transformers_model(model).config, PRUNING_CONFIG_KEY, dict(experiment_kwargs))


def validate_blocks(blocks: Sequence[int], num_blocks: int) -> list[int]:
    """Check a list of block indices against a model with ``num_blocks`` blocks.

    Args:
        blocks: indices of the blocks to remove, ``0 <= i < num_blocks``.
        num_blocks: number of transformer blocks ``L`` of the model.

    Returns:
        The indices, sorted ascending.

    Raises:
        ValueError: on an empty list, a non-integer, an index out of range, a duplicate, or a list
            that would remove every block.
    """
    if isinstance(blocks, (str, bytes)) or not isinstance(blocks, Sequence):
        raise ValueError(f"blocks must be a list of block indices, got {type(blocks).__name__}")
    if len(blocks) == 0:
        raise ValueError("blocks is empty: name at least one block index to remove")
    bad = [b for b in blocks if isinstance(b, bool) or not isinstance(b, int)]
    if bad:
        raise ValueError(f"blocks must be integers, got {bad!r}")
    out_of_range = sorted({b for b in blocks if not 0 <= b < num_blocks})
    if out_of_range:
        raise ValueError(
            f"block indices {out_of_range} are out of range: this model has {num_blocks} blocks, "
            f"allowed indices are 0..{num_blocks - 1}"
        )
    duplicates = sorted({b for b in blocks if blocks.count(b) > 1})
    if duplicates:
        raise ValueError(f"block indices {duplicates} are listed more than once")
    if len(blocks) >= num_blocks:
        raise ValueError(f"cannot remove all {num_blocks} blocks: keep at least one")
    return sorted(int(b) for b in blocks)


def _renumber(block: nn.Module, index: int) -> list[tuple[nn.Module, int]]:
    """Set every ``layer_idx`` inside ``block`` to ``index``; return the old values for undo."""
    previous = []
    for module in block.modules():
        value = getattr(module, "layer_idx", None)
        if isinstance(value, int) and not isinstance(value, bool):
            previous.append((module, value))
            module.layer_idx = index
    return previous


def _remove_in_place(model: object, blocks: Sequence[int]) -> tuple[list[int], Any]:
    """Remove ``blocks`` from ``model`` in place; return the sorted indices and an undo closure."""
    located = locate(model)
    removed = validate_blocks(list(blocks), located.num_blocks)
    config = getattr(located.model, "config", None)
    original_blocks = located.blocks
    kept = [i for i in range(located.num_blocks) if i not in set(removed)]
    new_list = nn.ModuleList([original_blocks[i] for i in kept])
    old_indices: list[tuple[nn.Module, int]] = []
    for new_index, block in enumerate(new_list):
        old_indices.extend(_renumber(block, new_index))
    setattr(located.blocks_parent, located.blocks_attribute, new_list)

    old_config: dict[str, Any] = {}
    if config is not None:
        old_config["num_hidden_layers"] = config.num_hidden_layers
        config.num_hidden_layers = len(kept)
        layer_types = getattr(config, "layer_types", None)
        if isinstance(layer_types, list) and len(layer_types) == located.num_blocks:
            old_config["layer_types"] = layer_types
            config.layer_types = [layer_types[i] for i in kept]

    def undo() -> None:
        setattr(located.blocks_parent, located.blocks_attribute, original_blocks)
        for module, value in old_indices:
            module.layer_idx = value
        for key, value in old_config.items():
            setattr(config, key, value)

    return removed, undo


@contextmanager
def skip_blocks(model: object, blocks: Sequence[int]) -> Iterator[object]:
    """Temporarily remove transformer blocks from ``model`` (in place) and restore them on exit.

    Meant for quick scans (score the model with each block skipped) without copying weights.

    Args:
        model: a SentenceTransformer or a transformers model.
        blocks: indices of the blocks to skip, ``0 <= i < L``.

    Yields:
        The same ``model`` object, with the blocks removed.

    Raises:
        ValueError: on an invalid block list (see :func:`validate_blocks`).

    Example:
        >>> with skip_blocks(st, [2, 3]):
        ...     pruned_vectors = st.encode(texts)
    """
    _, undo = _remove_in_place(model, blocks)
    try:
        yield model
    finally:
        undo()


def _base_name(st: Any) -> str:
    card = getattr(st, "model_card_data", None)
    name = getattr(card, "model_name", None) or getattr(card, "base_model", None)
    return name or "mteb-lrd/unnamed-model"


def _experiment_kwargs(removed: list[int], num_blocks: int, rule: str | None, budget: float | None) -> dict:
    kwargs: dict[str, Any] = {"removed_blocks": removed, "num_blocks": num_blocks}
    if rule is not None:
        kwargs["rule"] = rule
    if budget is not None:
        kwargs["budget"] = budget
    return kwargs


def _build_pruned_class() -> type:
    from mteb.models import SentenceTransformerEncoderWrapper

    class PrunedModel(SentenceTransformerEncoderWrapper):
        """A SentenceTransformer with blocks physically removed, scored by mteb as an experiment.

        ``mteb.evaluate(pruned, tasks)`` stores results under
        ``<model>/<revision>/experiments/<removed blocks ...>/`` and never over the base model's files.

        Attributes:
            model: the pruned ``SentenceTransformer`` (usable on its own: ``encode``, ``save``).
            removed_blocks: indices of the removed blocks in the *base* model's numbering.
            num_blocks: number of blocks of the base model.
            rule / budget: how the blocks were chosen, when a rule was used.
        """

        def __init__(
            self,
            model: Any,
            removed_blocks: list[int],
            num_blocks: int,
            *,
            name: str,
            revision: str | None = None,
            rule: str | None = None,
            budget: float | None = None,
        ) -> None:
            super().__init__(model)
            self.removed_blocks = list(removed_blocks)
            self.num_blocks = num_blocks
            self.rule = rule
            self.budget = budget
            experiment_kwargs = _experiment_kwargs(removed_blocks, num_blocks, rule, budget)
            _record_on_config(model, experiment_kwargs)
            self.mteb_model_meta = self.mteb_model_meta.model_copy(
                update={
                    "name": name,
                    "revision": revision or self.mteb_model_meta.revision or "no_revision_available",
                    "experiment_kwargs": experiment_kwargs,
                }
            )

        def save(self, path: str | os.PathLike) -> Path:
            """Save as a normal SentenceTransformer folder plus the pruning sidecar; return the folder."""
            path = Path(path)
            self.model.save(str(path))
            record = {
                "name": self.mteb_model_meta.name,
                "revision": self.mteb_model_meta.revision,
                "removed_blocks": self.removed_blocks,
                "num_blocks": self.num_blocks,
                "rule": self.rule,
                "budget": self.budget,
            }
            fd, tmp = tempfile.mkstemp(dir=path, prefix=".pruning-", suffix=".json")
            with os.fdopen(fd, "w") as handle:
                json.dump(record, handle, indent=2)
            os.replace(tmp, path / PRUNING_FILE)
            return path

        @classmethod
        def load(cls, path: str | os.PathLike, device: str | None = None) -> PrunedModel:
            """Load a folder written by :meth:`save` (the model is a normal SentenceTransformer)."""
            from sentence_transformers import SentenceTransformer

            path = Path(path)
            sidecar = path / PRUNING_FILE
            if not sidecar.is_file():
                raise FileNotFoundError(f"{sidecar} not found: {path} was not saved by PrunedModel.save")
            record = json.loads(sidecar.read_text())
            st = SentenceTransformer(str(path), device=device)
            return cls(
                st,
                record["removed_blocks"],
                record["num_blocks"],
                name=record["name"],
                revision=record.get("revision"),
                rule=record.get("rule"),
                budget=record.get("budget"),
            )

    return PrunedModel


def _pruned_class() -> type:
    # mteb is heavy to import: build the class on first use only, once.
    if "PrunedModel" not in globals():
        globals()["PrunedModel"] = _build_pruned_class()
    return globals()["PrunedModel"]


def __getattr__(name: str) -> Any:
    if name == "PrunedModel":
        return _pruned_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def choose_blocks(
    model: object,
    rule: str,
    budget: float,
    texts: Sequence[str],
    *,
    tokenizer: object = None,
    mapping: str = "reference",
    batch_size: int = 32,
) -> list[int]:
    """Blocks to remove by an LRD rule (spec §6): profile ``texts``, score every layer, take the budget.

    The profiles use the reference caps (Frenet 1000, NRS 1000, GFMI 5000 texts, seed 42; k clamped
    to ``N - 1`` for short text lists); selection and the id → block mapping are
    :func:`mteb_lrd.pruning.select_layers` and :func:`mteb_lrd.pruning.blocks_for`.

    Args:
        model: a SentenceTransformer (or :class:`PrunedModel`) or a transformers model.
        rule: ``frenet``, ``nrs``, ``gfmi`` or ``composite``.
        budget: fraction of the candidate layers (ids ``3 .. L-3``) to prune, in (0, 1].
        texts: profiling texts (e.g. :func:`mteb_lrd.defaults.demo_texts`).
        tokenizer: for a plain transformers decoder.
        mapping: ``reference`` (id ``l`` → block ``l``) or ``producer`` (id ``l`` → block ``l-1``).
        batch_size: texts per forward pass.

    Raises:
        ValueError: for an unknown rule, a bad budget, too few layers or texts.
    """
    from mteb_lrd.extraction.extractor import extract_layer_states
    from mteb_lrd.metrics import frenet, gfmi, nrs, subsample
    from mteb_lrd.pruning.rules import RULES, blocks_for, rule_scores, select_layers

    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}; got {rule!r}")
    inner = model.model if isinstance(model, _pruned_class()) else model
    states = extract_layer_states(
        inner, list(texts), tokenizer=tokenizer, batch_size=batch_size, show_progress_bar=False
    ).states
    n = states.shape[1]
    scores = rule_scores(
        frenet(states[:, subsample(n, 1000)]),
        nrs(states[:, subsample(n, 1000)], k=min(20, n - 1)),
        gfmi(states[:, subsample(n, 5000)], k=min(30, n - 1)),
    )
    return blocks_for(select_layers(scores[rule], budget), mapping)


def prune(
    model: object,
    blocks: Sequence[int] | None = None,
    *,
    rule: str | None = None,
    budget: float | None = None,
    texts: Sequence[str] | None = None,
    tokenizer: object = None,
    name: str | None = None,
) -> Any:
    """Return a copy of ``model`` with transformer blocks physically removed.

    Give the blocks, or a rule, a budget and profiling texts to choose them (:func:`choose_blocks`).

    Args:
        model: a SentenceTransformer, a :class:`PrunedModel` (pruned again, indices in its current
            numbering) or a transformers model (BERT-likes, Llama/Qwen2/Mistral/Gemma-likes, GPT-2).
        blocks: indices of the blocks to remove, ``0 <= i < L``; block ``i`` produces ``h_{i+1}``.
        rule: the selection rule that chooses the blocks (or chose the given ones); recorded in the
            experiment metadata.
        budget: the pruning budget (fraction of candidate layers, ``0 < budget <= 1``), recorded.
        texts: profiling texts, needed when ``blocks`` is omitted.
        tokenizer: for a plain transformers decoder when ``blocks`` is omitted.
        name: model name for mteb results; default: the SentenceTransformer's own name.

    Returns:
        For a SentenceTransformer: a :class:`PrunedModel` (an mteb encoder; ``.model`` is the pruned
        SentenceTransformer) whose ``mteb_model_meta.experiment_kwargs`` records the removed blocks,
        the rule and the budget. For a transformers model: the pruned copy of that model.

    Raises:
        ValueError: on an invalid block list, rule or budget.
        UnsupportedArchitectureError: when the model's blocks cannot be found.
    """
    from sentence_transformers import SentenceTransformer

    if rule is not None and (not isinstance(rule, str) or not rule.strip()):
        raise ValueError(f"rule must be a non-empty string naming the selection rule, got {rule!r}")
    if budget is not None and (
        isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 < budget <= 1
    ):
        raise ValueError(f"budget must be a fraction in (0, 1], got {budget!r}")
    if blocks is None:
        if rule is None or budget is None or not texts:
            raise ValueError("give blocks=[...], or rule=, budget= and texts= to choose them")
        blocks = choose_blocks(model, rule, budget, texts, tokenizer=tokenizer)

    pruned_cls = _pruned_class()
    if isinstance(model, pruned_cls):
        base_removed, base_num = model.removed_blocks, model.num_blocks
        kept = [i for i in range(base_num) if i not in set(base_removed)]
        inner = prune(model.model, blocks, rule=rule, budget=budget, name=model.mteb_model_meta.name)
        original = sorted(base_removed + [kept[i] for i in inner.removed_blocks])
        return pruned_cls(
            inner.model, original, base_num, name=inner.mteb_model_meta.name, rule=rule, budget=budget
        )

    num_blocks = locate(model).num_blocks
    validate_blocks(list(blocks), num_blocks)
    pruned = copy.deepcopy(model)
    removed, _ = _remove_in_place(pruned, blocks)
    if isinstance(pruned, SentenceTransformer):
        return pruned_cls(
            pruned, removed, num_blocks, name=name or _base_name(model), rule=rule, budget=budget
        )
    _record_on_config(pruned, _experiment_kwargs(removed, num_blocks, rule, budget))
    return pruned
