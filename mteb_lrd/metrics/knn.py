"""Exact cosine k-nearest neighbours on L2-normalised vectors, self excluded by index.

Backends: FAISS (``faiss-gpu`` when FAISS sees a GPU, ``faiss-cpu``), ``torch`` and a plain
``numpy`` one for checks. ``torch`` on CUDA: blocked fp32 GEMM + ``topk``. ``torch`` on the CPU, for
the all-rows search NRS / GFMI / ``lrd()`` do: a symmetric blocked search that computes each pair's
similarity once (half the GEMM; numpy's BLAS, torch's ``topk``). ``auto`` takes faiss-gpu, else
torch on CUDA, else faiss-cpu (the fastest CPU path in ``benchmarks/bench_lrd.py`` on a quiet
machine), else torch on the CPU, else numpy.
Similarities are fp32 inner products (TF32 off): fp16 / TF32 near-ties would flip neighbours.
Backends round differently in the last bit, so two neighbours whose similarities differ by ~1e-7
may swap places between backends. Exactly equal similarities are ordered by index within the k
found (torch, numpy), but which of several rows tied at the k-th place are found depends on the
backend: a state with one vector for every text has backend-dependent neighbours.
Memory is bounded by a block of rows times ``N`` (:data:`BLOCK_BYTES`), never ``N × N``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["BACKENDS", "resolve_backend", "knn"]

BACKENDS: tuple[str, ...] = ("auto", "faiss-cpu", "faiss-gpu", "torch", "numpy")

BLOCK_BYTES = 256 * 2**20
"""Similarity block of the numpy and torch backends: query rows × N fp32 values within this size."""


@lru_cache(maxsize=1)
def _faiss_gpus() -> int:
    try:
        import faiss
    except ImportError:
        return -1
    get = getattr(faiss, "get_num_gpus", None)
    return int(get()) if get is not None else 0


@lru_cache(maxsize=1)
def _torch_devices() -> int:
    """-1: no torch; 0: torch on the CPU only; 1: torch with CUDA."""
    try:
        import torch
    except ImportError:
        return -1
    return int(torch.cuda.is_available())


def _torch_cuda() -> bool:
    return _torch_devices() > 0


def resolve_backend(backend: str = "auto") -> str:
    """Turn ``"auto"`` into the concrete backend this machine offers and validate the others.

    ``auto``: faiss-gpu when FAISS sees a GPU, else torch on CUDA, else faiss-cpu, else torch on
    the CPU (the symmetric search), else numpy.

    Raises:
        ValueError: for an unknown name, or a FAISS backend that is not available here.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}; got {backend!r}")
    gpus = _faiss_gpus()
    if backend == "auto":
        if gpus > 0:
            return "faiss-gpu"
        if _torch_devices() > 0:
            return "torch"
        if gpus == 0:
            return "faiss-cpu"
        return "torch" if _torch_devices() == 0 else "numpy"
    if backend == "torch" and _torch_devices() < 0:
        raise ValueError("backend 'torch' needs the torch package")
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


def _block_rows(n: int, block: int | None) -> int:
    return max(1, block if block is not None else BLOCK_BYTES // (4 * max(n, 1)))


def _by_similarity_then_index(values: np.ndarray, where: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows sorted by decreasing similarity, equal similarities by increasing index (``topk``'s
    order among ties is arbitrary); rows already sorted without ties (the usual case) pass as they are."""
    if values.shape[1] < 2 or np.all(values[:, 1:] < values[:, :-1]):
        return values, where.astype(np.int64, copy=False)
    by_index = np.argsort(where, axis=1, kind="stable")
    values, where = np.take_along_axis(values, by_index, 1), np.take_along_axis(where, by_index, 1)
    order = np.argsort(-values, axis=1, kind="stable")
    return np.take_along_axis(values, order, 1), np.take_along_axis(where, order, 1).astype(np.int64)


def _search_torch(
    x: np.ndarray, queries: np.ndarray, k: int, block: int | None = None, device: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Blocked ``queries @ x.T`` and ``topk`` in torch, fp32 (TF32 off)."""
    import torch

    device = device or ("cuda" if _torch_cuda() else "cpu")
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # no TF32: near-ties would flip neighbours
    try:
        xt = torch.from_numpy(x).to(device)
        qt = torch.from_numpy(queries).to(device)
        step = _block_rows(x.shape[0], block)
        sims, idx = [], []
        for start in range(0, qt.shape[0], step):  # blocks bound memory to step x N
            values, where = torch.topk(qt[start : start + step] @ xt.T, k, dim=1, sorted=True)
            sims.append(values)
            idx.append(where)
        found = torch.cat(sims).cpu().numpy(), torch.cat(idx).cpu().numpy()
    finally:
        torch.set_float32_matmul_precision(precision)
    return _by_similarity_then_index(*found)


SYMMETRIC_BLOCK = 1024
"""Rows per strip of the symmetric CPU search (the best of 512 / 1024 / 2048 at N = 5000, d = 384)."""


def _self_search_mirrored(x: np.ndarray, k: int, block: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """All-rows kNN when the ``N × N`` similarities fit in :data:`BLOCK_BYTES`: the upper block
    triangle from GEMMs, the lower one mirrored (each pair computed once), one ``topk`` over full
    rows (``topk`` is several times faster per value on long rows than on short ones)."""
    import torch

    n = x.shape[0]
    b = block or SYMMETRIC_BLOCK
    sims = np.empty((n, n), dtype=np.float32)
    for i in range(0, n, b):
        end = min(i + b, n)
        sims[i:end, i:] = x[i:end] @ x[i:].T
        sims[end:, i:end] = sims[i:end, end:].T
    np.fill_diagonal(sims, -np.inf)  # self, excluded by index
    values, where = torch.topk(torch.from_numpy(sims), k, dim=1)
    return _by_similarity_then_index(values.numpy(), where.numpy())


def _self_search_symmetric(x: np.ndarray, k: int, block: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """All-rows kNN of ``x`` among its own rows, self excluded by index, from half the similarities.

    Strip ``i`` (rows ``i..i+b``) is multiplied only with rows ``i..N`` (``S_ij`` for ``j >= i``):
    its rows pick candidates from it, and its transpose gives the rows below their candidates among
    rows ``i..i+b``, so every pair's similarity is computed once (about half the GEMM of a full
    search). ``topk`` (torch, on the numpy buffers) keeps ``k`` candidates per row and strip;
    candidate lists are merged every few strips, so memory stays ``O(b·N + N·k)``.
    """
    import torch

    n = x.shape[0]
    b = max(1, min(block or SYMMETRIC_BLOCK, BLOCK_BYTES // (8 * max(n, 1))))
    starts = list(range(0, n, b))
    found: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {i: [] for i in starts}

    def add(start: int, values: torch.Tensor, where: torch.Tensor) -> None:
        found[start].append((values, where))
        if len(found[start]) >= 4:  # merge: keeps candidate memory at O(N·k)
            found[start] = [_merge(found[start], k)]

    for i in starts:
        end = min(i + b, n)
        strip = x[i:end] @ x[i:].T  # (rows of strip i) x (columns i..N)
        strip[np.arange(end - i), np.arange(end - i)] = -np.inf  # self, excluded by index
        values, where = torch.topk(torch.from_numpy(strip), min(k, strip.shape[1]), dim=1)
        add(i, values, where + i)
        if end < n:  # the transpose: candidates of rows end..N among rows i..end
            below = torch.from_numpy(np.ascontiguousarray(strip[:, end - i :].T))
            values, where = torch.topk(below, min(k, end - i), dim=1)
            for j in starts[starts.index(i) + 1 :]:
                rows = slice(j - end, min(j + b, n) - end)
                add(j, values[rows], where[rows] + i)
    merged = [_merge(found[i], k) for i in starts]
    return _by_similarity_then_index(
        torch.cat([v for v, _ in merged]).numpy(), torch.cat([w for _, w in merged]).numpy()
    )


def _merge(parts: list[tuple[Any, Any]], k: int) -> tuple[Any, Any]:
    import torch

    values = torch.cat([v for v, _ in parts], dim=1)
    where = torch.cat([w for _, w in parts], dim=1)
    best, pick = torch.topk(values, min(k, values.shape[1]), dim=1)
    return best, torch.gather(where, 1, pick)


def _search_numpy(
    x: np.ndarray, queries: np.ndarray, k: int, block: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    block = _block_rows(x.shape[0], block)
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
    all_rows = query_ids is None
    query_ids = np.arange(n) if query_ids is None else np.asarray(query_ids, dtype=np.int64)
    queries = np.ascontiguousarray(x[query_ids])
    resolved = resolve_backend(backend)
    if resolved == "numpy":
        sims, idx = _search_numpy(x, queries, k + 1)
    elif resolved == "torch" and all_rows and not _torch_cuda():  # self excluded by index in both
        if 4 * n * n <= BLOCK_BYTES:
            return _self_search_mirrored(x, k)
        return _self_search_symmetric(x, k)
    elif resolved == "torch":
        sims, idx = _search_torch(x, queries, k + 1)
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
