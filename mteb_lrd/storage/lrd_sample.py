"""The texts the layer dynamics of one task subset sample, and every hidden state of those alone.

The layer dynamics of a task read at most their caps' rows (1000 / 1000 / 5000 by default), drawn
with ``caps.rows(n_usable, seed)`` over the task's distinct texts in first-appearance order. So the
wrapper keeps every hidden state only of the texts that draw will pick:

1. :meth:`LRDSample.plan`, called where the task's data are known (before mteb encodes them),
   draws the rows from the expected number of distinct texts; without an expectation the first
   ``max(caps)`` texts are kept (exact whenever a task has no more texts than that).
2. :meth:`LRDSample.admit` numbers the texts of each ``encode`` call as they first appear and says
   which of them to keep; :meth:`LRDSample.record` keeps their vectors and every text's usability
   (finite and non-zero at every state).
3. :meth:`LRDSample.draw`, after the last ``encode``, draws again from the texts that are really
   there and usable. When the plan was right it returns the same rows, all kept, so the numbers
   equal those of keeping every text; otherwise it names the sampled texts that were not kept,
   which the caller encodes again (only those).

Memory and disk are ``O(caps x (L+1) x d)`` for the vectors plus one usability flag per text,
whatever the task's size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mteb_lrd.metrics.lrd import LRDResult
from mteb_lrd.metrics.params import MetricParams
from mteb_lrd.parameters import Caps, rows_union
from mteb_lrd.pipeline import RowSource, layer_dynamics
from mteb_lrd.storage.vector_store import TextKey, VectorStore

__all__ = ["LRDSample", "SampleDraw"]


@dataclass(frozen=True)
class SampleDraw:
    """The rows of one task subset's layer dynamics.

    Attributes:
        keys: the usable texts, in first-appearance order (row ``i`` is ``keys[i]``).
        rows: each family's sorted rows (``caps.rows(len(keys), seed)``).
        missing: sampled texts whose states were not kept (to encode again).
        n_texts: distinct texts the task encoded (usable or not).
    """

    keys: list[TextKey]
    rows: dict[str, np.ndarray]
    missing: list[TextKey]
    n_texts: int


class LRDSample:
    """Every hidden state of the texts the layer dynamics sample (see the module docstring).

    Args:
        caps: the families' caps.
        seed: the sampling seed.
        store: where the kept vectors go (its budget, dtype and spill folder apply).
    """

    def __init__(self, caps: Caps, seed: int, store: VectorStore) -> None:
        self.caps = caps
        self.seed = seed
        self.store = store
        self._ordinal: dict[TextKey, int] = {}
        self._usable = np.zeros(0, dtype=bool)
        self._recorded = np.zeros(0, dtype=bool)
        self._planned: np.ndarray | None = None
        self._limit = self._default_limit()
        self.expected: int | None = None

    def _default_limit(self) -> float:
        caps = (self.caps.frenet, self.caps.nrs, self.caps.gfmi)
        return math.inf if None in caps else float(max(cap for cap in caps if cap is not None))

    def __len__(self) -> int:
        return len(self._ordinal)

    def plan(self, expected: int | None) -> None:
        """Keep the texts a draw over ``expected`` distinct usable texts picks (``None``: the first
        ``max(caps)`` texts, all of them when a cap is ``None``)."""
        self.expected = expected
        if expected is None:
            self._planned = None
            return
        planned = np.zeros(int(expected), dtype=bool)
        planned[rows_union(self.caps.rows(int(expected), self.seed))] = True
        self._planned = planned

    def _wanted(self, ordinals: np.ndarray) -> np.ndarray:
        if self._planned is None:
            return ordinals < self._limit
        inside = ordinals < self._planned.size
        wanted = np.zeros(ordinals.size, dtype=bool)
        wanted[inside] = self._planned[ordinals[inside]]
        return wanted

    def admit(self, keys: Sequence[TextKey]) -> np.ndarray:
        """Number the texts of one ``encode`` call; returns, per position, whether to keep every
        state of it (its first occurrence, when the plan samples it)."""
        first = np.zeros(len(keys), dtype=bool)
        ordinals = np.full(len(keys), -1, dtype=np.int64)
        where = self._ordinal
        start = len(where)
        for position, key in enumerate(keys):
            if key not in where:
                where[key] = len(where)
                first[position] = True
                ordinals[position] = where[key]
        grown = np.zeros(len(where) - start, dtype=bool)
        self._usable = np.concatenate([self._usable, grown])
        self._recorded = np.concatenate([self._recorded, grown])
        keep = np.zeros(len(keys), dtype=bool)
        keep[first] = self._wanted(ordinals[first])
        return keep

    def record(
        self, keys: Sequence[TextKey], usable: np.ndarray, kept: Sequence[TextKey], states: np.ndarray
    ) -> None:
        """One extraction shard: every text's usability, and ``states`` ``(L+1, len(kept), d)`` of the
        ``kept`` texts."""
        ordinals = np.fromiter((self._ordinal[key] for key in keys), dtype=np.int64, count=len(keys))
        ordinals, first = np.unique(ordinals, return_index=True)  # a text's first row in the shard
        new = ~self._recorded[ordinals]  # and its first shard: later copies change nothing
        self._usable[ordinals[new]] = np.asarray(usable, dtype=bool)[first[new]]
        self._recorded[ordinals] = True
        if len(kept):
            self.store.add(kept, states)

    def draw(self) -> SampleDraw:
        """The rows over the usable texts, and the sampled ones whose states are not kept."""
        keys = list(self._ordinal)
        usable = [keys[i] for i in np.flatnonzero(self._usable)]
        rows = self.caps.rows(len(usable), self.seed)
        missing = [usable[i] for i in rows_union(rows) if usable[i] not in self.store]
        return SampleDraw(usable, rows, missing, len(keys))

    def measure(
        self, params: MetricParams, reencode: Callable[[list[TextKey]], None] | None
    ) -> tuple[SampleDraw, LRDResult | None]:
        """The draw and the layer dynamics of its rows, each family read one state at a time.

        Args:
            params: the metric parameters.
            reencode: encodes sampled texts whose states were not kept into :attr:`store`;
                ``None``: then such texts leave the result ``None``.

        Returns:
            ``(draw, result)``; ``result`` is ``None`` with fewer than 4 usable texts or texts
            missing without ``reencode``.
        """
        draw = self.draw()
        n = len(draw.keys)
        if n < 4 or (draw.missing and reencode is None):
            return draw, None
        if draw.missing and reencode is not None:
            reencode(draw.missing)
        store = self.store

        def keys_of(rows: np.ndarray) -> list[TextKey]:
            return [draw.keys[i] for i in rows]

        source = RowSource(
            store.num_states,
            n,
            lambda rows: store.gather(keys_of(rows)),
            lambda layer, rows: store.layer(layer, keys_of(rows)),
        )
        return draw, layer_dynamics(source, self.caps, self.seed, params, rows=draw.rows)

    def clear(self) -> None:
        """Forget every text and vector (the next subset starts empty)."""
        self._ordinal.clear()
        self._usable = np.zeros(0, dtype=bool)
        self._recorded = np.zeros(0, dtype=bool)
        self._planned = None
        self.expected = None
        self.store.clear()
