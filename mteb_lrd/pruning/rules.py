"""Layer pruning from LRD profiles (spec §6): per-layer rule scores, selection, and baselines.

Everything here is pure numpy. Scores live on hidden-state ids ``0..L`` (``L+1`` entries); higher
means "more prunable". :func:`blocks_for` turns chosen ids into the transformer blocks to remove.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from typing import Literal

import numpy as np

__all__ = [
    "BLOCK_MAPPINGS",
    "RULES",
    "angular_distance_layers",
    "angular_distance_matrix",
    "block_key",
    "blocks_for",
    "candidate_block_sets",
    "candidate_ids",
    "curvature_profile",
    "last_k_layers",
    "n_to_prune",
    "random_layers",
    "rule_scores",
    "select_layers",
    "transition_profile",
    "zscore",
]

RULES: tuple[str, ...] = ("frenet", "nrs", "gfmi", "composite")
BLOCK_MAPPINGS: tuple[str, ...] = ("reference", "producer")
Mapping = Literal["reference", "producer"]


def transition_profile(values: np.ndarray) -> np.ndarray:
    """Per-layer profile of a transition-valued series ``v_0..v_{L-1}`` (length L → L+1).

    Layer ``i`` gets the mean of its adjacent transitions ``v_{i-1}`` and ``v_i``; an end layer
    takes its single neighbour, and so does a layer next to an undefined (NaN) transition (NaN when
    both are undefined).
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size < 1:
        raise ValueError(f"transition values must be a non-empty 1-d array, got shape {v.shape}")
    left = np.concatenate([v[:1], v])  # v_{i-1}, with v_0 standing in at i = 0
    right = np.concatenate([v, v[-1:]])  # v_i, with v_{L-1} standing in at i = L
    both = np.stack([left, right])
    defined = ~np.isnan(both)
    count = defined.sum(axis=0)
    total = np.where(defined, both, 0.0).sum(axis=0)
    return np.divide(total, count, out=np.full(count.shape, np.nan), where=count > 0)


def curvature_profile(curvature: np.ndarray, num_layers: int) -> np.ndarray:
    """Per-layer profile of curvature ``κ_1..κ_{L-1}`` (centred on layers 1..L-1) → length L+1.

    Layer ``i`` gets the mean of every defined (not NaN) κ whose centre lies within ±1 of ``i``
    (NaN when none is).
    """
    k = np.asarray(curvature, dtype=np.float64)
    if k.ndim != 1 or k.size != num_layers - 1 or num_layers < 2:
        raise ValueError(f"curvature must have L-1 = {num_layers - 1} entries (L >= 2), got shape {k.shape}")
    centres = np.arange(1, num_layers)
    layers = np.arange(num_layers + 1)
    near = (np.abs(layers[:, None] - centres[None, :]) <= 1) & ~np.isnan(k)[None, :]  # (L+1, L-1)
    count = near.sum(axis=1)
    total = np.where(near, k[None, :], 0.0).sum(axis=1)
    return np.divide(total, count, out=np.full(count.shape, np.nan), where=count > 0)


def zscore(profile: np.ndarray) -> np.ndarray:
    """Z-score over the defined entries with the population std (zeros when std < 1e-12); an
    undefined (NaN) entry, one that reads an uninformative state, stays NaN.

    Raises:
        ValueError: for an infinite entry or a profile without a defined entry.
    """
    x = np.asarray(profile, dtype=np.float64)
    defined = ~np.isnan(x)
    if np.isinf(x).any() or not defined.any():
        raise ValueError("profile contains Inf or no defined (non-NaN) entry")
    std = x[defined].std()
    if std < 1e-12:
        return np.where(defined, 0.0, np.nan)
    return (x - x[defined].mean()) / std


def rule_scores(frenet: object, nrs: object, gfmi: object) -> dict[str, np.ndarray]:
    """Per-layer prunability of every guided rule (spec §6), higher = more prunable.

    Args:
        frenet: a :class:`~mteb_lrd.metrics.FrenetResult` (``.speed`` (L,), ``.curvature`` (L-1,)).
        nrs: an :class:`~mteb_lrd.metrics.NRSResult` (``.jaccard`` (L,)).
        gfmi: a :class:`~mteb_lrd.metrics.GFMIResult` (``.auc`` (L+1,)).

    Returns:
        ``{"frenet": -z(s) - z(κ), "nrs": z(J), "gfmi": z(GFMI), "composite": sum of the three}``,
        each an array of L+1 scores on hidden-state ids ``0..L``.

    Raises:
        ValueError: when the three results disagree on L.
    """
    speed = np.asarray(frenet.speed, dtype=np.float64)  # type: ignore[attr-defined]
    num_layers = speed.size
    jaccard = np.asarray(nrs.jaccard, dtype=np.float64)  # type: ignore[attr-defined]
    auc = np.asarray(gfmi.auc, dtype=np.float64)  # type: ignore[attr-defined]
    if jaccard.size != num_layers or auc.size != num_layers + 1:
        raise ValueError(
            f"inconsistent depths: Frenet speed has L={num_layers}, NRS jaccard {jaccard.size} (expected L), "
            f"GFMI auc {auc.size} (expected L+1)"
        )
    z_speed = zscore(transition_profile(speed))
    z_curv = zscore(curvature_profile(frenet.curvature, num_layers))  # type: ignore[attr-defined]
    scores = {"frenet": -z_speed - z_curv, "nrs": zscore(transition_profile(jaccard)), "gfmi": zscore(auc)}
    scores["composite"] = scores["frenet"] + scores["nrs"] + scores["gfmi"]
    return scores


def candidate_ids(num_states: int, protect: int = 3) -> np.ndarray:
    """Hidden-state ids that may be pruned: ``protect .. L - protect`` for ``L + 1 = num_states``.

    Raises:
        ValueError: when ``protect`` is negative or leaves no candidate.
    """
    if isinstance(protect, bool) or not isinstance(protect, int | np.integer) or protect < 0:
        raise ValueError(f"protect must be an integer >= 0, got {protect!r}")
    last = num_states - 1 - protect
    if last < protect:
        raise ValueError(
            f"no candidate layer: {num_states} hidden states (L={num_states - 1}) with {protect} protected at each end"
        )
    return np.arange(protect, last + 1)


def n_to_prune(num_candidates: int, budget: float) -> int:
    """``max(1, ceil(num_candidates · budget))``, immune to float noise (20 · 0.05 is 1, not 2).

    Raises:
        ValueError: for a budget outside (0, 1] or no candidate.
    """
    if isinstance(budget, bool) or not isinstance(budget, int | float | np.floating) or not 0 < budget <= 1:
        raise ValueError(f"budget must be a fraction in (0, 1], got {budget!r}")
    if num_candidates < 1:
        raise ValueError(f"need at least one candidate layer, got {num_candidates}")
    return max(1, math.ceil(round(num_candidates * float(budget), 9)))


def select_layers(scores: Sequence[float] | np.ndarray, budget: float, protect: int = 3) -> list[int]:
    """Hidden-state ids to prune: the ``n_prune`` highest-scoring candidates, one shot.

    Candidates are sorted by (score, id) descending, so a tie goes to the deeper layer.

    Args:
        scores: L+1 per-layer scores (higher = more prunable); non-candidates are ignored.
        budget: fraction of the candidates to prune, in (0, 1]; ``n_prune = max(1, ceil(|cand| · budget))``.
        protect: layers kept at each end.

    Returns:
        The chosen ids, sorted ascending.

    Raises:
        ValueError: bad budget / protect, a non-1-d score vector, or a NaN / Inf candidate score
            (a candidate that reads an uninformative state).
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1:
        raise ValueError(f"scores must be a 1-d array of L+1 values, got shape {s.shape}")
    cand = candidate_ids(s.size, protect)
    if not np.all(np.isfinite(s[cand])):
        undefined = [int(i) for i in cand[~np.isfinite(s[cand])]]
        raise ValueError(
            f"candidate scores must be finite: hidden states {undefined} have none (NaN / Inf; an "
            "uninformative state gives no LRD score), so the rule cannot rank them"
        )
    n = n_to_prune(cand.size, budget)
    order = np.lexsort((-cand, -s[cand]))  # primary: score desc; ties: id desc
    return sorted(int(i) for i in cand[order[:n]])


def random_layers(num_states: int, budget: float, seed: int, protect: int = 3) -> list[int]:
    """The Random baseline: ``n_prune`` candidates drawn as the authors do,
    ``random.Random(seed).sample(candidates, n)``, sorted (same layers for the same seed)."""
    cand = [int(i) for i in candidate_ids(num_states, protect)]
    n = n_to_prune(len(cand), budget)
    return sorted(random.Random(seed).sample(cand, n))


def last_k_layers(num_states: int, budget: float, protect: int = 3) -> list[int]:
    """The last-k baseline: the ``n_prune`` deepest candidates."""
    cand = candidate_ids(num_states, protect)
    return [int(i) for i in cand[cand.size - n_to_prune(cand.size, budget) :]]


def angular_distance_matrix(states: np.ndarray) -> np.ndarray:
    """Mean angular distance ``arccos(cos(h_a, h_b)) / π`` between every pair of layers.

    Args:
        states: ``(L+1, N, d)`` pooled vectors (normalised here; the last token for decoders, as in
            Gromov et al., or the model's own pooling for encoders).

    Returns:
        ``(L+1, L+1)`` symmetric matrix with a zero diagonal (up to rounding).
    """
    x = np.asarray(states, dtype=np.float64)
    if x.ndim != 3 or x.shape[0] < 2 or x.shape[1] < 1:
        raise ValueError(f"states must have shape (L+1, N, d) with L >= 1, N >= 1, got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("states contain NaN or Inf")
    norms = np.linalg.norm(x, axis=2, keepdims=True)
    x = x / np.where(norms > 0, norms, 1.0)
    cos = np.clip(np.einsum("and,bnd->abn", x, x), -1.0, 1.0)
    return np.arccos(cos).mean(axis=2) / np.pi


def angular_distance_layers(distance: np.ndarray, budget: float, protect: int = 3) -> list[int]:
    """Gromov et al.'s angular-distance baseline: the contiguous run of ``n`` ids to prune.

    Args:
        distance: ``(L+1, L+1)`` matrix of mean angular distances ``arccos(cos(h_a, h_b)) / π``
            between hidden states (only entries ``[l, l+n]`` are read).
        budget: as in :func:`select_layers`.
        protect: as in :func:`select_layers`.

    Returns:
        ``[l*, ..., l*+n-1]`` with ``l* = argmin_l distance[l, l+n]`` over runs inside the
        candidates (first minimum on ties): removing those n blocks maps ``h_l*`` to ``h_{l*+n}``.
    """
    d = np.asarray(distance, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise ValueError(f"distance must be a square (L+1, L+1) matrix, got shape {d.shape}")
    cand = candidate_ids(d.shape[0], protect)
    n = n_to_prune(cand.size, budget)
    starts = cand[: cand.size - n + 1]
    run_distance = d[starts, starts + n]
    if not np.all(np.isfinite(run_distance)):
        raise ValueError("angular distances must be finite")
    start = int(starts[int(np.argmin(run_distance))])
    return list(range(start, start + n))


def blocks_for(ids: Sequence[int], mapping: Mapping = "reference") -> list[int]:
    """Transformer blocks (0-based module indices) to remove for the chosen hidden-state ids.

    ``"reference"`` (the default, as the reference code does): id ``l`` → block ``l``, the block
    that *consumes* ``h_l`` and produces ``h_{l+1}``. ``"producer"``: id ``l`` → block ``l-1``, the
    block that produces ``h_l``.
    """
    if mapping not in BLOCK_MAPPINGS:
        raise ValueError(f"mapping must be one of {BLOCK_MAPPINGS}, got {mapping!r}")
    offset = 0 if mapping == "reference" else 1
    blocks = sorted({int(i) - offset for i in ids})
    if blocks and blocks[0] < 0:
        raise ValueError(f"hidden state 0 has no producing block (ids {list(ids)}, mapping {mapping!r})")
    return blocks


def block_key(blocks: Sequence[int]) -> str:
    """How a set of removed blocks is named in study records: ``"3,7"`` (``""`` for none)."""
    return ",".join(map(str, blocks))


def candidate_block_sets(
    num_states: int, size: int, protect: int = 3, mapping: Mapping = "reference"
) -> list[list[int]]:
    """Every set of ``size`` candidate ids as the blocks it removes: the exhaustive reference a rule's
    choice of that size is ranked against (``C(candidates, size)`` sets, in lexicographic order).

    Raises:
        ValueError: ``size`` not in ``1 .. number of candidates``, or as :func:`candidate_ids`.
    """
    cand = [int(i) for i in candidate_ids(num_states, protect)]
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or not 1 <= size <= len(cand):
        raise ValueError(f"subset size must be an integer in 1..{len(cand)} (the candidates), got {size!r}")
    return [blocks_for(ids, mapping) for ids in itertools.combinations(cand, int(size))]
