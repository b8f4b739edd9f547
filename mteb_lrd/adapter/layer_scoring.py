"""What keeps per-layer scoring cheap: the task's own evaluator runs once per layer, but the work
that does not depend on the layer is done once.

* :func:`reused_dataloaders`: mteb builds a ``datasets.Dataset`` + ``DataLoader`` for every
  ``encode`` call (for pair tasks row by row from a lazy column: ~0.15 s per call on 1,400 pairs).
  While the layers of one subset are scored, a dataloader is built once per distinct input — a
  ``datasets.Dataset`` identified by its content fingerprint — and served again to later layers.
* :func:`search_depth`: a retrieval search keeps ``max(k_values)`` (1,000) documents per query and
  mteb's metric loops walk all of them, although ``per_layer`` records only the main score. When
  the main score has a cutoff (``ndcg_at_10``) the layers are searched only as deep as that score
  can see, plus :data:`TIE_MARGIN` so that ties at the cutoff and the ids mteb drops
  (``ignore_identical_ids``, ``skip_first_result``) never change the main score.
* :func:`texts_read_once`: the stored vectors of a layer are looked up by text; the texts of a
  (reused) dataloader are read once, not once per layer.
* :func:`main_score_only`: mteb's retrieval scoring also computes abstention curves (nAUC, one
  per metric, cutoff and confidence function: Python loops over every query), which
  ``per_layer`` never records; they are skipped for the layers unless the main score is one.
* :func:`corpus_chunks`: a retrieval search reads the corpus in chunks of 50,000 documents, each
  read back from the store as float32 (819 MB at d = 4096); while the layers are scored the chunks
  are cut to what the memory budget allows. The search merges exact top-k lists across chunks, so
  the scores do not change.

The context managers are scoped and the text reader lives for one loop: outside the per-layer loop
mteb runs untouched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Any

from mteb.abstasks.abstask import AbsTask

from mteb_lrd import _compat
from mteb_lrd.adapter.protocols import TextReader, read_texts

__all__ = [
    "TIE_MARGIN",
    "corpus_chunks",
    "main_score_cutoff",
    "main_score_only",
    "reused_dataloaders",
    "search_depth",
    "texts_read_once",
]

TIE_MARGIN = 32
"""Documents kept beyond the main score's cutoff: the score is exact unless more than this many
documents tie with the one at the cutoff (or are dropped by mteb before ranking)."""

_CUTOFF = re.compile(r"^(?:ndcg|map|recall|precision|mrr|hit_rate)_at_(\d+)$")


def main_score_cutoff(main_score: str) -> int | None:
    """The rank cutoff of a retrieval main score (``"ndcg_at_10"`` → 10), ``None`` without one."""
    match = _CUTOFF.match(main_score)
    return int(match.group(1)) if match else None


def _token(value: Any, keep: list[Any]) -> Any:
    if value is None or isinstance(value, (str, int, float, bool, Enum)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    keep.append(value)  # alive while the memo is, so its id cannot be reused
    return ("id", id(value))


def _memoising(factory: Callable[..., Any]) -> Callable[..., Any]:
    memo: dict[Any, Any] = {}
    keep: list[Any] = []

    def create_dataloader(dataset: Any, *args: Any, **kwargs: Any) -> Any:
        fingerprint = getattr(dataset, "_fingerprint", None)
        if not isinstance(fingerprint, str):  # not a datasets.Dataset: nothing safe to key on
            return factory(dataset, *args, **kwargs)
        key = (
            fingerprint,
            len(dataset),
            tuple(_token(a, keep) for a in args),
            tuple(sorted((k, _token(v, keep)) for k, v in kwargs.items())),
        )
        if key not in memo:
            memo[key] = factory(dataset, *args, **kwargs)
        return memo[key]

    return create_dataloader


@contextmanager
def reused_dataloaders() -> Iterator[None]:
    """Within the block, mteb's ``create_dataloader`` returns the same loader for the same input.

    Inputs are keyed by the ``datasets`` fingerprint (a hash of the content and of the transforms
    that produced it, what ``datasets`` itself caches on) and the call's arguments; any other input
    is passed through. The original function is restored on exit, also after an error.
    """
    factory, sites = _compat.dataloader_factory_sites()
    memoised = _memoising(factory)
    for module in sites:
        module.create_dataloader = memoised
    try:
        yield
    finally:
        for module in sites:
            module.create_dataloader = factory


@contextmanager
def search_depth(task: AbsTask) -> Iterator[int | None]:
    """Within the block, a retrieval task searches only as deep as its main score needs.

    Yields:
        The depth used, or ``None`` when left unchanged (not a retrieval task, a main score without
        a cutoff, or an mteb without the depth attribute).
    """
    current = getattr(task, _compat.RETRIEVAL_TOP_K, None)
    cutoff = main_score_cutoff(task.metadata.main_score)
    if not isinstance(current, int) or cutoff is None or cutoff + TIE_MARGIN >= current:
        yield None
        return
    setattr(task, _compat.RETRIEVAL_TOP_K, cutoff + TIE_MARGIN)
    try:
        yield cutoff + TIE_MARGIN
    finally:
        setattr(task, _compat.RETRIEVAL_TOP_K, current)


def _no_abstention(*_args: Any, **_kwargs: Any) -> dict[str, float]:
    return {}


@contextmanager
def main_score_only(task: AbsTask) -> Iterator[bool]:
    """Within the block, retrieval scoring skips the abstention (nAUC) metrics the main score does not use.

    Yields:
        Whether they are skipped: not when the main score is an nAUC, nor on an mteb without the
        function (then nothing changes).
    """
    owner = _compat.abstention_owner()
    if owner is None or "nauc" in task.metadata.main_score.lower():
        yield False
        return
    original = getattr(owner, _compat.ABSTENTION)
    setattr(owner, _compat.ABSTENTION, _no_abstention)
    try:
        yield True
    finally:
        setattr(owner, _compat.ABSTENTION, original)


@contextmanager
def corpus_chunks(max_rows: int) -> Iterator[None]:
    """Within the block, mteb's retrieval searches encode (here: read) at most ``max_rows``
    documents at a time; restored on exit, also after an error."""
    from mteb.models import SearchEncoderWrapper

    original = SearchEncoderWrapper.__init__

    def bounded(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        size = getattr(self, "corpus_chunk_size", None)
        if isinstance(size, int):
            self.corpus_chunk_size = max(1, min(size, max_rows))

    SearchEncoderWrapper.__init__ = bounded  # type: ignore[method-assign]
    try:
        yield
    finally:
        SearchEncoderWrapper.__init__ = original  # type: ignore[method-assign]


def texts_read_once() -> TextReader:
    """A text reader that reads each dataloader once and serves its texts again to later layers.

    Only a ``torch`` DataLoader with a sequential sampler (what mteb builds: the same texts in the
    same order on every pass) is remembered, by identity and kept alive with the reader; any other
    input is read every time.
    """
    from torch.utils.data import DataLoader, SequentialSampler

    memo: dict[int, tuple[Any, list[str]]] = {}

    def texts(inputs: Any) -> list[str]:
        if not (isinstance(inputs, DataLoader) and isinstance(inputs.sampler, SequentialSampler)):
            return read_texts(inputs)
        if id(inputs) not in memo:
            memo[id(inputs)] = (inputs, read_texts(inputs))
        return memo[id(inputs)][1]

    return texts
