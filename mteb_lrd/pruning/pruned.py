"""Pruned models: a copy of a model with transformer blocks physically removed, which mteb scores
as an experiment of the base model (``<model>/<revision>/experiments/<removed blocks ...>/``)."""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mteb.models import SentenceTransformerEncoderWrapper

from mteb_lrd.extraction.architectures import locate
from mteb_lrd.io import atomic_write_json, read_json
from mteb_lrd.pruning.surgery import PRUNING_FILE, record_on_config, remove_blocks, validate_blocks

__all__ = ["PrunedModel", "prune"]


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
        record_on_config(model, experiment_kwargs)
        self.mteb_model_meta = self.mteb_model_meta.model_copy(
            update={
                "name": name,
                "revision": revision or self.mteb_model_meta.revision or "no_revision_available",
                "experiment_kwargs": experiment_kwargs,
            }
        )

    def save(self, path: str | os.PathLike[str]) -> Path:
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
        atomic_write_json(path / PRUNING_FILE, record, indent=2)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str], device: str | None = None) -> PrunedModel:
        """Load a folder written by :meth:`save` (the model is a normal SentenceTransformer)."""
        from sentence_transformers import SentenceTransformer

        path = Path(path)
        sidecar = path / PRUNING_FILE
        if not sidecar.is_file():
            raise FileNotFoundError(f"{sidecar} not found: {path} was not saved by PrunedModel.save")
        record = read_json(sidecar)
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

    Give the blocks, or a rule, a budget and profiling texts to choose them
    (:func:`mteb_lrd.pruning.choose.choose_blocks`).

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

    from mteb_lrd.pruning.choose import choose_blocks

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

    if isinstance(model, PrunedModel):
        base_removed, base_num = model.removed_blocks, model.num_blocks
        kept = [i for i in range(base_num) if i not in set(base_removed)]
        inner = prune(model.model, blocks, rule=rule, budget=budget, name=model.mteb_model_meta.name)
        original = sorted(base_removed + [kept[i] for i in inner.removed_blocks])
        return PrunedModel(
            inner.model, original, base_num, name=inner.mteb_model_meta.name, rule=rule, budget=budget
        )

    num_blocks = locate(model).num_blocks
    validate_blocks(list(blocks), num_blocks)
    pruned = copy.deepcopy(model)
    removed, _ = remove_blocks(pruned, blocks)
    if isinstance(pruned, SentenceTransformer):
        return PrunedModel(
            pruned, removed, num_blocks, name=name or _base_name(model), rule=rule, budget=budget
        )
    record_on_config(pruned, _experiment_kwargs(removed, num_blocks, rule, budget))
    return pruned
