"""Frenet family: how the top-r principal subspace of the pooled vectors moves across layers.

Grassmann speed between adjacent layers, Menger curvature of consecutive triples, and the
end-to-end displacement ``d0L`` (the paper's strongest model-selection score). Spec: lrd.md §2.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg
from threadpoolctl import threadpool_limits

from mteb_lrd.metrics.informative import first_informative, rank_reason, spread_rank, touches, unmasked
from mteb_lrd.metrics.on_device import DeviceLayers, TorchSubspaces, metrics_device
from mteb_lrd.metrics.params import MetricParams
from mteb_lrd.metrics.states import LayerReader, prepare_states
from mteb_lrd.metrics.summaries import depth_slope, safe_mean, safe_ratio, third

__all__ = [
    "FrenetResult",
    "frenet",
    "frenet_by_layer",
    "grassmann_distance",
    "menger_curvature",
    "frenet_of_units",
    "frenet_on_unit_rows",
]


def _centred(layer: np.ndarray) -> np.ndarray:
    """A layer's rows in float64, centred (one layer at a time bounds the float64 copy)."""
    centred = layer.astype(np.float64)
    centred -= centred.mean(axis=0)
    return centred


def _centred_covariance_eig(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Principal directions of each layer's centred rows, descending: ``(S² (…, m), V (…, d, m))``.

    With ``N >= d``: the eigen-decomposition of the d×d scatter ``X̃ᵀX̃`` (``m = d``, a complete
    basis). With ``N < d``: that of the N×N Gram matrix ``X̃X̃ᵀ = U S² Uᵀ``, directions
    ``V = X̃ᵀU / S`` (``m = N``; the other directions carry no variance; directions without variance
    are zero, and those with little are not orthonormal: :func:`_basis` mends both). float64 either
    way.
    """
    layers = x.reshape((-1,) + x.shape[-2:])
    n, d = layers.shape[1:]
    m = d if n >= d else n
    eigvals = np.empty((layers.shape[0], m))
    eigvecs = np.empty((layers.shape[0], d, m))
    for i, layer in enumerate(layers):
        centred = _centred(layer)
        if n >= d:
            values, vectors = np.linalg.eigh(centred.T @ centred)
            eigvals[i], eigvecs[i] = values[::-1], vectors[:, ::-1]
        else:  # the N×N Gram matrix: ~10x faster than the SVD at N = 1000, d = 4096, same directions
            values, vectors = np.linalg.eigh(centred @ centred.T)
            values = np.clip(values[::-1], 0.0, None)
            singular = np.sqrt(values)
            directions = centred.T @ vectors[:, ::-1]
            nonzero = singular > singular[0] * 1e-12 if singular[0] > 0 else np.zeros(m, dtype=bool)
            directions[:, nonzero] /= singular[nonzero]
            directions[:, ~nonzero] = 0.0  # no variance: :func:`_basis` completes them orthonormally
            eigvals[i], eigvecs[i] = values, directions
    shape = x.shape[:-2]
    return np.clip(eigvals, 0.0, None).reshape(shape + (m,)), eigvecs.reshape(shape + (d, m))


SUBSET_SHARE = 0.25
"""Largest share of the ``d`` eigenpairs solved for on their own (LAPACK ``syevr`` with an index
range) instead of all of them: measured on this project's 2-core machine, the subset solve is
faster up to about ``d/4`` pairs (d = 384: 24 pairs 7 ms, 96 pairs 17 ms, all 24 ms; d = 1,024: 64
pairs 0.10 s, 256 pairs 0.17 s, all 0.22 s) and slower beyond."""


def _layer_basis(layer: np.ndarray, r: int) -> tuple[np.ndarray, int]:
    """:func:`_basis` of one layer's rows and its :func:`spread_rank` capped at ``r`` (all a state
    before ``h_L`` needs): only ``min(r, d - r) + 1`` eigenpairs of the scatter are solved for when
    that is at most :data:`SUBSET_SHARE` of ``d``; otherwise (or with ``N < d``) every one."""
    n, d = layer.shape
    if n < d or min(r, d - r) + 1 > SUBSET_SHARE * d:
        s2, v = _centred_covariance_eig(layer)
        return _basis(v, r), min(spread_rank(s2, n), r)
    centred = _centred(layer)
    scatter = centred.T @ centred
    if r <= d - r:  # the top r directions; beyond r the count of spread directions is not needed
        values, vectors = scipy.linalg.eigh(scatter, subset_by_index=(d - r, d - 1), driver="evr")
        return vectors[:, ::-1], spread_rank(values, n)
    # the d - r weakest directions span the complement; one more eigenvalue (the r-th largest)
    # tells whether the rank reaches r, and only a state below it needs its whole spectrum
    values, vectors = scipy.linalg.eigh(scatter, subset_by_index=(0, d - r), driver="evr")
    rank = r if spread_rank(values[-1:], n) else spread_rank(np.linalg.eigvalsh(scatter), n)
    return vectors[:, : d - r], rank


def _rank_from_spectrum(s2: np.ndarray, var_threshold: float, n: int, d: int) -> int:
    total = s2.sum()
    rank = 2 if total <= 0 else int(np.searchsorted(np.cumsum(s2) / total, var_threshold) + 1)
    return _clamp_rank(max(rank, 2), n, d)


def _clamp_rank(rank: int, n: int, d: int) -> int:
    # Beyond min(d, N-1) the centred data has no more directions: extra columns would be arbitrary.
    return max(1, min(rank, d, max(n - 1, 1)))


def grassmann_distance(q_a: np.ndarray, q_b: np.ndarray) -> np.ndarray:
    """Arc-length Grassmann distance ``sqrt(Σ arccos(σ_i)²)``, ``σ = svd(Q_aᵀ Q_b)`` clipped to [-1, 1].

    Broadcasts over leading axes: ``(…, d, r)`` and ``(…, d, r)`` → ``(…)``, in radians, not
    normalised by ``r`` (range ``[0, π/2·√r]``).
    """
    sigma = np.linalg.svd(np.swapaxes(q_a, -1, -2) @ q_b, compute_uv=False)
    theta = np.arccos(np.clip(sigma, -1.0, 1.0))
    return np.sqrt(np.sum(theta**2, axis=-1))


def menger_curvature(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Menger curvature ``4·sqrt(q)/(a·b·c)`` of triangles with sides ``a, b, c`` (Heron's ``q``).

    Zero where the triangle is degenerate (``q <= 0``) or a side vanishes (``a·b·c < 1e-15``).
    """
    a, b, c = (np.asarray(v, dtype=np.float64) for v in (a, b, c))
    p = (a + b + c) / 2.0
    q = p * (p - a) * (p - b) * (p - c)
    abc = a * b * c
    ok = (q > 0) & (abc >= 1e-15)
    out = np.zeros_like(abc)
    out[ok] = 4.0 * np.sqrt(q[ok]) / abc[ok]
    return out


@dataclass(frozen=True)
class FrenetResult:
    """Frenet measurements of one model on one set of texts.

    Attributes:
        speed: ``(L,)`` Grassmann distance between layers ``l`` and ``l+1``.
        curvature: ``(L-1,)`` Menger curvature at layers ``1 .. L-1``.
        chord: ``(L-1,)`` direct distance between layers ``l-1`` and ``l+1``.
        d0L: Grassmann distance between the first informative state (``first_state``; ``h_0``
            unless it is uninformative) and layer L.
        rank: the subspace dimension used.
        n_used: rows used; ``n_dropped``: rows excluded for NaN / Inf / zero vectors.
        undefined: uninformative states (:mod:`~mteb_lrd.metrics.informative`) and why; every
            entry that reads one is NaN.
        first_state: where the model-level summaries start (``None``: no informative state before
            ``h_L``, or ``h_L`` itself is uninformative: every summary is NaN).
        as_computed: the values NaN replaced, as computed (``speed``, ``curvature``, ``chord``,
            ``d0L`` from ``h_0``); empty when every state is informative.
    """

    speed: np.ndarray
    curvature: np.ndarray
    chord: np.ndarray
    d0L: float
    rank: int
    n_used: int
    n_dropped: int
    undefined: Mapping[int, str] = field(default_factory=dict)
    first_state: int | None = 0
    as_computed: Mapping[str, Any] = field(default_factory=dict)

    def unmasked(self) -> FrenetResult:
        """This result with every value as computed, uninformative states read like the others
        (the authors' behaviour, ``reproduce="authors"``)."""
        return unmasked(self)

    def summary(self) -> dict[str, float]:
        """The spec's model-level summaries (lrd.md §2.7) from ``first_state`` on; NaN where undefined."""
        start = self.first_state
        s = self.speed[start:] if start is not None else self.speed[:0]
        k = self.curvature[start:] if start is not None else self.curvature[:0]
        if start is None or np.isnan(s).any() or np.isnan(k).any():  # an uninformative state inside
            undefined = {key: math.nan for key in _SUMMARY_KEYS}
            return undefined | {"d0L": float(self.d0L), "rank": float(self.rank)}
        n_transitions = s.size
        t = third(n_transitions)
        total = float(s.sum())
        early, late = safe_mean(s[:t]), safe_mean(s[-t:])
        mean_speed = safe_mean(s)
        return {
            "total_arc_length": total,
            "d0L": float(self.d0L),
            "straightness": safe_ratio(float(self.d0L), total),
            "mean_speed": mean_speed,
            "std_speed": float(s.std()),
            "max_speed": float(s.max()),
            "speed_cv": safe_ratio(float(s.std()), mean_speed),
            "mean_curvature": safe_mean(k),
            "std_curvature": float(k.std()) if k.size else math.nan,
            "max_curvature": float(k.max()) if k.size else math.nan,
            "norm_arc_length": total / n_transitions,
            "norm_mean_curvature": safe_mean(k) * n_transitions,
            "peak_curvature_depth": float(np.argmax(k) / k.size) if k.size else math.nan,
            "early_speed": early,
            "late_speed": late,
            "early_late_speed_ratio": safe_ratio(early, late),
            "speed_slope": depth_slope(s),
            "rank": float(self.rank),
        }


_SUMMARY_KEYS = (
    "total_arc_length", "d0L", "straightness", "mean_speed", "std_speed", "max_speed", "speed_cv",
    "mean_curvature", "std_curvature", "max_curvature", "norm_arc_length", "norm_mean_curvature",
    "peak_curvature_depth", "early_speed", "late_speed", "early_late_speed_ratio", "speed_slope",
)  # fmt: skip
"""The summaries of :meth:`FrenetResult.summary` besides ``rank``, in its order."""


def frenet(
    states: object,
    rank: int | None = None,
    var_threshold: float = MetricParams.var_threshold,
    device: str | None = MetricParams.device,
) -> FrenetResult:
    """Grassmann speed, Menger curvature and end-to-end displacement of the top-r principal subspaces.

    Args:
        states: ``(L+1, N, d)`` pooled vectors of hidden states ``h_0 .. h_L`` (numpy or torch, any
            real dtype); rows are L2-normalised here, NaN / Inf / zero rows dropped and counted.
        rank: a fixed subspace dimension; ``None`` picks it from the last layer's explained variance.
        var_threshold: variance share for the automatic rank.
        device: where the decompositions run (:func:`~mteb_lrd.metrics.on_device.metrics_device`):
            ``"auto"`` a GPU tensor's device or a visible CUDA device, else numpy; ``None``: numpy;
            ``"cuda"``, ``"cpu"``, ...: torch on that device.

    Raises:
        ValueError: fewer than 2 layers, fewer than 2 valid rows, or a rank below 1.
    """
    on = metrics_device(device, states)
    if on is not None:
        _checked_rank(rank, var_threshold)
        layers = DeviceLayers.of(states, on, min_rows=2, what="frenet")
        return frenet_of_units(layers.unit, layers.num_states, rank, var_threshold, layers.n_dropped, on)
    prepared = prepare_states(states, min_rows=2, what="frenet")
    return frenet_on_unit_rows(prepared.x, rank, var_threshold, n_dropped=prepared.n_dropped)


def frenet_on_unit_rows(
    x: np.ndarray,
    rank: int | None = None,
    var_threshold: float = MetricParams.var_threshold,
    n_dropped: int = 0,
) -> FrenetResult:
    """:func:`frenet` on rows already validated and L2-normalised (see :func:`prepare_states`)."""
    _checked_rank(rank, var_threshold)
    return frenet_of_units(lambda layer: x[layer], x.shape[0], rank, var_threshold, n_dropped)


def _basis(v: np.ndarray, r: int) -> np.ndarray:
    """An orthonormal basis of a layer's top-``r`` principal subspace (``v``: (d, m), descending), or
    of its orthogonal complement when that is smaller: the non-zero principal angles of two
    r-dimensional subspaces equal those of their (d-r)-dimensional complements, so distances are the
    same. The complement needs the complete basis (``m = d``, orthonormal from ``eigh``).

    With ``N < d`` (``m = N``) the directions come from the Gram matrix: those with little or no
    variance are not orthonormal (rounding of the Gram eigenvectors, amplified by ``1/S``; zero when
    ``S`` is), which happens when a layer's rows span fewer than ``r`` dimensions. A QR
    decomposition keeps the well-determined leading directions (its first k columns span the first
    k directions') and completes them orthonormally, as the SVD's null-space vectors would be.
    """
    d, m = v.shape
    if m == d:
        return v[:, r:] if r > d - r else v[:, :r]
    return np.linalg.qr(v[:, :r])[0]


def _checked_rank(rank: int | None, var_threshold: float) -> None:
    if not 0.0 < var_threshold <= 1.0:
        raise ValueError(f"var_threshold must be in (0, 1]; got {var_threshold}")
    if rank is not None and (int(rank) != rank or rank < 1):
        raise ValueError(f"rank must be a positive integer or None; got {rank!r}")


def frenet_by_layer(
    read_layer: Callable[[int], np.ndarray],
    num_states: int,
    rank: int | None = None,
    var_threshold: float = MetricParams.var_threshold,
    device: str | None = MetricParams.device,
) -> FrenetResult:
    """:func:`frenet` reading one hidden state at a time: one layer's rows and three subspace bases
    are held, not every layer's rows and directions (at 33 states x 1,000 texts x d = 4,096 that
    is ~0.1 GB instead of ~2 GB).

    Equal to ``frenet(np.stack([read_layer(l) for l in range(num_states)]), ...)``: same rows
    dropped, same normalisation, same decompositions. The last layer is decomposed first (it
    fixes the rank), then layers ``0 .. L-1`` in order; each layer is read twice (validity, then
    the decomposition). ``device``: as :func:`frenet`; each layer's rows are moved there for its
    decomposition.

    Raises:
        ValueError: fewer than 2 layers, fewer than 2 valid rows, or a bad rank / threshold.
    """
    _checked_rank(rank, var_threshold)
    on = metrics_device(device)
    reader = LayerReader.of(read_layer, num_states, min_rows=2, what="frenet")
    return frenet_of_units(reader.unit, num_states, rank, var_threshold, reader.n_dropped, on)


class _NumpySubspaces:
    """Frenet's linear algebra in numpy (float64): the definition :class:`TorchSubspaces` follows."""

    eig = staticmethod(_centred_covariance_eig)
    basis = staticmethod(_basis)
    layer_basis = staticmethod(_layer_basis)

    @staticmethod
    def distance(q_a: np.ndarray, q_b: np.ndarray) -> float:
        return float(grassmann_distance(q_a, q_b))


def _subspaces(device: str | None) -> Any:
    return _NumpySubspaces() if device is None else TorchSubspaces(device)


ONE_THREAD_SIDE = 768
"""Numpy decompositions of matrices up to this side (``min(N, d)``) run with one BLAS thread:
small LAPACK calls lose more to waking threads than they gain. Measured with ``frenet`` on this
project's 2-vCPU host: 13 states x 5,000 x 384 0.40 s with one thread vs 0.95 s with two;
13 x 2,000 x 768 1.4 s vs 2.2 s; at 1,024 the two were within noise of each other."""


def _blas_threads(n: int, d: int, device: str | None) -> contextlib.AbstractContextManager[Any]:
    if device is None and min(n, d) <= ONE_THREAD_SIDE:
        return threadpool_limits(1, user_api="blas")
    return contextlib.nullcontext()


def frenet_of_units(
    unit: Callable[[int], Any],
    num_states: int,
    rank: int | None,
    var_threshold: float,
    n_dropped: int,
    on: str | None = None,
) -> FrenetResult:
    """Frenet of L2-normalised layers read one at a time: the last layer first (it fixes the rank),
    then ``0 .. L-1``; only three bases (:func:`_basis`) are held, on device ``on`` when one is given
    (:class:`~mteb_lrd.metrics.on_device.TorchSubspaces`), else in numpy."""
    last = unit(num_states - 1)
    rows, dim = last.shape
    with _blas_threads(rows, dim, on):
        return _frenet_of(unit, last, num_states, rank, var_threshold, n_dropped, _subspaces(on))


def _frenet_of(
    unit: Callable[[int], Any],
    last: Any,
    num_states: int,
    rank: int | None,
    var_threshold: float,
    n_dropped: int,
    ops: Any,
) -> FrenetResult:
    n, d = last.shape
    s2_last, v_last = ops.eig(last)
    r = _rank_from_spectrum(s2_last, var_threshold, n, d) if rank is None else _clamp_rank(int(rank), n, d)
    last_basis = ops.basis(v_last, r)
    ranks = {num_states - 1: spread_rank(s2_last, n)}
    del last, v_last
    speed, chord = np.empty(num_states - 1), np.empty(max(num_states - 2, 0))
    starts: dict[str, Any] = {}  # d0L's starts: h_0 and the first state of rank >= r

    def basis(layer: int) -> Any:
        if layer == num_states - 1:
            return last_basis
        found, ranks[layer] = ops.layer_basis(unit(layer), r)
        if layer == 0:
            starts["h_0"] = found
        if "first" not in starts and ranks[layer] >= r:
            starts["first"] = found
        return found

    previous, before = basis(0), None
    for layer in range(1, num_states):
        current = basis(layer)
        speed[layer - 1] = ops.distance(previous, current)
        if before is not None:
            chord[layer - 2] = ops.distance(before, current)
        before, previous = previous, current
    curvature = menger_curvature(speed[:-1], speed[1:], chord)
    raw = {"speed": speed, "curvature": curvature, "chord": chord,
           "d0L": ops.distance(starts["h_0"], last_basis)}  # fmt: skip
    undefined = {s: why for s in range(num_states) if (why := rank_reason(ranks[s], r)) is not None}
    first = first_informative(undefined, num_states)
    d0l = math.nan if first is None else ops.distance(starts["first"], last_basis)
    if not undefined:
        return FrenetResult(speed, curvature, chord, d0l, r, n, n_dropped)
    return FrenetResult(
        speed=np.where(touches(undefined, np.arange(speed.size), 1), np.nan, speed),
        curvature=np.where(touches(undefined, np.arange(curvature.size), 2), np.nan, curvature),
        chord=np.where(touches(undefined, np.arange(chord.size), 2), np.nan, chord),
        d0L=d0l, rank=r, n_used=n, n_dropped=n_dropped, undefined=undefined, first_state=first, as_computed=raw,
    )  # fmt: skip
