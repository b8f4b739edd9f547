"""Plain, obviously-correct LRD implementations for the tests: loops, sklearn brute-force kNN, sets, SVD.

Written straight from spec/lrd.md §2–§4, independently of ``mteb_lrd.metrics``; slow on purpose.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components
from sklearn.metrics import mutual_info_score
from sklearn.neighbors import NearestNeighbors

__all__ = [
    "normalise",
    "ref_rank",
    "ref_subspace",
    "ref_grassmann",
    "ref_menger",
    "ref_frenet",
    "ref_frenet_summary",
    "ref_knn",
    "ref_anchors",
    "ref_jaccard",
    "ref_nrs",
    "ref_nrs_summary",
    "ref_components",
    "ref_gfmi",
    "ref_gfmi_summary",
    "random_states",
    "ref_frenet_summary_authors",
    "ref_knn_authors",
    "ref_residualize_authors",
]


def random_states(
    n_layers: int = 5, n: int = 150, d: int = 16, seed: int = 0, decay: float = 0.5
) -> np.ndarray:
    """Continuous random ``(n_layers, n, d)`` fp32 states: an anisotropic random walk, rotated a little per layer.

    The geometric spectrum keeps the principal subspaces well separated (no near-equal singular
    values at the rank boundary), the walk keeps neighbourhoods partly shared between layers.
    """
    rng = np.random.default_rng(seed)
    scales = decay ** np.arange(d)
    layers = [rng.standard_normal((n, d)) * scales]
    for _ in range(n_layers - 1):
        rotation = np.linalg.qr(np.eye(d) + 0.15 * rng.standard_normal((d, d)))[0]
        layers.append((layers[-1] + 0.3 * rng.standard_normal((n, d)) * scales) @ rotation)
    return np.stack(layers).astype(np.float32)


def normalise(states: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation in float64."""
    x = np.asarray(states, dtype=np.float64)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


# --- Frenet (spec §2) -------------------------------------------------------------------------


def ref_rank(x_last: np.ndarray, var_threshold: float = 0.95) -> int:
    centred = x_last - x_last.mean(axis=0)
    s = np.linalg.svd(centred, compute_uv=False)
    cumvar = np.cumsum(s**2) / np.sum(s**2)
    return max(int(np.searchsorted(cumvar, var_threshold)) + 1, 2)


def ref_subspace(x: np.ndarray, r: int) -> np.ndarray:
    centred = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return vt[:r].T


def ref_grassmann(q_a: np.ndarray, q_b: np.ndarray) -> float:
    sigma = np.clip(np.linalg.svd(q_a.T @ q_b, compute_uv=False), -1.0, 1.0)
    return math.sqrt(sum(math.acos(s) ** 2 for s in sigma))


def ref_menger(a: float, b: float, c: float) -> float:
    p = (a + b + c) / 2
    q = p * (p - a) * (p - b) * (p - c)
    if q <= 0 or a * b * c < 1e-15:
        return 0.0
    return 4 * math.sqrt(q) / (a * b * c)


def ref_frenet(states: np.ndarray, rank: int | None = None) -> dict:
    x = normalise(states)
    r = ref_rank(x[-1]) if rank is None else rank
    q = [ref_subspace(layer, r) for layer in x]
    n_transitions = len(q) - 1
    speed = [ref_grassmann(q[i], q[i + 1]) for i in range(n_transitions)]
    curvature = [
        ref_menger(speed[i - 1], speed[i], ref_grassmann(q[i - 1], q[i + 1])) for i in range(1, n_transitions)
    ]
    return {"rank": r, "speed": speed, "curvature": curvature, "d0L": ref_grassmann(q[0], q[-1])}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _std(values: list[float]) -> float:
    m = _mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / len(values))


def _slope(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    t = [i / (len(values) - 1) for i in range(len(values))]
    tm, vm = _mean(t), _mean(values)
    return sum((a - tm) * (b - vm) for a, b in zip(t, values, strict=True)) / sum((a - tm) ** 2 for a in t)


def _ratio(a: float, b: float) -> float:
    return a / b if abs(b) > 1e-12 else math.nan


def ref_frenet_summary(ref: dict) -> dict[str, float]:
    s, k, d0l = ref["speed"], ref["curvature"], ref["d0L"]
    n_t = len(s)
    t = max(1, n_t // 3)
    total = sum(s)
    early, late = _mean(s[:t]), _mean(s[-t:])
    return {
        "total_arc_length": total,
        "d0L": d0l,
        "straightness": _ratio(d0l, total),
        "mean_speed": _mean(s),
        "std_speed": _std(s),
        "max_speed": max(s),
        "speed_cv": _ratio(_std(s), _mean(s)),
        "mean_curvature": _mean(k),
        "std_curvature": _std(k) if k else math.nan,
        "max_curvature": max(k) if k else math.nan,
        "norm_arc_length": total / n_t,
        "norm_mean_curvature": _mean(k) * n_t,
        "peak_curvature_depth": k.index(max(k)) / len(k) if k else math.nan,
        "early_speed": early,
        "late_speed": late,
        "early_late_speed_ratio": _ratio(early, late),
        "speed_slope": _slope(s),
        "rank": float(ref["rank"]),
    }


# --- kNN, NRS (spec §3) -----------------------------------------------------------------------


def ref_knn(
    x: np.ndarray, k: int, queries: list[int] | None = None
) -> tuple[list[list[int]], list[list[float]]]:
    """sklearn brute-force cosine kNN, the query itself removed by index (not by rank)."""
    queries = list(range(len(x))) if queries is None else list(queries)
    nn = NearestNeighbors(n_neighbors=k + 1, metric="cosine", algorithm="brute").fit(x)
    dist, idx = nn.kneighbors(x[queries])
    ids, dists = [], []
    for q, row_i, row_d in zip(queries, idx, dist, strict=True):
        kept = [(int(i), float(v)) for i, v in zip(row_i, row_d, strict=True) if i != q][:k]
        ids.append([i for i, _ in kept])
        dists.append([v for _, v in kept])
    return ids, dists


def ref_anchors(n: int, n_anchors: int, seed: int = 42) -> list[int]:
    return sorted(int(i) for i in np.random.RandomState(seed).choice(n, min(n_anchors, n), replace=False))


def ref_jaccard(a: list[list[int]], b: list[list[int]]) -> float:
    scores = [len(set(x) & set(y)) / len(set(x) | set(y)) for x, y in zip(a, b, strict=True)]
    return sum(scores) / len(scores)


def ref_nrs(states: np.ndarray, k: int = 20, n_anchors: int = 500, seed: int = 42) -> dict:
    x = normalise(states)
    anchors = ref_anchors(x.shape[1], n_anchors, seed)
    neighbours = [ref_knn(layer, k, anchors)[0] for layer in x]
    jaccard = [ref_jaccard(neighbours[i], neighbours[i + 1]) for i in range(len(x) - 1)]
    return {"jaccard": jaccard, "first_last": ref_jaccard(neighbours[0], neighbours[-1]), "anchors": anchors}


def ref_nrs_summary(ref: dict) -> dict[str, float]:
    j = ref["jaccard"]
    n_t = len(j)
    t = max(1, n_t // 3)
    early, late = _mean(j[:t]), _mean(j[-t:])
    trapz = sum((j[i] + j[i + 1]) / 2 for i in range(n_t - 1))
    return {
        "mean_jaccard": _mean(j),
        "std_jaccard": _std(j),
        "min_jaccard": min(j),
        "max_jaccard": max(j),
        "early_jaccard": early,
        "mid_jaccard": _mean(j[t : 2 * t]),
        "late_jaccard": late,
        "jaccard_auc": trapz / n_t,
        "delta_jaccard": late - early,
        "mean_instability": 1 - _mean(j),
        "jaccard_first_last": ref["first_last"],
    }


# --- GFMI (spec §4) ---------------------------------------------------------------------------


def ref_components(x: np.ndarray, k: int, percentiles: np.ndarray) -> list[np.ndarray]:
    """Connected components of the kNN graph filtered at each distance percentile."""
    ids, dists = ref_knn(x, k)
    n = len(x)
    flat = [v for row in dists for v in row]
    labels = []
    for tau in np.percentile(flat, percentiles):
        rows, cols = [], []
        for i in range(n):
            for j, v in zip(ids[i], dists[i], strict=True):
                if v <= tau:
                    rows.append(i)
                    cols.append(j)
        g = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
        labels.append(connected_components(g + g.T, directed=False)[1])
    return labels


def ref_gfmi(states: np.ndarray, k: int = 30, percentiles: np.ndarray | None = None) -> dict:
    p = np.linspace(5, 95, 20) if percentiles is None else np.asarray(percentiles, dtype=float)
    x = normalise(states)
    comps = [ref_components(layer, k, p) for layer in x]
    mi, auc, peak, peak_p = [], [], [], []
    for layer in comps:
        row = [mutual_info_score(a, b) for a, b in zip(layer, comps[-1], strict=True)]
        mi.append(row)
        auc.append(sum((p[j + 1] - p[j]) * (row[j] + row[j + 1]) / 2 for j in range(len(p) - 1)))
        peak.append(max(row))
        peak_p.append(float(p[row.index(max(row))]))
    return {"mi": mi, "auc": auc, "peak_mi": peak, "peak_percentile": peak_p}


def ref_gfmi_summary(ref: dict) -> dict[str, float]:
    auc = ref["auc"]
    t = max(1, len(auc) // 3)
    early, late = _mean(auc[:t]), _mean(auc[-t:])
    return {
        "mean_auc": _mean(auc),
        "early_auc": early,
        "late_auc": late,
        "delta_late_early": late - early,
        "slope": _slope(auc),
        "first_auc": auc[0],
        "last_auc": auc[-1],
        "mean_peak_mi": _mean(ref["peak_mi"]),
    }


def assert_summary_equal(ours: dict, ref: dict, tol: float = 1e-6) -> None:
    """Same keys; every value equal to ``tol`` (NaN where the reference is NaN)."""
    import pytest

    assert set(ours) == set(ref)
    for key, value in ref.items():
        if math.isnan(value):
            assert math.isnan(ours[key]), key
        else:
            assert ours[key] == pytest.approx(value, abs=tol), key


# --- The authors' released code, written out independently (reproduce="authors") ---------------


def ref_frenet_summary_authors(ref: dict) -> dict[str, float]:
    """The Frenet summaries as the authors' ``compute_frenet_profile`` defines them: early speed over
    ``s[:L // 3]``, late speed over ``s[-L // 3:]`` (``(-L) // 3``: the last ceil(L/3)), both the
    mean of all when L < 3; fallbacks 1.0 / 0 / 0.5 / 1.0 instead of NaN."""
    s, k, d0l = list(ref["speed"]), list(ref["curvature"]), ref["d0L"]
    n_layers = len(s)
    total = sum(s)
    mean_s = _mean(s)
    if n_layers >= 3:
        early = _mean(s[: n_layers // 3])
        late = _mean(s[-n_layers // 3 :])
    else:
        early = late = mean_s
    out = ref_frenet_summary(ref)
    out.update(
        {
            "straightness": d0l / total if total > 1e-15 else 1.0,
            "speed_cv": _std(s) / mean_s if mean_s > 0 else 0,
            "peak_curvature_depth": k.index(max(k)) / len(k) if k else 0.5,
            "early_speed": early,
            "late_speed": late,
            "early_late_speed_ratio": early / late if late > 0 else 1.0,
        }
    )
    return out


def ref_knn_authors(x: np.ndarray, k: int, queries: list[int] | None = None) -> list[list[int]]:
    """The authors' self-exclusion: query k+1 neighbours and drop the first column (by rank)."""
    queries = list(range(len(x))) if queries is None else list(queries)
    nn = NearestNeighbors(n_neighbors=k + 1, metric="cosine", algorithm="brute").fit(x)
    return [[int(i) for i in row[1:]] for row in nn.kneighbors(x[queries])[1]]


def ref_residualize_authors(x: np.ndarray, z: np.ndarray) -> np.ndarray:
    """The authors' ``residualize``: x minus its least-squares line on one covariate z."""
    z = np.asarray(z, dtype=float)
    x = np.asarray(x, dtype=float)
    zc = z - z.mean()
    d = (zc**2).sum()
    if d < 1e-12:
        return x - x.mean()
    b = (x * zc).sum() / d
    return x - b * z - (x.mean() - b * z.mean())
