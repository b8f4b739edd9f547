"""Every pruned variant of a model (a SentenceTransformer or a plain transformers model) from one pass
over the blocks they share.

A model without the blocks ``S`` computes what the full model computes up to its first removed
block ``m = min(S)``: the input of block ``m``. More generally, ``S`` and any variant ``P`` whose blocks
are the first ones of ``S`` (``(3,)`` for ``(3, 7)``) compute the same input of the next block of ``S``
(block 7). So the variants form a tree rooted at the full model: each variant's pass keeps the inputs
its children start from, and each child runs only its kept blocks after that point, from that input
(:func:`resumed_from`). With every 1- and 2-block set a pair ``(a, b)`` costs the blocks after ``b``
instead of those after ``a``. Removing the blocks before the starting point as well keeps the surgery
of :mod:`mteb_lrd.pruning.surgery` (block numbering, attention types) for the blocks that do run.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch import nn

from mteb_lrd import _compat
from mteb_lrd.extraction.architectures import locate
from mteb_lrd.extraction.layer_states import distinct_texts
from mteb_lrd.pruning.surgery import skip_blocks, validate_blocks

__all__ = ["encode_variants", "resumed_from"]

BlockSet = tuple[int, ...]
Allocator = Callable[[BlockSet, tuple[int, int]], np.ndarray]


def _in_memory(_blocks: BlockSet, shape: tuple[int, int]) -> np.ndarray:
    return np.empty(shape, dtype=np.float32)


def _hidden_input(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor:
    if args:
        return args[0]
    if "hidden_states" in kwargs:
        return kwargs["hidden_states"]
    raise RuntimeError(
        "a transformer block was called without its hidden states (positional or hidden_states=)"
    )


@contextmanager
def _captured_inputs(blocks: nn.ModuleList, indices: Sequence[int]) -> Iterator[dict[int, torch.Tensor]]:
    """While inside: the input hidden states of ``blocks[i]`` for each ``i`` in ``indices``, per call."""
    captured: dict[int, torch.Tensor] = {}

    def keeper(index: int) -> Callable[..., None]:
        def hook(_module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            captured[index] = _hidden_input(args, kwargs).clone()

        return hook

    handles = [blocks[i].register_forward_pre_hook(keeper(i), with_kwargs=True) for i in indices]
    try:
        yield captured
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def resumed_from(model: object, state: torch.Tensor, removed: Sequence[int]) -> Iterator[object]:
    """``model`` without the blocks ``removed``, run from ``state``, the input of block ``min(removed)``.

    Inside the context every block before ``min(removed)`` and every removed block is skipped, and the
    first kept block reads ``state`` instead of what the embedding layer gives it: a forward pass of
    the same batch then yields the pruned model's output at the cost of the blocks after ``min(removed)``.

    Raises:
        ValueError: on an invalid block list, or when no block after ``min(removed)`` is kept.
    """
    located = locate(model)
    removed = validate_blocks(list(removed), located.num_blocks)
    start = removed[0]
    kept_after = [i for i in range(start, located.num_blocks) if i not in set(removed)]
    if not kept_after:
        raise ValueError(f"no block after {start} is kept: nothing to resume from")
    first = located.blocks[kept_after[0]]

    def replace(_module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if args:
            return (state, *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": state}

    handle = first.register_forward_pre_hook(replace, with_kwargs=True)
    try:
        with skip_blocks(model, sorted(set(range(start)) | set(removed))):
            yield model
    finally:
        handle.remove()


def _checked_sets(block_sets: Sequence[Sequence[int]], num_blocks: int) -> list[BlockSet]:
    sets = {tuple(validate_blocks(list(b), num_blocks)) for b in block_sets if len(b)}
    for blocks in sets:
        if not _keeps_after(blocks, blocks[0], num_blocks):
            raise ValueError(f"block set {list(blocks)} removes every block after {blocks[0]}")
    return [(), *sorted(sets)]


def _keeps_after(blocks: BlockSet, start: int, num_blocks: int) -> bool:
    """Whether the variant without ``blocks`` runs any block after ``start``."""
    return any(i not in blocks for i in range(start + 1, num_blocks))


class _VariantTree:
    """The variants as a tree: each one's parent is the longest of its prefixes among the variants from
    whose next block on something still runs (the full model ``()`` at least, as :func:`_checked_sets`
    guarantees); a child resumes from its parent's input of that block."""

    def __init__(self, sets: list[BlockSet], blocks: nn.ModuleList) -> None:
        present, num_blocks = set(sets), len(blocks)
        self.sets, self.blocks = sets, blocks
        self.parents = {
            s: next(s[:n] for n in range(len(s) - 1, -1, -1)
                    if s[:n] in present and _keeps_after(s, s[n], num_blocks))
            for s in sets[1:]
        }  # fmt: skip
        self.starts: dict[BlockSet, set[int]] = {}  # per parent, the blocks its children start from
        for child, parent in self.parents.items():
            self.starts.setdefault(parent, set()).add(child[len(parent)])
        self.children = Counter(self.parents.values())

    def run(self, model: Any, forward: Callable[[], torch.Tensor], store: _Store, rows: np.ndarray) -> None:
        """One batch (the texts ``rows``; ``forward()`` embeds them with ``model`` as it stands) through
        every variant, parents first, into ``store``."""
        inputs: dict[BlockSet, dict[int, torch.Tensor]] = {}
        waiting = self.children.copy()
        with self._keeping((), inputs):
            store((), rows, forward())
        for blocks in self.sets[1:]:  # sorted: every parent comes before its children
            parent = self.parents[blocks]
            state = inputs[parent][blocks[len(parent)]]
            with resumed_from(model, state, blocks[len(parent) :]), self._keeping(blocks, inputs):
                store(blocks, rows, forward())
            waiting[parent] -= 1
            if not waiting[parent]:  # its last child is done: free its states
                del inputs[parent]

    @contextmanager
    def _keeping(self, blocks: BlockSet, inputs: dict[BlockSet, dict[int, torch.Tensor]]) -> Iterator[None]:
        if blocks not in self.starts:
            yield
            return
        with _captured_inputs(self.blocks, sorted(self.starts[blocks])) as inputs[blocks]:
            yield


def encode_variants(
    model: Any,
    texts: Sequence[str],
    block_sets: Sequence[Sequence[int]],
    *,
    prompt: str | None = None,
    batch_size: int = 32,
    allocate: Allocator | None = None,
    tokenizer: Any = None,
    template: str | None = None,
    max_length: int = 512,
) -> tuple[np.ndarray, dict[BlockSet, np.ndarray]]:
    """Sentence embeddings of the distinct ``texts`` by the full model and by each pruned variant.

    Args:
        model: a SentenceTransformer (its own tokenisation, truncation, prompt handling and modules)
            or a plain transformers model (embedded as :class:`~mteb_lrd.extraction.extractor.LayerExtractor`
            embeds it: its pooling, left padding and last real token for decoders).
        texts: the texts; each distinct one is encoded once, in length-sorted batches as ``encode``.
        block_sets: the blocks each variant removes (the full model, ``()``, is always included).
        prompt: the prompt text prepended to every text, as ``encode(prompt=...)``.
        batch_size: texts per forward pass.
        allocate: ``allocate(blocks, shape)`` returns the float32 array a variant's vectors are
            written to (e.g. a memory map, so that a large task's variants need not fit in memory);
            default: ``numpy.empty``.
        tokenizer / template / max_length: a plain model's tokenizer (``None``: loaded with it), text
            template (:mod:`mteb_lrd.extraction.templates`) and truncation; unused for a
            SentenceTransformer.

    Returns:
        ``(codes, embeddings)``: ``embeddings[blocks]`` is ``(n_distinct, D)`` float32 and
        ``embeddings[blocks][codes]`` the vectors of ``texts`` in their order.

    Raises:
        ValueError: on an empty text list, a bad batch size or block list.
    """
    if len(texts) == 0:
        raise ValueError("texts is empty: nothing to encode")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    located = locate(model)
    tree = _VariantTree(_checked_sets(block_sets, located.num_blocks), located.blocks)
    codes, first = distinct_texts(texts)
    distinct = [texts[i] for i in first]
    batches = (
        _sentence_transformer_batches(model, distinct, prompt)
        if _is_sentence_transformer(model)
        else _plain_batches(
            model, distinct, prompt, tokenizer=tokenizer, template=template, max_length=max_length
        )
    )
    out: dict[BlockSet, np.ndarray] = {}
    store = _Store(out, len(distinct), allocate or _in_memory)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for rows, forward in batches(batch_size):
                tree.run(model, forward, store, rows)
    finally:
        model.train(was_training)
    return codes, out


Batches = Callable[[int], Iterator[tuple[np.ndarray, Callable[[], torch.Tensor]]]]
"""``batches(batch_size)`` yields, per batch, the rows of its texts and the call that embeds them."""


def _is_sentence_transformer(model: Any) -> bool:
    from sentence_transformers import SentenceTransformer

    return isinstance(model, SentenceTransformer)


def _sentence_transformer_batches(model: Any, distinct: list[str], prompt: str | None) -> Batches:
    from sentence_transformers.util import batch_to_device

    length = _compat.input_length(model)
    order = np.argsort([-(length(t) if length else len(t)) for t in distinct], kind="stable")

    def batches(batch_size: int) -> Iterator[tuple[np.ndarray, Callable[[], torch.Tensor]]]:
        for begin in range(0, len(order), batch_size):
            rows = order[begin : begin + batch_size]
            features = batch_to_device(
                model.preprocess([distinct[i] for i in rows], prompt=prompt), model.device
            )
            yield rows, functools.partial(_sentence_embedding, model, features)

    return batches


def _sentence_embedding(model: Any, features: dict[str, Any]) -> torch.Tensor:
    return model(dict(features))["sentence_embedding"]


def _plain_batches(
    model: Any,
    distinct: list[str],
    prompt: str | None,
    *,
    tokenizer: Any,
    template: str | None,
    max_length: int,
) -> Batches:
    from mteb_lrd.extraction.extractor import LayerExtractor

    def batches(batch_size: int) -> Iterator[tuple[np.ndarray, Callable[[], torch.Tensor]]]:
        extractor = LayerExtractor(model, tokenizer, batch_size=batch_size, max_length=max_length,
                                   template=template, show_progress_bar=False)  # fmt: skip
        order = extractor.batch_order(distinct)
        for begin in range(0, len(order), extractor.batch_size):
            rows = order[begin : begin + extractor.batch_size]
            yield rows, extractor.embedding_pass([distinct[i] for i in rows], prompt)

    return batches


class _Store:
    """Writes one batch of a variant's sentence embeddings into its array (allocated on first use)."""

    def __init__(self, out: dict[BlockSet, np.ndarray], n: int, allocate: Allocator) -> None:
        self.out, self.n, self.allocate = out, n, allocate

    def __call__(self, blocks: BlockSet, rows: np.ndarray, embeddings: torch.Tensor) -> None:
        vectors = embeddings.float().cpu().numpy()
        if blocks not in self.out:
            self.out[blocks] = self.allocate(blocks, (self.n, vectors.shape[1]))
        self.out[blocks][rows] = vectors
