"""GFMI against sklearn kNN + scipy components + sklearn mutual_info_score (spec §4)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components
from sklearn.metrics import mutual_info_score

from mteb_lrd import gfmi
from mteb_lrd.metrics import mutual_information
from mteb_lrd.metrics.gfmi import (
    DEFAULT_PERCENTILES,
    filtration_components,
    gfmi_by_layer,
    linear_percentiles,
)
from tests.metrics.reference import (
    assert_summary_equal,
    normalise,
    ref_components,
    ref_gfmi,
    ref_gfmi_summary,
)

TOL = 1e-6


def _entropy(labels) -> float:
    _, counts = np.unique(labels, return_counts=True)
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum())


@pytest.mark.parametrize("backend", ["numpy", "faiss-cpu"])
@pytest.mark.parametrize(("fixture", "k"), [("states", 30), ("deep_states", 10)])
def test_gfmi_matches_reference(request, fixture, k, backend):
    x = request.getfixturevalue(fixture)
    ours, ref = gfmi(x, k=k, backend=backend), ref_gfmi(x, k=k)
    np.testing.assert_allclose(ours.mi, ref["mi"], atol=TOL)
    np.testing.assert_allclose(ours.auc, ref["auc"], atol=TOL)
    np.testing.assert_allclose(ours.peak_mi, ref["peak_mi"], atol=TOL)
    np.testing.assert_array_equal(ours.peak_percentile, ref["peak_percentile"])
    np.testing.assert_array_equal(ours.percentiles, DEFAULT_PERCENTILES)
    assert ours.auc.shape == (x.shape[0],) and ours.mi.shape == (x.shape[0], 20)
    assert (ours.k, ours.n_used, ours.n_dropped) == (k, x.shape[1], 0)
    assert ours.auc[0] < ours.auc[-1]  # the fixture is not trivial: early layers agree less
    assert_summary_equal(ours.summary(), ref_gfmi_summary(ref))


def test_gfmi_custom_percentiles(states):
    p = [10.0, 50.0, 60.0, 99.0]
    ours, ref = gfmi(states, k=12, percentiles=p), ref_gfmi(states, k=12, percentiles=np.array(p))
    np.testing.assert_allclose(ours.mi, ref["mi"], atol=TOL)
    np.testing.assert_allclose(ours.auc, ref["auc"], atol=TOL)


def test_final_layer_self_alignment_is_integrated_entropy(states):
    # MI of a partition with itself is its entropy: the final layer's row is the entropy curve.
    result = gfmi(states, k=30)
    entropies = [_entropy(lab) for lab in ref_components(normalise(states[-1]), 30, DEFAULT_PERCENTILES)]
    assert max(entropies) > 0
    np.testing.assert_allclose(result.mi[-1], entropies, atol=TOL)
    assert result.auc[-1] == pytest.approx(np.trapezoid(entropies, x=DEFAULT_PERCENTILES), abs=TOL)


def test_identical_layers_have_equal_gfmi(states):
    result = gfmi(np.repeat(states[-1:], 3, axis=0), k=15)
    np.testing.assert_allclose(result.auc, result.auc[-1], atol=1e-12)
    np.testing.assert_allclose(result.mi[0], result.mi[-1], atol=1e-12)


def test_mutual_information_of_a_labeling_with_itself_is_its_entropy():
    labels = np.array([0, 0, 1, 1, 1, 2, 5, 5])
    assert mutual_information(labels, labels) == pytest.approx(_entropy(labels), abs=1e-12)
    assert mutual_information(labels, labels) == pytest.approx(
        -(2 / 8 * math.log(2 / 8) * 2 + 3 / 8 * math.log(3 / 8) + 1 / 8 * math.log(1 / 8)), abs=1e-12
    )


def test_mutual_information_hand_computed():
    a = np.array([0, 0, 1, 1])
    assert mutual_information(a, np.array([5, 5, 9, 9])) == pytest.approx(
        math.log(2), abs=1e-12
    )  # relabelled copy
    assert mutual_information(a, np.array([0, 1, 0, 1])) == pytest.approx(0.0, abs=1e-12)  # independent
    assert mutual_information(a, np.zeros(4, dtype=int)) == 0.0  # a constant carries no information


@pytest.mark.parametrize("seed", range(6))
def test_mutual_information_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 400))
    a = rng.integers(0, int(rng.integers(1, 60)), n)
    b = (a * 7 + rng.integers(0, int(rng.integers(1, 5)), n)) % int(rng.integers(1, 40))  # dependent
    c = rng.integers(-1000, 1000, n)  # many labels, negative ids
    for x, y in ((a, b), (a, c), (b, c), (c, c)):
        assert mutual_information(x, y) == pytest.approx(mutual_info_score(x, y), abs=1e-10)
        assert mutual_information(x, y) >= 0


@pytest.mark.parametrize(
    "bad",
    [
        {"k": 0},
        {"k": -3},
        {"percentiles": [50.0]},
        {"percentiles": [10.0, 10.0]},
        {"percentiles": [20.0, 10.0]},
        {"percentiles": [-1.0, 50.0]},
        {"percentiles": [50.0, 101.0]},
        {"percentiles": [5.0, float("nan")]},
        {"percentiles": [[5.0, 10.0]]},
        {"backend": "tpu"},
    ],
)
def test_gfmi_rejects_bad_parameters(states, bad):
    with pytest.raises(ValueError):
        gfmi(states, **bad)


def test_gfmi_needs_more_rows_than_k(states):
    with pytest.raises(ValueError, match="at least 31 valid rows"):
        gfmi(states[:, :30], k=30)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(-2, 2, allow_nan=False, width=32), min_size=1, max_size=300),
    percentiles=st.lists(st.floats(0, 100), min_size=1, max_size=25),
)
def test_linear_percentiles_equal_numpy_bit_for_bit(values, percentiles):
    x = np.asarray(values, dtype=np.float64)
    p = np.sort(np.asarray(percentiles))
    assert np.array_equal(linear_percentiles(x, p), np.percentile(x, p))


@pytest.mark.parametrize("backend", ["numpy", "faiss-cpu"])
def test_gfmi_by_layer_equals_gfmi_and_reads_one_layer_at_a_time(states, backend):
    x = states.astype(np.float32).copy()
    x[2, 5] = np.nan  # a row bad at one layer is dropped from every layer
    x[-1, 9] = 0.0
    reads = []

    def read(layer):
        reads.append(layer)
        return x[layer]

    ours, whole = gfmi_by_layer(read, x.shape[0], k=10, backend=backend), gfmi(x, k=10, backend=backend)
    assert sorted(reads) == sorted(2 * list(range(x.shape[0])))  # a validity pass, then the graphs
    np.testing.assert_array_equal(ours.mi, whole.mi)
    np.testing.assert_array_equal(ours.auc, whole.auc)
    assert (ours.n_used, ours.n_dropped) == (whole.n_used, whole.n_dropped) == (x.shape[1] - 2, 2)
    assert ours.summary() == whole.summary()


def test_gfmi_by_layer_rejects_what_gfmi_rejects(states):
    with pytest.raises(ValueError, match="at least 2 hidden states"):
        gfmi_by_layer(lambda layer: states[0], 1)
    with pytest.raises(ValueError, match="needs at least 31 valid rows"):
        gfmi_by_layer(lambda layer: states[layer, :20], states.shape[0], k=30)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        gfmi_by_layer(lambda layer: states[layer], states.shape[0], k=0)


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Two labelings split the items alike (each label of one maps to exactly one of the other)."""
    pairs = np.unique(np.stack([a, b]), axis=1)
    return len(np.unique(pairs[0])) == len(np.unique(pairs[1])) == pairs.shape[1]


@st.composite
def knn_graphs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(distances (n, k), neighbours (n, k), percentiles)``: distances from a few levels (ties,
    zeros) on random neighbour lists, self-loops included."""
    n, k, levels = draw(st.integers(2, 40)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    percentiles = draw(st.lists(st.floats(0, 100), min_size=2, max_size=12, unique=True))
    distances = rng.integers(0, levels, size=(n, k)) / max(levels - 1, 1)
    return distances, rng.integers(0, n, size=(n, k)), np.sort(np.asarray(percentiles))


@settings(max_examples=80, deadline=None)
@given(graph=knn_graphs())
def test_filtration_components_equal_each_thresholded_graph(graph):
    # Each threshold's components must be those of the whole graph of edges at or below it.
    distances, neighbours, p = graph
    n, k = distances.shape
    labels = filtration_components(distances, neighbours, p)
    rows = np.repeat(np.arange(n), k)
    for tau, got in zip(np.percentile(distances, p), labels, strict=True):
        keep = distances.ravel() <= tau
        graph = csr_matrix((np.ones(keep.sum()), (rows[keep], neighbours.ravel()[keep])), shape=(n, n))
        expected = connected_components(graph, directed=False)[1]
        assert _same_partition(got, expected)
        assert got.min() == 0 and got.max() == expected.max()  # labels 0 .. c - 1
