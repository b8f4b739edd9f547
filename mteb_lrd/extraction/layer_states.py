"""What extraction returns: the pooled vectors of every hidden state, and the text clean-up rule."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["LayerStates", "clean_texts", "distinct_texts"]


@dataclass(frozen=True)
class LayerStates:
    """Pooled vectors of every hidden state for a list of texts.

    Attributes:
        states: ``(L+1, N, d)`` float32, rows L2-normalised; index 0 is the embedding output.
        embeddings: ``(N, D)`` float32, the model's own output for the texts (what
            ``SentenceTransformer.encode`` returns; the unnormalised last-layer pooled vector for a
            plain transformers model).
        pooling: the pooling used at every layer.
        final_norm: the decoder final-norm convention (``as_is``: only ``h_L`` normed, as
            transformers returns it; ``all``; ``none``); ``n/a`` for models without one.
        n_empty_replaced: empty or whitespace-only texts replaced by ``" "``.
        n_duplicates: texts equal to an earlier text (kept; metrics exclude self by index).
        texts_sha256: digest of the texts as given.
    """

    states: np.ndarray
    embeddings: np.ndarray
    pooling: str
    final_norm: str
    n_empty_replaced: int
    n_duplicates: int
    texts_sha256: str

    @property
    def num_layers(self) -> int:
        """``L``: number of blocks; there are ``L+1`` hidden states."""
        return self.states.shape[0] - 1


def clean_texts(texts: Sequence[str]) -> tuple[list[str], int]:
    """Replace empty / whitespace-only texts by ``" "`` as the reference does; count them.

    Raises:
        TypeError: when ``texts`` is a single string or holds non-strings.
    """
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings, not a single string")
    out, replaced = [], 0
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] is {type(text).__name__}, expected str")
        if not text.strip():
            replaced += 1
            text = " "
        out.append(text)
    return out, replaced


def distinct_texts(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each text's distinct text: ``(codes, first)`` with ``texts[i] == texts[first[codes[i]]]``.

    ``first`` holds each distinct text's first position, in order of first appearance, so encoding
    ``[texts[j] for j in first]`` once and indexing the result with ``codes`` gives a vector for every
    text (STS columns repeat sentences: SICK-R's 9,927 first sentences hold 5,014 distinct ones).
    """
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(t, len(index)) for t in texts), dtype=np.int64, count=len(texts))
    first = np.unique(codes, return_index=True)[1]
    return codes, first
