"""Benchmark: ``mteb_lrd.lrd`` against a straightforward reference, the GEMM floor and the kNN floor.

Prints, in one run, on random normalised fp32 states of shape ``(L+1, N, d)``:

* the time of our ``lrd(...)`` (one exact kNN search per layer shared by NRS and GFMI);
* the time of a faithful straightforward implementation of the same definitions (spec/lrd.md
  §2–§4), written below the way the reference code does it: sklearn brute-force cosine kNN
  computed separately for NRS and for GFMI, Python sets for Jaccard, per-layer loops,
  ``np.linalg.svd`` on the centred data, ``sklearn.metrics.mutual_info_score``. Its SVDs run in
  float64: on fp32 they drift by ~1e-6 rad on near-isotropic data, too much for the equality check;
* the GEMM floor: the ``L+1`` similarity GEMMs (``N×d`` by ``d×N``, fp32, numpy) that any exact
  kNN must do;
* the kNN floor: per layer the similarity product plus the exact top-``k`` of every row
  (``k = max(NRS_K, GFMI_K) + 1``, self included, as ``lrd()`` searches), timed three ways — FAISS
  ``IndexFlatIP`` add + search, torch ``z @ z.T`` + ``topk``, numpy product + ``argpartition`` +
  sort of the ``k`` columns — each way's time, and the fastest way (least best-of time) as the
  floor; a way whose package is missing is skipped with a note;
* the floors and ``lrd()`` (and any ``--also`` backend) timed in alternating rounds, best and
  median, with ``lrd()``'s ratio to each floor (best, median, and per round);
* the ratios with their targets (ours >= 4x faster than the reference, ours within 1.5x of the
  GEMM floor, ours within 1.25x of the kNN floor on CPU) and the largest differences between the
  two implementations' numbers (with ``--no-reference``: the timings and floor ratios only).

Usage::

    python benchmarks/bench_lrd.py            # N=5000, L+1=13, d=384
    python benchmarks/bench_lrd.py --small    # a quick run
    python benchmarks/bench_lrd.py --profile  # also cProfile our lrd(), with seconds per stage
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import io
import math
import os
import platform
import pstats
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components
from sklearn.metrics import mutual_info_score
from sklearn.neighbors import NearestNeighbors

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this working tree's mteb_lrd first
from mteb_lrd import lrd  # noqa: E402

__all__ = [
    "make_states",
    "reference_lrd",
    "gemm_floor",
    "knn_floor_faiss",
    "knn_floor_torch",
    "knn_floor_numpy",
    "knn_floor_ways",
    "main",
]

NRS_K, N_ANCHORS, GFMI_K = 20, 500, 30
PERCENTILES = np.linspace(5, 95, 20)
TARGET_VS_REFERENCE = 4.0
TARGET_VS_FLOOR = 1.5
TARGET_VS_KNN_FLOOR = 1.25
KNN_K = max(NRS_K, GFMI_K) + 1
"""Neighbours per row in the kNN floor: lrd()'s one search per layer, self included."""


def make_states(n_layers: int, n: int, d: int, seed: int = 0) -> np.ndarray:
    """Random normalised fp32 states: a random walk across layers, so neighbourhoods are partly kept."""
    rng = np.random.default_rng(seed)
    x = np.empty((n_layers, n, d), dtype=np.float32)
    x[0] = rng.standard_normal((n, d), dtype=np.float32)
    for layer in range(1, n_layers):
        x[layer] = x[layer - 1] + 0.5 * rng.standard_normal((n, d), dtype=np.float32)
    x /= np.linalg.norm(x, axis=2, keepdims=True)
    return x


# --- the straightforward reference -----------------------------------------------------------------


def _centred64(z: np.ndarray) -> np.ndarray:
    z = z.astype(np.float64)
    return z - z.mean(axis=0, keepdims=True)


def _subspace(z: np.ndarray, r: int) -> np.ndarray:
    _, _, vt = np.linalg.svd(_centred64(z), full_matrices=False)
    return vt[:r].T


def _grassmann(q1: np.ndarray, q2: np.ndarray) -> float:
    s = np.clip(np.linalg.svd(q1.T @ q2, compute_uv=False), -1.0, 1.0)
    return float(np.sqrt((np.arccos(s) ** 2).sum()))


def _menger(a: float, b: float, c: float) -> float:
    p = (a + b + c) / 2.0
    q = p * (p - a) * (p - b) * (p - c)
    if q <= 0 or a * b * c < 1e-15:
        return 0.0
    return 4.0 * math.sqrt(q) / (a * b * c)


def _reference_frenet(states: np.ndarray) -> dict:
    s = np.linalg.svd(_centred64(states[-1]), compute_uv=False)
    cumvar = np.cumsum(s**2) / (s**2).sum()
    r = max(int(np.searchsorted(cumvar, 0.95) + 1), 2)
    subspaces = [_subspace(z, r) for z in states]
    speed = [_grassmann(subspaces[i], subspaces[i + 1]) for i in range(len(subspaces) - 1)]
    curvature = [
        _menger(speed[i], speed[i + 1], _grassmann(subspaces[i], subspaces[i + 2]))
        for i in range(len(subspaces) - 2)
    ]
    return {"rank": r, "speed": speed, "curvature": curvature, "d0L": _grassmann(subspaces[0], subspaces[-1])}


def _sklearn_knn(z: np.ndarray, k: int, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """sklearn brute-force cosine kNN of ``queries`` (row ids), self removed by index."""
    nn = NearestNeighbors(n_neighbors=k + 1, metric="cosine", algorithm="brute").fit(z)
    dists, idxs = nn.kneighbors(z[queries])
    out_d, out_i = [], []
    for q, d_row, i_row in zip(queries, dists, idxs, strict=True):
        keep = [j for j in range(k + 1) if i_row[j] != q][:k]
        out_d.append(d_row[keep])
        out_i.append(i_row[keep])
    return np.array(out_d), np.array(out_i)


def _reference_nrs(states: np.ndarray) -> dict:
    n = states.shape[1]
    anchors = np.random.RandomState(42).choice(n, min(N_ANCHORS, n), replace=False)
    anchors.sort()
    neighbours = [_sklearn_knn(z, NRS_K, anchors)[1] for z in states]

    def jaccard(a: np.ndarray, b: np.ndarray) -> float:
        scores = []
        for row_a, row_b in zip(a, b, strict=True):
            sa, sb = set(row_a.tolist()), set(row_b.tolist())
            scores.append(len(sa & sb) / len(sa | sb))
        return float(np.mean(scores))

    profile = [jaccard(neighbours[i], neighbours[i + 1]) for i in range(len(states) - 1)]
    return {"jaccard": profile, "first_last": jaccard(neighbours[0], neighbours[-1])}


def _components(z: np.ndarray) -> list[np.ndarray]:
    n = z.shape[0]
    dists, idxs = _sklearn_knn(z, GFMI_K, np.arange(n))
    flat = dists.ravel()
    rows = np.repeat(np.arange(n), GFMI_K)
    cols = idxs.ravel()
    labels = []
    for tau in np.percentile(flat, PERCENTILES):
        mask = flat <= tau
        g = csr_matrix((np.ones(mask.sum(), dtype=np.int8), (rows[mask], cols[mask])), shape=(n, n))
        labels.append(connected_components(g + g.T, directed=False)[1])
    return labels


def _reference_gfmi(states: np.ndarray) -> dict:
    last = _components(states[-1])
    auc, peak_mi = [], []
    for z in states[:-1]:
        labels = _components(z)
        mi = np.array([mutual_info_score(a, b) for a, b in zip(labels, last, strict=True)])
        auc.append(float(np.trapezoid(mi, PERCENTILES)))
        peak_mi.append(float(mi.max()))
    self_mi = np.array([mutual_info_score(a, a) for a in last])
    auc.append(float(np.trapezoid(self_mi, PERCENTILES)))
    peak_mi.append(float(self_mi.max()))
    return {"auc": auc, "peak_mi": peak_mi}


def reference_lrd(states: np.ndarray) -> dict:
    """Frenet, NRS and GFMI as three independent straightforward programs (two kNN passes per layer).

    Also returns each family's time under ``"seconds"``.
    """
    out: dict = {"seconds": {}}
    for name, fn in (("frenet", _reference_frenet), ("nrs", _reference_nrs), ("gfmi", _reference_gfmi)):
        start = time.perf_counter()
        out[name] = fn(states)
        out["seconds"][name] = time.perf_counter() - start
    return out


# --- the floors ------------------------------------------------------------------------------------


def gemm_floor(states: np.ndarray) -> None:
    """The (L+1) fp32 similarity products N×d · d×N that exact all-pairs kNN cannot avoid."""
    for z in states:
        np.matmul(z, z.T)


KnnOut = tuple[np.ndarray, np.ndarray]


def knn_floor_faiss(states: np.ndarray, k: int = KNN_K) -> KnnOut:
    """Per layer: FAISS exact flat inner-product index, add then search ``k``; the last layer's result."""
    import faiss

    out: KnnOut = (np.empty(0), np.empty(0))
    for z in states:
        index = faiss.IndexFlatIP(z.shape[1])
        index.add(z)
        out = index.search(z, k)
    return out


def knn_floor_torch(states: np.ndarray, k: int = KNN_K) -> KnnOut:
    """Per layer: ``torch.from_numpy(z) @ z.T`` then ``topk(k)`` per row; the last layer's result."""
    import torch

    out: KnnOut = (np.empty(0), np.empty(0))
    for z in states:
        t = torch.from_numpy(z)
        values, where = torch.topk(t @ t.T, k, dim=1)
        out = (values.numpy(), where.numpy())
    return out


def knn_floor_numpy(states: np.ndarray, k: int = KNN_K) -> KnnOut:
    """Per layer: the numpy product, ``argpartition`` of each row for ``k``, those ``k`` sorted."""
    out: KnnOut = (np.empty(0), np.empty(0))
    for z in states:
        s = np.matmul(z, z.T)
        n = s.shape[1]
        part = np.argpartition(s, n - k, axis=1)[:, n - k :]
        values = np.take_along_axis(s, part, axis=1)
        order = np.argsort(-values, axis=1)
        out = (np.take_along_axis(values, order, axis=1), np.take_along_axis(part, order, axis=1))
    return out


def knn_floor_ways() -> tuple[dict[str, Callable[[np.ndarray], KnnOut]], list[str]]:
    """The kNN-floor ways whose packages import here, and a note for each one skipped."""
    ways: dict[str, Callable[[np.ndarray], KnnOut]] = {}
    notes: list[str] = []
    for name, module, fn in (
        ("faiss", "faiss", knn_floor_faiss),
        ("torch", "torch", knn_floor_torch),
        ("numpy", "numpy", knn_floor_numpy),
    ):
        try:
            __import__(module)
        except ImportError:
            notes.append(f"kNN floor: {name} way skipped ({module} not installed)")
            continue
        ways[name] = fn
    return ways, notes


# --- reporting -------------------------------------------------------------------------------------


def _timed(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    best, value = math.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def _alternating(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    """Each function once per round, rounds repeated: on a shared machine the load hits all alike."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def _machine() -> list[str]:
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    lines = [
        f"CPU: {cpu}; logical cores: {os.cpu_count()}; Python {platform.python_version()}, numpy {np.__version__}"
    ]
    try:
        from threadpoolctl import threadpool_info

        for pool in threadpool_info():
            lines.append(
                f"threadpool: {pool.get('internal_api')} {pool.get('version')} ({pool.get('user_api')}), "
                f"{pool.get('num_threads')} threads, {os.path.basename(pool.get('filepath', ''))}"
            )
    except ImportError:
        lines.append("threadpoolctl not installed: BLAS unknown")
    try:
        import faiss

        lines.append(f"faiss {faiss.__version__}, OpenMP threads {faiss.omp_get_max_threads()}")
    except ImportError:
        lines.append("faiss not installed")
    try:
        import torch

        lines.append(f"torch {torch.__version__}, intra-op threads {torch.get_num_threads()}")
    except ImportError:
        lines.append("torch not installed")
    return lines


def _load() -> str:
    try:
        return " ".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        return "unknown"


def _max_diff(ours: object, ref: object) -> float:
    a, b = np.asarray(ours, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def _compare(result, ref: dict) -> dict[str, float]:
    return {
        "speed": _max_diff(result.frenet.speed, ref["frenet"]["speed"]),
        "curvature": _max_diff(result.frenet.curvature, ref["frenet"]["curvature"]),
        "d0L": _max_diff(result.frenet.d0L, ref["frenet"]["d0L"]),
        "rank": _max_diff(result.frenet.rank, ref["frenet"]["rank"]),
        "jaccard": _max_diff(result.nrs.jaccard, ref["nrs"]["jaccard"]),
        "jaccard_first_last": _max_diff(result.nrs.first_last, ref["nrs"]["first_last"]),
        "gfmi_auc": _max_diff(result.gfmi.auc, ref["gfmi"]["auc"]),
        "gfmi_peak_mi": _max_diff(result.gfmi.peak_mi, ref["gfmi"]["peak_mi"]),
    }


PROFILE_STAGES = {
    "prepare_states": "validation/prepare_states",
    "frenet_on_unit_rows": "Frenet",
    "knn": "kNN search",
    "filtration_components": "GFMI filtrations",
    "build_gfmi_result": "GFMI MI/AUC",
    "nrs_from_neighbours": "NRS Jaccard",
}
"""Functions of ``mteb_lrd`` whose cumulative time the profile reports as ``lrd()``'s stages."""


def _profile(states: np.ndarray, backend: str, top: int = 25) -> str:
    """cProfile of one ``lrd()`` call: seconds per stage, then the top functions by own time."""
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    lrd(states, backend=backend)
    profiler.disable()
    wall = time.perf_counter() - start
    stats = pstats.Stats(profiler)
    seconds = dict.fromkeys(PROFILE_STAGES, 0.0)
    for (path, _, func), (_, _, _, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        if func in seconds and "mteb_lrd" in path:
            seconds[func] += cumulative
    rest = wall - sum(seconds.values())
    lines = [f"lrd() under cProfile: {wall:.3f} s wall; stages (cumulative seconds):"]
    lines += [f"  {PROFILE_STAGES[func]:26s} {sec:8.3f} s   ({func})" for func, sec in seconds.items()]
    lines.append(f"  {'rest':26s} {rest:8.3f} s")
    out = io.StringIO()
    stats.stream = out  # type: ignore[attr-defined]
    stats.sort_stats("tottime").print_stats(top)
    return "\n".join(lines) + "\n\n" + out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5000, help="texts N (default 5000)")
    parser.add_argument("--layers", type=int, default=13, help="hidden states L+1 (default 13)")
    parser.add_argument("--dim", type=int, default=384, help="dimension d (default 384)")
    parser.add_argument("--small", action="store_true", help="quick run: N=1000, L+1=7, d=128")
    parser.add_argument("--repeats", type=int, default=3, help="best-of repeats for ours and the floors")
    parser.add_argument("--backend", default="auto", help="kNN backend of our lrd() (default auto)")
    parser.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="BACKEND",
        help="also time lrd() with this kNN backend, alternating with ours and the floors (repeatable)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of our lrd()")
    parser.add_argument(
        "--no-reference", action="store_true", help="skip the slow straightforward reference (timings only)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="limit BLAS and OpenMP (FAISS) threads for every measurement; on a shared, busy machine "
        "--threads 1 gives steadier ratios (default: the libraries' own setting)",
    )
    args = parser.parse_args(argv)
    if args.small:
        args.n, args.layers, args.dim = 1000, 7, 128
    if args.n <= max(NRS_K, GFMI_K) or args.layers < 3 or args.dim < 2 or args.repeats < 1:
        parser.error("need N > 30, L+1 >= 3, d >= 2 and repeats >= 1")
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be >= 1")
    if args.threads is None:
        return _run(args)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=args.threads), _torch_threads(args.threads):
        return _run(args)


@contextlib.contextmanager
def _torch_threads(threads: int) -> Iterator[None]:
    """torch's intra-op threads set to ``threads`` (if torch is installed), restored afterwards."""
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _median(values: list[float]) -> float:
    return float(np.median(values))


def _print_rounds(times: dict[str, list[float]], repeats: int, knn_key: str) -> None:
    print(
        f"alternating rounds ({repeats}), best / median, ratio to each floor of the same round "
        f"(GEMM floor; kNN floor = {knn_key}):"
    )
    for name, values in times.items():
        gemm = [v / f for v, f in zip(values, times["floor"], strict=True)]
        knn = [v / f for v, f in zip(values, times[knn_key], strict=True)]
        print(
            f"  {name:18s} {min(values):7.3f} / {_median(values):7.3f} s   "
            f"x floor: best {min(gemm):5.2f}, median {_median(gemm):5.2f}   "
            f"x kNN floor: best {min(knn):5.2f}, median {_median(knn):5.2f}"
        )


def _knn_agreement(results: dict[str, KnnOut]) -> str:
    """How the ways' last-layer top-k lists compare with the first way's (ties may reorder)."""
    names = list(results)
    if len(names) < 2:
        return "kNN floor ways: only one, nothing to compare"
    base_s, base_i = results[names[0]]
    parts = []
    for name in names[1:]:
        sims, idx = results[name]
        diff = float(np.max(np.abs(np.asarray(sims, np.float64) - np.asarray(base_s, np.float64))))
        same = float(np.mean(np.all(np.asarray(idx) == np.asarray(base_i), axis=1)))
        parts.append(f"{name}: max |sim diff| {diff:.2e}, rows with identical indices {100 * same:.2f}%")
    return f"kNN floor ways vs {names[0]} on the last layer: " + "; ".join(parts)


def _on_cpu(backend: str) -> bool:
    """Whether lrd()'s resolved kNN backend runs on the CPU (the kNN-floor target is a CPU target)."""
    if backend == "faiss-gpu":
        return False
    if backend != "torch":
        return True
    try:
        import torch
    except ImportError:
        return True
    return not torch.cuda.is_available()


def _mark(ok: bool) -> str:
    return "✔ OK" if ok else "✘ MISSED"


def _run(args: argparse.Namespace) -> int:
    print("== mteb-lrd benchmark: lrd() vs straightforward reference vs GEMM floor vs kNN floor ==")
    for line in _machine():
        print(line)
    states = make_states(args.layers, args.n, args.dim, args.seed)
    print(f"states: (L+1, N, d) = {states.shape}, fp32, normalised, seed {args.seed}")
    print(f"params: nrs k={NRS_K}, anchors={N_ANCHORS}; gfmi k={GFMI_K}, {PERCENTILES.size} percentiles")
    print(f"threads: {'library default' if args.threads is None else args.threads}; load average {_load()}")
    ways, notes = knn_floor_ways()
    for note in notes:
        print(note)

    ours = lrd(states, backend=args.backend)  # also warms up
    print(_knn_agreement({name: fn(states) for name, fn in ways.items()}))  # also warms up
    fns: dict[str, Callable[[], object]] = {"floor": lambda: gemm_floor(states)}
    for name, fn in ways.items():
        fns[f"knn {name}"] = functools.partial(fn, states)
    fns["ours"] = lambda: lrd(states, backend=args.backend)
    for backend in args.also:
        fns[f"lrd({backend})"] = functools.partial(lrd, states, backend=backend)
    times = _alternating(fns, args.repeats)
    best_way = min(ways, key=lambda name: min(times[f"knn {name}"]))
    knn_key = f"knn {best_way}"
    t_floor, t_ours, t_knn = min(times["floor"]), min(times["ours"]), min(times[knn_key])
    m_floor, m_ours, m_knn = _median(times["floor"]), _median(times["ours"]), _median(times[knn_key])

    print()
    print(f"floor  ({args.layers} fp32 GEMMs {args.n}x{args.dim} . {args.dim}x{args.n}): {t_floor:8.3f} s")
    print(
        f"kNN floor ways ({args.layers} layers: product + exact top-{KNN_K} of each of {args.n} rows, "
        f"self included), best / median of {args.repeats}:"
    )
    for name in ways:
        values = times[f"knn {name}"]
        best = "   <- best" if name == best_way else ""
        print(f"  {name:6s} {min(values):8.3f} / {_median(values):8.3f} s{best}")
    print(f"kNN floor = {best_way} (least best-of time): {t_knn:8.3f} s (median {m_knn:.3f} s)")
    print(f"ours   lrd(backend={ours.params['backend']!r}), best of {args.repeats}: {t_ours:8.3f} s")
    _print_rounds(times, args.repeats, knn_key)
    vs_floor, vs_knn = t_ours / t_floor, t_ours / t_knn
    print(
        f"lrd() best / median {t_ours:.3f} / {m_ours:.3f} s; "
        f"vs GEMM floor ({t_floor:.3f} / {m_floor:.3f} s): best {vs_floor:.2f}x, median {m_ours / m_floor:.2f}x; "
        f"vs kNN floor ({t_knn:.3f} / {m_knn:.3f} s): best {vs_knn:.2f}x, median {m_ours / m_knn:.2f}x"
    )
    same = True
    ref: dict = {}
    lines: list[str] = []
    if not args.no_reference:
        t_ref, value = _timed(lambda: reference_lrd(states), 1)
        ref = cast(dict, value)
        split = ", ".join(f"{name} {sec:.2f} s" for name, sec in ref["seconds"].items())
        print(f"reference (sklearn brute kNN x2, sets, loops), 1 run: {t_ref:8.3f} s   ({split})")
        speedup = t_ref / t_ours
        ok_ref = _mark(speedup >= TARGET_VS_REFERENCE)
        lines.append(
            f"reference / ours = {speedup:6.2f}x   (target >= {TARGET_VS_REFERENCE}x faster)  {ok_ref}"
        )
    print()
    ok_floor = _mark(vs_floor <= TARGET_VS_FLOOR)
    lines.append(f"ours / floor     = {vs_floor:6.2f}x   (target <= {TARGET_VS_FLOOR}x)          {ok_floor}")
    on_cpu = _on_cpu(str(ours.params["backend"]))
    ok_knn = _mark(vs_knn <= TARGET_VS_KNN_FLOOR) if on_cpu else "n/a (lrd() kNN not on the CPU)"
    lines.append(
        f"ours / kNN floor = {vs_knn:6.2f}x   (target lrd() <= {TARGET_VS_KNN_FLOOR}x the kNN floor on CPU; "
        f"median {m_ours / m_knn:.2f}x)  {ok_knn}"
    )
    for line in lines:
        print(line)
    if not args.no_reference:
        print()
        diffs = _compare(ours, ref)
        print("max |ours - reference|: " + ", ".join(f"{key} {value:.2e}" for key, value in diffs.items()))
        same = max(diffs.values()) <= 1e-6
        print(f"numbers identical to 1e-6: {'yes' if same else 'NO'}")
        print(
            f"profiles: speed {np.round(ours.frenet.speed, 4).tolist()}, rank {ours.frenet.rank}; "
            f"jaccard {np.round(ours.nrs.jaccard, 4).tolist()}; gfmi auc {np.round(ours.gfmi.auc, 3).tolist()}"
        )
    print(f"load average at the end: {_load()}")
    if args.profile:
        print()
        print("cProfile of our lrd() (sorted by own time):")
        print(_profile(states, args.backend))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
