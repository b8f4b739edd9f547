"""Which hidden states carry information about the texts, and which scores may read them.

A state is *uninformative* for a score when the score would describe the pooling, not the texts:

* its usable rows are numerically one vector (last-token pooling after a fixed template token, an
  appended EOS or any instruction template makes ``h_0`` the embedding of that one token for every
  text): the L2-normalised rows spread by at most :data:`SPREAD_TOL` (root-mean-square distance to
  their mean);
* Frenet: its rank is below the subspace rank ``r`` the scores compare (rank = principal
  directions along which the rows spread by more than :data:`SPREAD_TOL`, RMS);
* NRS and GFMI: it has fewer than ``k + 1`` distinct rows, so a k-nearest-neighbour list is made
  of ties.

Every score that reads such a state is undefined (NaN in arrays, ``null`` in JSON) and carries the
reason; model-level summaries start at the first informative state (``first_state``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np

__all__ = [
    "ONE_VECTOR",
    "SPREAD_TOL",
    "RowCheck",
    "first_informative",
    "neighbour_reasons",
    "rank_reason",
    "reasons_by_state",
    "row_check",
    "spread_rank",
    "touches",
    "unmasked",
]

SPREAD_TOL = 1e-5
"""Root-mean-square spread of L2-normalised rows below which they count as one vector (float32
rounding of unit vectors is ~1e-7; texts that differ spread by ~1e-1)."""

ONE_VECTOR = "one vector for all texts"
"""The reason recorded for a state whose texts all have (numerically) the same vector."""


def spread_rank(variances: np.ndarray, n: int) -> int:
    """Principal directions along which ``n`` rows spread by more than :data:`SPREAD_TOL` (RMS).

    Args:
        variances: eigenvalues of the centred rows' scatter matrix (sums of squares along each
            principal direction), any order.
        n: the number of rows.
    """
    values = np.asarray(variances, dtype=np.float64)
    return int(np.count_nonzero(values > n * SPREAD_TOL**2))


@dataclass(frozen=True)
class RowCheck:
    """What the neighbour scores need to know of one state's L2-normalised rows.

    Attributes:
        one_vector: the rows spread by at most :data:`SPREAD_TOL` (RMS distance to their mean).
        distinct: how many distinct rows there are.
    """

    one_vector: bool
    distinct: int

    def neighbour_reason(self, k: int) -> str | None:
        """Why these rows cannot give k-nearest-neighbour lists (``None``: they can)."""
        if self.one_vector:
            return ONE_VECTOR
        return None if self.distinct > k else f"{self.distinct} distinct vectors, fewer than k + 1 = {k + 1}"


def row_check(rows: np.ndarray) -> RowCheck:
    """:class:`RowCheck` of ``(N, d)`` L2-normalised rows, in O(N d) float32 work: the spread as
    the root-mean-square distance to the mean (float32 rounding of identical unit rows leaves it
    near 1e-8, far below :data:`SPREAD_TOL`), distinct rows counted by their projection on a fixed
    random direction (equal rows project equally, distinct ones almost surely not). No BLAS call
    (einsum, not ``@``): the threads of a BLAS pool spin for a while after each call and would
    slow the kNN search that follows on the same cores by about a third."""
    centred = rows - np.asarray(rows.mean(axis=0, dtype=np.float64), dtype=rows.dtype)
    spread = float(np.sqrt(np.einsum("nd,nd->", centred, centred) / max(len(rows), 1)))
    direction = np.asarray(np.random.default_rng(0).standard_normal(rows.shape[1]), dtype=rows.dtype)
    projections = np.einsum("nd,d->n", rows, direction)
    return RowCheck(one_vector=spread <= SPREAD_TOL, distinct=int(np.unique(projections).size))


def neighbour_reasons(checks: Iterable[RowCheck], k: int) -> dict[int, str]:
    """The states (their :func:`row_check`, in state order) that cannot give k-NN lists, and why."""
    found = ((state, check.neighbour_reason(k)) for state, check in enumerate(checks))
    return {state: why for state, why in found if why is not None}


R = TypeVar("R")


def unmasked(result: R) -> R:
    """A family's result (``undefined``, ``first_state``, ``as_computed`` fields) with every value as
    computed, uninformative states read like the others (the authors' behaviour)."""
    computed = getattr(result, "as_computed")  # noqa: B009 - a field every family's result has
    if not computed:
        return result
    return replace(result, **computed, undefined={}, first_state=0, as_computed={})  # type: ignore[type-var]


def rank_reason(rank: int, needed: int) -> str | None:
    """Why a state of ``rank`` cannot be compared as an ``needed``-dimensional subspace (``None``: it can)."""
    if rank == 0:
        return ONE_VECTOR
    return None if rank >= needed else f"rank {rank} below the subspace rank r = {needed}"


def first_informative(undefined: Mapping[int, str], num_states: int) -> int | None:
    """The first state not in ``undefined`` that precedes ``h_L`` (``None``: no such state, or ``h_L``
    itself is undefined)."""
    if num_states - 1 in undefined:
        return None
    return next((state for state in range(num_states - 1) if state not in undefined), None)


def touches(undefined: Mapping[int, str], starts: np.ndarray, span: int) -> np.ndarray:
    """For entries that read states ``start .. start + span`` (a transition: ``span`` 1; a triple: 2),
    whether one of those states is undefined."""
    starts = np.asarray(starts)
    bad = np.zeros(starts.shape, dtype=bool)
    for state in undefined:
        bad |= (starts <= state) & (state <= starts + span)
    return bad


def reasons_by_state(undefined: Mapping[int, str]) -> dict[str, str]:
    """``{"h_0": reason, ...}`` for result files, in state order."""
    return {f"h_{state}": undefined[state] for state in sorted(undefined)}
