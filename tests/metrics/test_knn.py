"""Exact cosine kNN: every backend against sklearn brute force, self excluded by index (spec §3)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from mteb_lrd.metrics import knn
from mteb_lrd.metrics.knn import resolve_backend
from tests.metrics.reference import normalise, random_states, ref_knn

knn_module = importlib.import_module("mteb_lrd.metrics.knn")  # the module (the package exports the function)
BACKENDS = ["numpy", "faiss-cpu", "torch"]


@pytest.fixture(scope="module")
def layer() -> np.ndarray:
    return normalise(random_states(n_layers=1, n=200, d=16, seed=7)[0]).astype(np.float32)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("k", [1, 5, 30])
def test_knn_matches_sklearn_brute_force(layer, backend, k):
    sims, idx = knn(layer, k, backend=backend)
    ref_ids, ref_dists = ref_knn(layer.astype(np.float64), k)
    assert sims.shape == idx.shape == (len(layer), k)
    assert idx.dtype == np.int64
    np.testing.assert_array_equal(idx, ref_ids)
    np.testing.assert_allclose(1.0 - sims, ref_dists, atol=1e-6)
    assert np.all(np.diff(sims, axis=1) <= 0)  # sorted by decreasing similarity


@pytest.mark.parametrize("backend", BACKENDS)
def test_knn_with_query_subset(layer, backend):
    queries = np.array([0, 17, 42, 199])
    sims, idx = knn(layer, 10, query_ids=queries, backend=backend)
    ref_ids, ref_dists = ref_knn(layer.astype(np.float64), 10, queries.tolist())
    np.testing.assert_array_equal(idx, ref_ids)
    np.testing.assert_allclose(1.0 - sims, ref_dists, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_backends_agree_with_faiss(layer, backend):
    sims, idx = knn(layer, 20, backend=backend)
    sims_faiss, idx_faiss = knn(layer, 20, backend="faiss-cpu")
    np.testing.assert_array_equal(idx, idx_faiss)
    np.testing.assert_allclose(sims, sims_faiss, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_duplicates_self_excluded_by_index(layer, backend):
    x = layer.copy()
    x[10] = x[3]  # one exact duplicate pair
    x[20:25] = x[50]  # a group of six identical rows: 20..24 and 50
    _, idx = knn(x, 5, backend=backend)
    for i in range(len(x)):
        assert i not in idx[i], f"row {i} lists itself"
        assert len(set(idx[i])) == 5
    assert idx[3][0] == 10 and idx[10][0] == 3  # the duplicate is the nearest neighbour
    group = {20, 21, 22, 23, 24, 50}
    for i in group:
        assert set(idx[i]) == group - {i}  # the five other copies, never the row itself


@pytest.mark.parametrize("backend", BACKENDS)
def test_more_duplicates_than_k_still_excludes_self(layer, backend):
    x = layer.copy()
    x[:12] = x[0]  # 12 copies, k = 4: self may fall outside the k+1 results
    _, idx = knn(x, 4, backend=backend)
    for i in range(12):
        assert i not in idx[i]
        assert set(idx[i]) <= set(range(12)) and len(set(idx[i])) == 4


def test_knn_rejects_bad_k(layer):
    for k in (0, -1, len(layer)):
        with pytest.raises(ValueError, match="k must satisfy"):
            knn(layer, k, backend="numpy")


def test_backend_names_are_validated():
    with pytest.raises(ValueError, match="backend must be one of"):
        resolve_backend("cuda")
    assert resolve_backend("auto") in {"faiss-cpu", "faiss-gpu", "torch", "numpy"}
    assert resolve_backend("numpy") == "numpy"
    assert resolve_backend("torch") == "torch"


@pytest.mark.parametrize(
    ("faiss_gpus", "torch_devices", "expected"),
    [(1, 1, "faiss-gpu"), (1, -1, "faiss-gpu"), (0, 1, "torch"), (-1, 1, "torch"), (0, 0, "faiss-cpu"),
     (0, -1, "faiss-cpu"), (-1, 0, "torch"), (-1, -1, "numpy")],
)  # fmt: skip
def test_auto_prefers_gpus_then_faiss_then_torch(monkeypatch, faiss_gpus, torch_devices, expected):
    monkeypatch.setattr(knn_module, "_faiss_gpus", lambda: faiss_gpus)
    monkeypatch.setattr(knn_module, "_torch_devices", lambda: torch_devices)
    assert resolve_backend("auto") == expected
    if torch_devices < 0:
        with pytest.raises(ValueError, match="needs the torch package"):
            resolve_backend("torch")


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_blocked_backends_across_query_blocks(monkeypatch, backend):
    # Blocks of 7 query rows: 300 rows take 43 blocks, the last one short.
    monkeypatch.setattr(knn_module, "BLOCK_BYTES", 4 * 300 * 7)
    x = normalise(random_states(n_layers=1, n=300, d=8, seed=11)[0]).astype(np.float32)
    sims, idx = knn(x, 3, backend=backend)
    ref_ids, ref_dists = ref_knn(x.astype(np.float64), 3)
    np.testing.assert_array_equal(idx, ref_ids)
    np.testing.assert_allclose(1.0 - sims, ref_dists, atol=1e-6)


def test_torch_orders_tied_neighbours_by_index():
    # Row 0 has five neighbours at exactly the same similarity (copies of one vector), at
    # scattered indices; the torch backend lists them by increasing index, like a stable sort.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((40, 6)).astype(np.float32)
    tied = [31, 4, 17, 9, 26]
    x[tied] = x[1]
    x[0] = x[1] + 0.01 * rng.standard_normal(6).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x[1] = x[tied[0]]
    sims, idx = knn(x, 6, query_ids=np.array([0]), backend="torch")
    assert idx[0, :6].tolist() == sorted([1, *tied])
    assert np.all(sims[0, :6] == sims[0, 0])


def test_torch_cpu_mirrored_blocks_match_sklearn(monkeypatch, layer):
    # 200 rows in strips of 64: the lower blocks are mirrored from the upper ones.
    monkeypatch.setattr(knn_module, "SYMMETRIC_BLOCK", 64)
    monkeypatch.setattr(knn_module, "_torch_devices", lambda: 0)
    sims, idx = knn(layer, 30, backend="torch")
    ref_ids, ref_dists = ref_knn(layer.astype(np.float64), 30)
    np.testing.assert_array_equal(idx, ref_ids)
    np.testing.assert_allclose(1.0 - sims, ref_dists, atol=1e-6)
