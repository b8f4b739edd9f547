"""Choosing DySem's k, L and value vector on labelled pairs, from representations computed once.

Every grid point reuses the same per-language vectors: only the mask (first ``L`` languages),
the value vector and the top-k change, so a grid costs no forward pass beyond the first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import spearmanr

from mteb_lrd.dysem.consensus import consensus_mask, value_vectors
from mteb_lrd.dysem.similarity import dynamic_similarity

__all__ = ["GridPoint", "grid_search", "best_point"]


@dataclass(frozen=True)
class GridPoint:
    """One setting and its score: Spearman x 100 and the mean joint-set size."""

    k: int
    num_languages: int
    value: str
    spearman: float
    mean_dimensions: float

    def to_dict(self) -> dict[str, float | int | str]:
        """Plain dict (JSON-serialisable)."""
        return asdict(self)


def grid_search(
    source_1: np.ndarray,
    stack_1: np.ndarray,
    source_2: np.ndarray,
    stack_2: np.ndarray,
    scores: Sequence[float],
    *,
    ks: Sequence[int],
    num_languages: Sequence[int],
    values: Sequence[str] = ("source", "mean"),
) -> list[GridPoint]:
    """Score every (k, L, value) on ``P`` labelled pairs.

    Args:
        source_1, source_2: ``(P, d)`` vectors of the original first / second texts.
        stack_1, stack_2: ``(languages, P, d)`` vectors in the ordered candidate languages.
        scores: ``(P,)`` gold scores.
        ks: set sizes to try.
        num_languages: values of ``L`` to try (each at most the number of languages).
        values: value-vector kinds to try.

    Returns:
        One :class:`GridPoint` per setting, in grid order.
    """
    gold = np.asarray(scores, dtype=np.float64)
    n_lang = stack_1.shape[0]
    if stack_1.shape != stack_2.shape or gold.shape != (stack_1.shape[1],):
        raise ValueError(
            f"need stacks of one shape and one score per pair; got {stack_1.shape}, {stack_2.shape}, {gold.shape}"
        )
    bad = [n for n in num_languages if not 1 <= n <= n_lang]
    if bad:
        raise ValueError(f"num_languages {bad} outside 1..{n_lang} (the languages available)")
    points = []
    for n in num_languages:
        mask_1, mask_2 = consensus_mask(stack_1[:n]), consensus_mask(stack_2[:n])
        for value in values:
            v1 = value_vectors(stack_1[:n], value, source=source_1)  # type: ignore[arg-type]
            v2 = value_vectors(stack_2[:n], value, source=source_2)  # type: ignore[arg-type]
            for k in ks:
                sims, sizes = dynamic_similarity(v1, v2, mask_1, mask_2, int(k))
                rho = spearmanr(sims, gold)[0] if np.ptp(sims) > 0 else float("nan")
                points.append(GridPoint(int(k), int(n), value, float(100 * rho), float(sizes.mean())))
    return points


def best_point(points: Sequence[GridPoint]) -> GridPoint:
    """The setting with the highest Spearman (the first one on ties; NaN never wins)."""
    finite = [p for p in points if np.isfinite(p.spearman)]
    if not finite:
        raise ValueError("no grid point has a finite Spearman correlation")
    return max(finite, key=lambda p: p.spearman)
