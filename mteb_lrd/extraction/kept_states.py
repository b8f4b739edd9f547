"""What an extraction keeps of each shard when not every state of every text is needed: the states
chosen for every text, every state of the texts that need all (the LRD sample), in a chosen dtype."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from mteb_lrd.io import content_key

__all__ = ["KeptStates"]


@dataclass(frozen=True)
class KeptStates:
    """What :meth:`LayerExtractor.iter_shards` keeps of each shard instead of every state of every text.

    Attributes:
        layers: hidden states kept for every text (``"layers"``: ``(len(layers), n, d)``).
        full_rows: per input text, whether every state is kept (``"full"``: ``(L+1, m, d)`` for the
            shard's ``m`` such texts, in shard order).
        dtype: dtype of the kept vectors (the embeddings stay float32).
    """

    layers: tuple[int, ...]
    full_rows: np.ndarray
    dtype: str = "float32"

    def digest(self, order: np.ndarray) -> str:
        """Cache-key part: the kept layers, dtype, and which texts (in extraction order) keep all."""
        rows = np.packbits(np.asarray(self.full_rows, dtype=bool)[order])
        return content_key({"layers": list(self.layers), "dtype": self.dtype, "rows": rows.tobytes().hex()})

    def reduce(self, shard: Mapping[str, np.ndarray], positions: np.ndarray) -> dict[str, np.ndarray]:
        """The kept part of a full shard, plus each text's usability (``"valid"``: finite and non-zero
        at every state, judged in float32 before any cast)."""
        states = shard["states"]
        with np.errstate(invalid="ignore", over="ignore"):
            valid = (np.isfinite(states).all(axis=2) & (np.abs(states).sum(axis=2) > 0)).all(axis=0)
        full = np.asarray(self.full_rows, dtype=bool)[positions]
        return {
            "embeddings": shard["embeddings"],
            "valid": valid,
            "layers": states[list(self.layers)].astype(self.dtype, copy=False),  # indexing copied already
            "full": states[:, full].astype(self.dtype, copy=False),
        }
