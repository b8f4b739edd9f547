"""Pruned models: a copy of a model with transformer blocks physically removed.

:func:`prune` returns the same kind of model it was given (a SentenceTransformer for a
SentenceTransformer, a transformers model for a transformers model): ``encode``, ``save``,
``push_to_hub`` all work as usual. The pruning is recorded twice:

- on the transformers config (``config.mteb_lrd_pruning``: base model, base revision, removed blocks in
  the base model's numbering, number of blocks, rule, budget), which travels with every save and
  reload and makes mteb store the model's results as an experiment of its base
  (``mteb_lrd.prune`` installs mteb's metadata hook for that, see
  :mod:`mteb_lrd.adapter.experiments`);
- on a SentenceTransformer's model card (``model_card_data``): base model, a title naming the removed
  blocks, rule and budget, the tags ``pruned`` and ``mteb-lrd``, and a first sentence that says
  "pruned from <base>" instead of sentence-transformers' "finetuned from"; ``save`` writes this
  card, not the base model's README.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mteb_lrd import _compat
from mteb_lrd.extraction.architectures import locate, unwrap_transformers_model
from mteb_lrd.io import atomic_write_text
from mteb_lrd.keywords import options_or_keywords
from mteb_lrd.models.naming import model_name, model_revision
from mteb_lrd.models.pruning_record import PRUNING_CONFIG_KEY, in_base_numbering, pruning_record
from mteb_lrd.pruning.options import PruneOptions
from mteb_lrd.pruning.surgery import remove_blocks, validate_blocks

__all__ = ["PRUNED_TAGS", "describe", "pruned_copy"]

logger = logging.getLogger(__name__)

PRUNED_TAGS: tuple[str, ...] = ("pruned", "mteb-lrd")
"""Tags added to a pruned SentenceTransformer's model card."""


def describe(record: dict[str, Any]) -> str:
    """A one-line description of a pruning record (the pruned model card's title)."""
    removed = ", ".join(str(b) for b in record["removed_blocks"])
    text = f"{record['base_model']} pruned: blocks {removed} of {record['num_blocks']} removed"
    if record.get("rule") is not None:
        text += f" by the {record['rule']} rule"
    if record.get("budget") is not None:
        text += f" at budget {record['budget']}"
    return text


def _describe_on_card(st: Any, source: Any, record: dict[str, Any]) -> None:
    """Give a pruned SentenceTransformer its own model card (the base's README would describe the base)."""
    old = source.model_card_data
    card = st.model_card_data_class(local_files_only=True)
    card.register_model(st)
    card.language, card.license = old.language, old.license
    if not str(record["base_model"]).startswith("local/"):
        card.base_model = record["base_model"]  # a Hub id: the card links to it
        card.base_model_revision = record.get("base_revision")
    card.model_name = describe(record)
    card.add_tags(list(PRUNED_TAGS))
    card.template_path = _pruned_template(card.template_path, record)
    st.model_card_data = card
    _compat.drop_loaded_model_card(st)


# sentence-transformers' card template: "This is a [...] model finetuned from [base] | trained ..."
_ORIGIN = re.compile(r"\{% if base_model %\} finetuned from .*?\{% else %\} trained\{% endif %\}")


def _pruned_template(template: Path, record: dict[str, Any]) -> Path:
    """sentence-transformers' installed card template with its origin phrase saying "pruned from",
    written once per record to a private folder; the template itself when the phrase is not found."""
    text = template.read_text(encoding="utf-8")
    base = str(record["base_model"])
    link = base if base.startswith("local/") else f"[{base}](https://huggingface.co/{base})"
    details = describe(record).removeprefix(f"{base} pruned: ")
    phrase = f" pruned from {link} ({details}, with mteb-lrd)"
    if _ORIGIN.search(text) is None:
        logger.warning("the model card template of sentence-transformers changed: the card keeps its wording")
        return template
    rendered = _ORIGIN.sub(lambda _match: phrase.replace("{", "{{ '{' }}"), text, count=1)
    digest = hashlib.sha256(rendered.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / "mteb-lrd-model-cards" / f"pruned-{digest}.md"
    if not path.is_file():
        atomic_write_text(path, rendered)
    return path


def pruned_copy(
    model: Any,
    blocks: Sequence[int] | None = None,
    *,
    rule: str | None = None,
    budget: float | None = None,
    texts: Sequence[str] | None = None,
    tokenizer: object = None,
    name: str | None = None,
    revision: str | None = None,
    mapping: str = "reference",
    options: PruneOptions | None = None,
) -> Any:
    """Return a copy of ``model`` with transformer blocks physically removed.

    Give the blocks, or a rule and a budget to choose them on profiling texts
    (:func:`mteb_lrd.pruning.choose.choose_blocks`).

    Args:
        model: a SentenceTransformer or a transformers model (BERT-likes, Llama / Qwen2 / Mistral /
            Gemma-likes, GPT-2), possibly pruned already (indices are then in its current numbering;
            the record keeps the base model's numbering).
        blocks: indices of the blocks to remove, ``0 <= i < L``; block ``i`` produces ``h_{i+1}``.
        rule: ``frenet``, ``nrs``, ``gfmi`` or ``composite`` to choose the blocks; with ``blocks``,
            any label of how they were chosen (recorded only).
        budget: the pruning budget (fraction of candidate layers, ``0 < budget <= 1``).
        texts: profiling texts for ``rule``; default the bundled 300-pair STS Benchmark sample
            (:func:`mteb_lrd.defaults.demo_texts`, a warning says so).
        tokenizer: for a plain transformers decoder when a rule chooses the blocks.
        name / revision: the base model's name and revision for mteb results; default the model's
            own (:func:`mteb_lrd.models.naming.model_name`).
        mapping: hidden-state id → block mapping for ``rule`` (``reference`` or ``producer``).
        options: ``blocks`` … ``mapping`` as one :class:`~mteb_lrd.pruning.options.PruneOptions`
            (then leave those keywords at their defaults).

    Returns:
        The pruned copy, of the same class as ``model``. ``config.mteb_lrd_pruning`` holds the record;
        ``mteb.evaluate`` stores its results under
        ``<base>/<revision>/experiments/<removed blocks ...>/`` with its real parameter count.

    Raises:
        ValueError: on an invalid block list, rule or budget, or neither blocks nor rule and budget.
        UnsupportedArchitectureError: when the model's blocks cannot be found.

    Example:
        >>> pruned = prune(SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2"), [2, 3])
        >>> pruned.encode(["a sentence"]).shape
        (1, 384)
    """
    opts = options_or_keywords(PruneOptions, options, blocks=blocks, rule=rule, budget=budget,
                               texts=texts, mapping=mapping, name=name, revision=revision)  # fmt: skip
    return _prune(model, opts, tokenizer)


def _chosen_blocks(model: Any, opts: PruneOptions, tokenizer: object) -> Sequence[int]:
    """``opts.blocks``, or the blocks its rule and budget choose on its texts (the demo sample when
    none are given)."""
    if opts.blocks is not None:
        return opts.blocks
    assert opts.rule is not None and opts.budget is not None  # PruneOptions checked them
    texts: Sequence[str]
    if opts.texts is None:
        from mteb_lrd.defaults import demo_texts

        texts = demo_texts()
        logger.warning(
            "prune: no texts= given; the %s rule profiles the bundled %d-text STS Benchmark sample",
            opts.rule,
            len(texts),
        )
    else:
        texts = opts.texts
    from mteb_lrd.pruning.choose import choose_blocks

    return choose_blocks(model, opts.rule, opts.budget, texts, tokenizer=tokenizer, mapping=opts.mapping)


def _prune(model: Any, opts: PruneOptions, tokenizer: object) -> Any:
    blocks = _chosen_blocks(model, opts, tokenizer)
    previous = pruning_record(model)
    validate_blocks(list(blocks), locate(model).num_blocks)
    base_name = model_name(model, opts.name)
    base_revision = model_revision(model, opts.revision)
    pruned = copy.deepcopy(model)
    removed, _ = remove_blocks(pruned, blocks)
    removed, num_blocks = in_base_numbering(previous, removed, locate(model).num_blocks)
    record = {
        "base_model": base_name,
        "base_revision": base_revision,
        "removed_blocks": removed,
        "num_blocks": num_blocks,
        "rule": opts.rule,
        "budget": opts.budget,
    }
    setattr(unwrap_transformers_model(pruned).config, PRUNING_CONFIG_KEY, record)
    if getattr(pruned, "model_card_data", None) is not None:
        _describe_on_card(pruned, model, record)
    return pruned
