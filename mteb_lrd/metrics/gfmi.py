"""GFMI — Graph Filtration Mutual Information: how well each layer's neighbourhood graph, filtered
at a range of distance percentiles, agrees with the final layer's. Spec: lrd.md §4.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from mteb_lrd.metrics.informative import first_informative, neighbour_reasons, row_check, unmasked
from mteb_lrd.metrics.knn import knn, resolve_backend
from mteb_lrd.metrics.on_device import metrics_device, search_on_device, torch_rows
from mteb_lrd.metrics.params import MetricParams
from mteb_lrd.metrics.states import LayerReader, prepare_states
from mteb_lrd.metrics.summaries import depth_slope, safe_mean, third

__all__ = [
    "GFMIResult",
    "gfmi",
    "gfmi_by_layer",
    "DEFAULT_PERCENTILES",
    "filtration_components",
    "linear_percentiles",
    "mutual_information",
    "gfmi_from_graphs",
    "build_gfmi_result",
]

DEFAULT_PERCENTILES = np.linspace(5.0, 95.0, 20)


def _compact(labels: np.ndarray) -> np.ndarray:
    """Labels as small non-negative integers; component labels (already ``0..c-1``) pass through."""
    labels = np.asarray(labels)
    if (
        np.issubdtype(labels.dtype, np.integer)
        and labels.size
        and labels.min() >= 0
        and labels.max() < labels.size
    ):
        return labels.astype(np.int64, copy=False)
    return np.unique(labels, return_inverse=True)[1].astype(np.int64).ravel()


def mutual_information(a: np.ndarray, b: np.ndarray) -> float:
    """Plug-in mutual information (natural log) of two labelings of the same items.

    Equal to ``sklearn.metrics.mutual_info_score(a, b)``; the contingency table is built from
    sorted label-pair codes, so its cost does not grow with the number of labels squared.
    """
    a, b = _compact(a), _compact(b)
    n, width = a.size, int(b.max()) + 1
    pairs, n_ij = np.unique(a * width + b, return_counts=True)
    n_i = np.bincount(a)[pairs // width]
    n_j = np.bincount(b)[pairs % width]
    mi = np.sum(n_ij / n * (np.log(n_ij) + np.log(n) - np.log(n_i) - np.log(n_j)))
    return max(float(mi), 0.0)


def linear_percentiles(values: np.ndarray, percentiles: np.ndarray) -> np.ndarray:
    """``np.percentile(values, percentiles)`` (linear method), bit for bit, from one partition.

    numpy's percentile partitions once per requested value; one :func:`numpy.partition` at every
    order statistic the interpolation reads serves all of them.
    """
    flat = np.ravel(values)
    virtual = (flat.size - 1) * (np.asarray(percentiles, dtype=np.float64) / 100)
    below = np.floor(virtual)
    gamma = virtual - below
    below = below.astype(np.int64)
    above = np.minimum(below + 1, flat.size - 1)
    ordered = np.partition(flat, np.union1d(below, above))
    lower, upper = ordered[below], ordered[above]
    diff = upper - lower
    # numpy's _lerp: a + (b - a)·t, computed from b for t >= 0.5
    return np.where(gamma >= 0.5, upper - diff * (1 - gamma), lower + diff * gamma)


def filtration_components(
    distances: np.ndarray, neighbours: np.ndarray, percentiles: np.ndarray
) -> np.ndarray:
    """Connected-component labels of the kNN graph kept at each distance percentile.

    Args:
        distances: ``(N, k)`` cosine distances of each point's neighbours.
        neighbours: ``(N, k)`` neighbour ids.
        percentiles: thresholds ``τ_j = percentile(distances, p_j)``; edges with distance ≤ τ_j are
            kept and taken as undirected.

    Returns:
        ``(P, N)`` component labels, ``0 .. c_j - 1`` at threshold ``j``.

    One pass over the thresholds: each edge is binned once to the first threshold that keeps it,
    and the components at ``τ_j`` are those of ``τ_{j-1}``'s components joined by the edges of bin
    ``j`` (the filtration only merges), one connected-components call on the previous components
    per threshold; no edge or sample is visited in Python.
    """
    n, k = distances.shape
    flat = distances.ravel()
    thresholds = linear_percentiles(flat, percentiles)
    entry = np.searchsorted(thresholds, flat, side="left")  # first j with d <= τ_j (P: never kept)
    order = np.argsort(entry.astype(np.min_scalar_type(thresholds.size)), kind="stable")  # a radix sort
    ends = np.cumsum(np.bincount(entry, minlength=thresholds.size + 1))[: thresholds.size]
    source = np.repeat(np.arange(n), k)[order]
    target = neighbours.ravel()[order]
    labels = np.empty((thresholds.size, n), dtype=np.int64)
    current, count, start = np.arange(n), n, 0
    for j, end in enumerate(ends):  # P ≈ 20 merges, each a C call over the edges entering there
        joins = coo_matrix(
            (np.ones(end - start, dtype=np.int8), (current[source[start:end]], current[target[start:end]])),
            shape=(count, count),
        )
        count, merged = connected_components(joins.tocsr(), directed=False)
        current = merged[current]
        labels[j], start = current, end
    return labels


def gfmi_from_graphs(components: np.ndarray, percentiles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MI of every layer's partitions with the final layer's, and its area under the percentile curve.

    Args:
        components: ``(L+1, P, N)`` labels from :func:`filtration_components` for every layer.
        percentiles: the ``P`` percentile values (the x axis of the area).

    Returns:
        ``(mi (L+1, P), auc (L+1,))`` with ``auc = trapezoid(mi, x=percentiles)``.
    """
    final = components[-1]
    mi = np.array(
        [[mutual_information(layer[j], final[j]) for j in range(len(percentiles))] for layer in components]
    )
    return mi, np.trapezoid(mi, x=percentiles, axis=1)


@dataclass(frozen=True)
class GFMIResult:
    """GFMI profile of one model on one set of texts.

    Attributes:
        mi: ``(L+1, P)`` mutual information with the final layer at each percentile.
        auc: ``(L+1,)`` area under ``mi`` over the raw percentile values (the last entry is the final
            layer's self-alignment: the integrated entropy of its partitions).
        peak_mi: ``(L+1,)`` largest MI per layer; ``peak_percentile``: where it is reached.
        percentiles: the filtration grid; ``k``: neighbours per point; ``n_used`` / ``n_dropped``.
        undefined: uninformative states (:mod:`~mteb_lrd.metrics.informative`) and why: their
            entries are NaN (every entry when ``h_L`` is one of them).
        first_state: where the summaries start (``None``: no informative state before ``h_L``, or
            ``h_L`` is uninformative).
        as_computed: the values NaN replaced, as computed (``mi``, ``auc``, ``peak_mi``,
            ``peak_percentile``).
    """

    mi: np.ndarray
    auc: np.ndarray
    peak_mi: np.ndarray
    peak_percentile: np.ndarray
    percentiles: np.ndarray
    k: int
    n_used: int
    n_dropped: int
    undefined: Mapping[int, str] = field(default_factory=dict)
    first_state: int | None = 0
    as_computed: Mapping[str, Any] = field(default_factory=dict)

    def unmasked(self) -> GFMIResult:
        """This result with every value as computed (the authors' behaviour)."""
        return unmasked(self)

    def summary(self) -> dict[str, float]:
        """Model-level summaries. Early / late thirds use ``t = max(1, (L+1)//3)`` entries of the
        ``L+1`` profile; ``slope`` is against relative depth; ``last_auc`` is the final layer's
        self-alignment. MI is unnormalised: compare values only at equal N.
        """
        start = self.first_state
        auc = self.auc[start:] if start is not None else self.auc[:0]
        if not auc.size or np.isnan(auc).any():
            return dict.fromkeys(_SUMMARY_KEYS, math.nan)
        t = third(auc.size)
        early, late = safe_mean(auc[:t]), safe_mean(auc[-t:])
        return {
            "mean_auc": safe_mean(auc),
            "early_auc": early,
            "late_auc": late,
            "delta_late_early": late - early,
            "slope": depth_slope(auc),
            "first_auc": float(auc[0]),
            "last_auc": float(auc[-1]),
            "mean_peak_mi": safe_mean(self.peak_mi[start:]),
        }


_SUMMARY_KEYS = (
    "mean_auc", "early_auc", "late_auc", "delta_late_early", "slope", "first_auc", "last_auc", "mean_peak_mi",
)  # fmt: skip
"""The summaries of :meth:`GFMIResult.summary`, in its order."""


def _validate_percentiles(percentiles: object) -> np.ndarray:
    p = DEFAULT_PERCENTILES if percentiles is None else np.asarray(percentiles, dtype=np.float64)
    if p.ndim != 1 or p.size < 2 or not np.all(np.isfinite(p)) or p.min() < 0 or p.max() > 100:
        raise ValueError("percentiles must be a 1-D array of at least 2 finite values in [0, 100]")
    if np.any(np.diff(p) <= 0):
        raise ValueError("percentiles must be strictly increasing")
    return p


def gfmi(
    states: object, k: int = MetricParams.gfmi_k, percentiles: object = None, backend: str = "auto"
) -> GFMIResult:
    """Graph-filtration mutual information of every layer with the final layer.

    Args:
        states: ``(L+1, N, d)`` pooled vectors (numpy or torch); normalised here, bad rows dropped.
        k: neighbours per point in each layer's cosine kNN graph (self excluded).
        percentiles: filtration grid in [0, 100]; default ``linspace(5, 95, 20)``.
        backend: kNN engine, see :func:`mteb_lrd.metrics.knn.knn`.

    Raises:
        ValueError: fewer than 2 layers, ``N <= k``, or invalid parameters.
    """
    p = _validate_parameters(k, percentiles, backend)
    prepared = prepare_states(states, min_rows=k + 1, what=f"gfmi with k={k}")
    components = np.stack([_layer_components(layer, k, p, backend) for layer in prepared.x])
    undefined = neighbour_reasons(map(row_check, prepared.x), k)
    return build_gfmi_result(components, p, k, prepared.x.shape[1], prepared.n_dropped, undefined)


def gfmi_by_layer(
    read_layer: Callable[[int], np.ndarray],
    num_states: int,
    k: int = MetricParams.gfmi_k,
    percentiles: object = None,
    backend: str = "auto",
    device: str | None = MetricParams.device,
) -> GFMIResult:
    """:func:`gfmi` reading one hidden state at a time: the memory of one layer, not of all.

    Equal to ``gfmi(np.stack([read_layer(l) for l in range(num_states)]), ...)`` (same rows dropped,
    same normalisation, same numbers); each layer is read twice (validity, then the graph).

    Args:
        read_layer: ``l -> (N, d)`` vectors of hidden state ``l`` (the same N texts for every ``l``).
        num_states: ``L + 1``.
        device: a torch device (:func:`~mteb_lrd.metrics.on_device.metrics_device`) where each
            layer's search and filtration run (:mod:`~mteb_lrd.metrics.on_device`); ``None``: numpy
            and ``backend``.

    Raises:
        ValueError: fewer than 2 layers, ``N <= k``, or invalid parameters.
    """
    p = _validate_parameters(k, percentiles, backend)
    on = metrics_device(device)
    reader = LayerReader.of(read_layer, num_states, min_rows=k + 1, what=f"gfmi with k={k}")
    components, checks = [], []
    for layer in range(num_states):  # one layer held at a time
        rows = reader.unit(layer)
        if on is None:
            components.append(_layer_components(rows, k, p, backend))
            checks.append(row_check(rows))
        else:
            check, _, labels = search_on_device(torch_rows(rows, on), k, k, k, p, np.arange(0))
            components.append(labels)
            checks.append(check)
    undefined = neighbour_reasons(checks, k)
    return build_gfmi_result(np.stack(components), p, k, reader.kept.size, reader.n_dropped, undefined)


def _validate_parameters(k: int, percentiles: object, backend: str) -> np.ndarray:
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer; got {k!r}")
    p = _validate_percentiles(percentiles)
    resolve_backend(backend)
    return p


def _layer_components(layer: np.ndarray, k: int, p: np.ndarray, backend: str) -> np.ndarray:
    sims, idx = knn(layer, k, backend=backend)
    return filtration_components(1.0 - sims.astype(np.float64), idx, p)


def build_gfmi_result(
    components: np.ndarray,
    p: np.ndarray,
    k: int,
    n_used: int,
    n_dropped: int,
    undefined: Mapping[int, str] | None = None,
) -> GFMIResult:
    """Assemble a :class:`GFMIResult` from per-layer filtration labels ``(L+1, P, N)``; the entries of
    ``undefined`` states are NaN (all of them when ``h_L`` is one)."""
    mi, auc = gfmi_from_graphs(components, p)
    peak_mi, peak_percentile = mi.max(axis=1), p[mi.argmax(axis=1)]
    result = GFMIResult(mi, auc, peak_mi, peak_percentile, p, int(k), n_used, n_dropped)
    if not undefined:
        return result
    bad = np.zeros(len(components), dtype=bool)
    bad[list(undefined)] = True
    if bad[-1]:  # every layer is compared with h_L
        bad[:] = True
    raw = {"mi": mi, "auc": auc, "peak_mi": peak_mi, "peak_percentile": peak_percentile}
    return replace(
        result,
        mi=np.where(bad[:, None], np.nan, mi),
        auc=np.where(bad, np.nan, auc),
        peak_mi=np.where(bad, np.nan, peak_mi),
        peak_percentile=np.where(bad, np.nan, peak_percentile),
        undefined=dict(undefined),
        first_state=first_informative(undefined, len(components)),
        as_computed=raw,
    )
