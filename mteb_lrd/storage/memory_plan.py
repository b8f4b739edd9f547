"""How the memory budget of a layer-dynamics run is shared: stored vectors vs what is read at once.

The stored vectors (the chosen states of every text, every state of the sampled texts) keep in RAM
what the budget leaves after the largest read out of them: the layer dynamics' working set (they
read one layer at a time: two copies of GFMI's sample of one state, Frenet's sample of one state
in float64 with its decomposition and three bases, or a small task's sample of every state,
:data:`~mteb_lrd.pipeline.SHARED_SEARCH_BYTES`, twice) or a per-layer read (a quarter of the
budget, in float32 vectors; retrieval corpus chunks are cut to it). So the vectors kept plus the
layer dynamics or a corpus chunk stay within the budget; the rest of the vectors is spilled. Reads
of what mteb scores at once (queries, a reranking corpus, a whole STS or classification split) are
one state of that split, not cut.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mteb_lrd.parameters import Caps
from mteb_lrd.pipeline import SHARED_SEARCH_BYTES

__all__ = ["READ_SHARE", "MemoryPlan"]

READ_SHARE = 0.25
"""Share of the memory budget a per-layer read may take."""
_MB = 1024 * 1024
_MIN_READ_ROWS = 1024


@dataclass(frozen=True)
class MemoryPlan:
    """The budget's split for a model with ``num_states`` hidden states of width ``dim``.

    Attributes:
        stores_mb: megabytes the two stores may keep in RAM together (half each).
        read_rows: most texts a per-layer read returns at once.
        lrd_working_mb: the layer dynamics' working set, estimated (``inf`` when a cap is ``None``).
    """

    stores_mb: float
    read_rows: int
    lrd_working_mb: float

    @classmethod
    def of(cls, budget_mb: float, caps: Caps, num_states: int, dim: int) -> MemoryPlan:
        """The split of ``budget_mb`` (``math.inf``: nothing is bounded)."""
        width = dim * 4
        if caps.frenet is None or caps.nrs is None or caps.gfmi is None:
            working = math.inf
        else:
            frenet = (
                caps.frenet * dim * 20 + 3 * dim * min(caps.frenet, dim) * 8
            )  # rows, float64 copy, SVD, bases
            working = max(2 * SHARED_SEARCH_BYTES, 2 * caps.gfmi * width, frenet) / _MB
        if math.isinf(budget_mb):
            return cls(budget_mb, 2**62, working)
        reserve = max(budget_mb / 2 if math.isinf(working) else working, budget_mb * READ_SHARE)
        read_rows = max(_MIN_READ_ROWS, int(budget_mb * READ_SHARE * _MB) // width)
        return cls(max(0.0, budget_mb - reserve), read_rows, working)
