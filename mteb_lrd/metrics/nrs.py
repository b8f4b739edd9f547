"""NRS — Neighbourhood Retention Score: how much of each text's k-NN set survives from layer to layer.

Spec: lrd.md §3. Anchors are a seeded sample of the texts; their neighbours are searched among
all texts of the layer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from mteb_lrd.metrics.bootstrap import Interval, bootstrap_mean
from mteb_lrd.metrics.informative import first_informative, neighbour_reasons, row_check, touches, unmasked
from mteb_lrd.metrics.knn import knn, resolve_backend
from mteb_lrd.metrics.params import MetricParams
from mteb_lrd.metrics.states import LayerReader, prepare_states
from mteb_lrd.metrics.summaries import safe_mean, third

__all__ = [
    "NRSResult",
    "anchor_ids",
    "build_nrs_result",
    "jaccard_retention",
    "nrs",
    "nrs_by_layer",
    "nrs_from_neighbours",
]


def anchor_ids(n: int, n_anchors: int, seed: int = 42) -> np.ndarray:
    """``min(n_anchors, n)`` anchors: ``RandomState(seed).choice(n, ·, replace=False)``, sorted."""
    if n_anchors < 1:
        raise ValueError(f"n_anchors must be >= 1; got {n_anchors}")
    count = min(n_anchors, n)
    return np.sort(np.random.RandomState(seed).choice(n, count, replace=False))


def jaccard_retention(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise Jaccard index ``|A∩B| / |A∪B|`` of two ``(n, k)`` arrays of neighbour ids.

    Each row holds distinct ids. Vectorised: sort the concatenated rows and count equal neighbours.
    """
    both = np.sort(np.concatenate([a, b], axis=1), axis=1)
    inter = np.count_nonzero(both[:, 1:] == both[:, :-1], axis=1)
    union = a.shape[1] + b.shape[1] - inter
    return inter / union


@dataclass(frozen=True)
class NRSResult:
    """Neighbourhood retention of one model on one set of texts.

    Attributes:
        jaccard: ``(L,)`` mean Jaccard retention between layers ``l`` and ``l+1``.
        first_last: mean Jaccard retention between layer 0 and layer L.
        k: neighbours per anchor; ``n_anchors``: anchors used; ``n_used`` / ``n_dropped``: rows.
        jaccard_ci: percentile bootstrap interval of ``jaccard`` over the anchors (the kNN graph of
            every layer held fixed); ``None`` with fewer than 2 anchors.
        undefined: uninformative states (:mod:`~mteb_lrd.metrics.informative`) and why; every
            transition that reads one is NaN.
        first_state: where the summaries start; ``first_last`` is the retention from it to layer L
            (``None``: no informative state before ``h_L``, or ``h_L`` is uninformative).
        as_computed: the values NaN replaced, as computed (``jaccard``, ``first_last`` from ``h_0``).
    """

    jaccard: np.ndarray
    first_last: float
    k: int
    n_anchors: int
    n_used: int
    n_dropped: int
    jaccard_ci: Interval | None = None
    undefined: Mapping[int, str] = field(default_factory=dict)
    first_state: int | None = 0
    as_computed: Mapping[str, Any] = field(default_factory=dict)

    def unmasked(self) -> NRSResult:
        """This result with every value as computed (the authors' behaviour)."""
        return unmasked(self)

    def summary(self) -> dict[str, float]:
        """The spec's summaries (lrd.md §3) from ``first_state`` on; NaN where a third is empty or a
        transition inside is undefined."""
        j = self.jaccard[self.first_state :] if self.first_state is not None else self.jaccard[:0]
        if not j.size or np.isnan(j).any():
            return dict.fromkeys(_SUMMARY_KEYS, math.nan) | {"jaccard_first_last": float(self.first_last)}
        n_transitions = j.size
        t = third(n_transitions)
        early, late = safe_mean(j[:t]), safe_mean(j[-t:])
        return {
            "mean_jaccard": safe_mean(j),
            "std_jaccard": float(j.std()),
            "min_jaccard": float(j.min()),
            "max_jaccard": float(j.max()),
            "early_jaccard": early,
            "mid_jaccard": safe_mean(j[t : 2 * t]),
            "late_jaccard": late,
            "jaccard_auc": float(np.trapezoid(j) / n_transitions),
            "delta_jaccard": late - early,
            "mean_instability": 1.0 - safe_mean(j),
            "jaccard_first_last": float(self.first_last),
        }


_SUMMARY_KEYS = (
    "mean_jaccard", "std_jaccard", "min_jaccard", "max_jaccard", "early_jaccard", "mid_jaccard",
    "late_jaccard", "jaccard_auc", "delta_jaccard", "mean_instability",
)  # fmt: skip
"""The summaries of :meth:`NRSResult.summary` besides ``jaccard_first_last``, in its order."""


def nrs_from_neighbours(neighbours: np.ndarray) -> tuple[np.ndarray, float, Interval | None]:
    """Adjacent-layer retention, first-last retention and the adjacent-layer retention's bootstrap
    interval over anchors (``None`` with fewer than 2 anchors), from ``(L+1, n_anchors, k)`` ids."""
    per_anchor = np.stack(
        [jaccard_retention(neighbours[i], neighbours[i + 1]) for i in range(len(neighbours) - 1)]
    )
    first_last = float(jaccard_retention(neighbours[0], neighbours[-1]).mean())
    interval = bootstrap_mean(per_anchor, over="anchors") if per_anchor.shape[1] >= 2 else None
    return per_anchor.mean(axis=1), first_last, interval


def build_nrs_result(
    neighbours: np.ndarray, undefined: Mapping[int, str], k: int, n_used: int, n_dropped: int
) -> NRSResult:
    """An :class:`NRSResult` from ``(L+1, n_anchors, k)`` neighbour ids; transitions that read a state
    of ``undefined`` are NaN, first-last starts at the first informative state."""
    jaccard, first_last, interval = nrs_from_neighbours(neighbours)
    n_anchors = int(neighbours.shape[1])
    if not undefined:
        return NRSResult(jaccard, first_last, int(k), n_anchors, n_used, n_dropped, interval)
    first = first_informative(undefined, len(neighbours))
    bad = touches(undefined, np.arange(jaccard.size), 1)
    if interval is not None:
        interval = replace(
            interval, low=np.where(bad, np.nan, interval.low), high=np.where(bad, np.nan, interval.high)
        )
    masked_first_last = (
        math.nan if first is None else float(jaccard_retention(neighbours[first], neighbours[-1]).mean())
    )
    return NRSResult(
        np.where(bad, np.nan, jaccard), masked_first_last, int(k), n_anchors, n_used, n_dropped, interval,
        undefined=undefined, first_state=first, as_computed={"jaccard": jaccard, "first_last": first_last},
    )  # fmt: skip


def nrs(
    states: object,
    k: int = MetricParams.nrs_k,
    n_anchors: int = MetricParams.n_anchors,
    seed: int = 42,
    backend: str = "auto",
) -> NRSResult:
    """Neighbourhood Retention Score between adjacent layers.

    Args:
        states: ``(L+1, N, d)`` pooled vectors (numpy or torch); normalised here, bad rows dropped.
        k: cosine nearest neighbours per anchor, self excluded by index.
        n_anchors: anchors sampled with ``seed`` (all rows when ``N <= n_anchors``).
        seed: anchor sampling seed.
        backend: kNN engine, see :func:`mteb_lrd.metrics.knn.knn`.

    Raises:
        ValueError: fewer than 2 layers, ``N <= k``, or invalid parameters.
    """
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer; got {k!r}")
    resolve_backend(backend)
    prepared = prepare_states(states, min_rows=k + 1, what=f"nrs with k={k}")
    x = prepared.x
    anchors = anchor_ids(x.shape[1], n_anchors, seed)
    neighbours = np.stack([knn(layer, k, anchors, backend)[1] for layer in x])
    undefined = neighbour_reasons(map(row_check, x), k)
    return build_nrs_result(neighbours, undefined, k, x.shape[1], prepared.n_dropped)


def nrs_by_layer(
    read_layer: Callable[[int], np.ndarray],
    num_states: int,
    k: int = MetricParams.nrs_k,
    n_anchors: int = MetricParams.n_anchors,
    seed: int = 42,
    backend: str = "auto",
) -> NRSResult:
    """:func:`nrs` reading one hidden state at a time: the memory of one layer, not of all.

    Equal to ``nrs(np.stack([read_layer(l) for l in range(num_states)]), ...)`` (same rows dropped,
    same normalisation, same numbers); each layer is read twice (validity, then the search).

    Raises:
        ValueError: fewer than 2 layers, ``N <= k``, or invalid parameters.
    """
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer; got {k!r}")
    resolve_backend(backend)
    reader = LayerReader.of(read_layer, num_states, min_rows=k + 1, what=f"nrs with k={k}")
    anchors = anchor_ids(reader.kept.size, n_anchors, seed)
    neighbours, checks = [], []
    for layer in range(num_states):  # one layer held at a time
        rows = reader.unit(layer)
        neighbours.append(knn(rows, k, anchors, backend)[1])
        checks.append(row_check(rows))
    undefined = neighbour_reasons(checks, k)
    return build_nrs_result(np.stack(neighbours), undefined, k, int(reader.kept.size), reader.n_dropped)
