"""Pooled per-layer vectors of the texts a task encoded, keyed by ``(prompt, text)``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["TextKey", "VectorStore"]

TextKey = tuple[str, str]
"""``(prompt, text)``: the same text under two prompts is two different inputs."""


class VectorStore:
    """Rows appended per ``encode`` call, read back per layer or for all layers by key.

    A key seen before keeps its first row. Reads never concatenate the stored chunks: a layer read
    copies only the requested rows of that layer.
    """

    def __init__(self) -> None:
        self._chunks: list[np.ndarray] = []
        self._where: dict[TextKey, tuple[int, int]] = {}

    @property
    def num_states(self) -> int:
        """``L + 1`` of the stored vectors (0 when empty)."""
        return int(self._chunks[0].shape[0]) if self._chunks else 0

    def __len__(self) -> int:
        return len(self._where)

    def add(self, keys: Sequence[TextKey], states: np.ndarray) -> None:
        """Append ``states`` ``(L+1, n, d)`` for ``keys``.

        Raises:
            ValueError: when the row count or the layer count does not match.
        """
        if states.ndim != 3 or states.shape[1] != len(keys):
            raise ValueError(f"states must be (L+1, {len(keys)}, d); got {states.shape}")
        if self._chunks and states.shape[0] != self.num_states:
            raise ValueError(f"states have {states.shape[0]} layers; the store holds {self.num_states}")
        chunk = len(self._chunks)
        self._chunks.append(states)
        for row, key in enumerate(keys):
            self._where.setdefault(key, (chunk, row))

    def _locate(self, keys: Sequence[TextKey]) -> tuple[np.ndarray, np.ndarray]:
        missing = [key for key in keys if key not in self._where]
        if missing:
            raise KeyError(f"{len(missing)} texts were never encoded by the wrapper, e.g. {missing[0]!r}")
        where = np.array([self._where[key] for key in keys], dtype=np.int64).reshape(-1, 2)
        return where[:, 0], where[:, 1]

    def layer(self, layer: int, keys: Sequence[TextKey]) -> np.ndarray:
        """``(len(keys), d)`` vectors of hidden state ``layer`` for keys added before.

        Raises:
            KeyError: naming a key that was never encoded.
        """
        chunks, rows = self._locate(keys)
        out = np.empty((len(keys), self._chunks[0].shape[2]), dtype=self._chunks[0].dtype)
        for chunk in np.unique(chunks):  # one step per encode call, not per text
            mask = chunks == chunk
            out[mask] = self._chunks[chunk][layer, rows[mask]]
        return out

    def gather(self, keys: Sequence[TextKey]) -> np.ndarray:
        """``(L+1, len(keys), d)`` vectors of every layer for keys added before.

        Raises:
            KeyError: naming a key that was never encoded.
        """
        chunks, rows = self._locate(keys)
        first = self._chunks[0]
        out = np.empty((first.shape[0], len(keys), first.shape[2]), dtype=first.dtype)
        for chunk in np.unique(chunks):
            mask = chunks == chunk
            out[:, mask] = self._chunks[chunk][:, rows[mask]]
        return out

    def clear(self) -> None:
        """Forget every vector."""
        self._chunks.clear()
        self._where.clear()
