"""Exact cosine k-nearest neighbours on L2-normalised vectors, self excluded by index.

FAISS does the work (a GPU index when ``faiss.get_num_gpus() > 0``, the CPU index otherwise);
a plain numpy backend exists for checks and for machines without FAISS. Similarities are fp32
inner products: fp16 near-ties would flip neighbours.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal

import numpy as np

__all__ = ["Backend", "BACKENDS", "resolve_backend", "knn"]

Backend = Literal["auto", "faiss-cpu", "faiss-gpu", "numpy"]
BACKENDS: tuple[str, ...] = ("auto", "faiss-cpu", "faiss-gpu", "numpy")


@lru_cache(maxsize=1)
def _faiss_gpus() -> int:
    try:
        import faiss
    except ImportError:
        return -1
    get = getattr(faiss, "get_num_gpus", None)
    return int(get()) if get is not None else 0


def resolve_backend(backend: str = "auto") -> str:
    """Turn ``"auto"`` into the concrete backend this machine offers and validate the others.

    Raises:
        ValueError: for an unknown name, or a FAISS backend that is not available here.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}; got {backend!r}")
    gpus = _faiss_gpus()
    if backend == "auto":
        if gpus < 0:
            return "numpy"
        return "faiss-gpu" if gpus > 0 else "faiss-cpu"
    if backend.startswith("faiss") and gpus < 0:
        raise ValueError(f"backend {backend!r} needs the faiss package (pip install faiss-cpu)")
    if backend == "faiss-gpu" and gpus == 0:
        raise ValueError("backend 'faiss-gpu' needs a FAISS build with GPU support and a visible GPU")
    return backend


def _search_faiss(x: np.ndarray, queries: np.ndarray, k: int, gpu: bool) -> tuple[np.ndarray, np.ndarray]:
    import faiss

    index: Any = faiss.IndexFlatIP(x.shape[1])
    if gpu:
        index = faiss.index_cpu_to_all_gpus(index)
    index.add(x)
    return index.search(queries, k)


def _search_numpy(
    x: np.ndarray, queries: np.ndarray, k: int, block: int = 2048
) -> tuple[np.ndarray, np.ndarray]:
    n_q = queries.shape[0]
    sims = np.empty((n_q, k), dtype=np.float32)
    idx = np.empty((n_q, k), dtype=np.int64)
    for start in range(0, n_q, block):  # blocks bound memory to block x N, not a loop over samples
        s = queries[start : start + block] @ x.T
        part = np.argpartition(-s, k - 1, axis=1)[:, :k]
        part_s = np.take_along_axis(s, part, axis=1)
        order = np.argsort(-part_s, axis=1, kind="stable")
        idx[start : start + block] = np.take_along_axis(part, order, axis=1)
        sims[start : start + block] = np.take_along_axis(part_s, order, axis=1)
    return sims, idx


def knn(
    x: np.ndarray,
    k: int,
    query_ids: np.ndarray | None = None,
    backend: str = "auto",
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` most similar rows of ``x`` for each query row, excluding the query itself.

    Args:
        x: ``(N, d)`` L2-normalised vectors (cast to contiguous fp32).
        k: neighbours per query, ``1 <= k < N``.
        query_ids: indices of the query rows (default: every row); their neighbours are searched
            among all ``N`` rows.
        backend: one of :data:`BACKENDS`.

    Returns:
        ``(similarities, indices)``, both ``(Q, k)``, sorted by decreasing similarity. The query's
        own index never appears, also when duplicates of it tie with it (removal is by index,
        not by rank).

    Raises:
        ValueError: for ``k`` out of range or an unknown backend.
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    n = x.shape[0]
    if not 1 <= k < n:
        raise ValueError(f"k must satisfy 1 <= k < N (N = {n} rows); got k = {k}")
    query_ids = np.arange(n) if query_ids is None else np.asarray(query_ids, dtype=np.int64)
    queries = np.ascontiguousarray(x[query_ids])
    resolved = resolve_backend(backend)
    if resolved == "numpy":
        sims, idx = _search_numpy(x, queries, k + 1)
    else:
        sims, idx = _search_faiss(x, queries, k + 1, gpu=resolved == "faiss-gpu")
    # Drop the query itself wherever it landed; when it is not among the k+1 (more than k exact
    # duplicates), drop the last. A stable sort on "is self" keeps the rest in similarity order.
    if np.array_equal(idx[:, 0], query_ids):  # the common case: every query is its own first hit
        return sims[:, 1:], idx[:, 1:].astype(np.int64)
    is_self = idx == query_ids[:, None]
    is_self[:, -1] |= ~is_self.any(axis=1)
    order = np.argsort(is_self, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(sims, order, axis=1), np.take_along_axis(idx, order, axis=1).astype(np.int64)
