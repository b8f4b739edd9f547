"""NRS against Python sets over sklearn brute-force kNN, and hand-computed cases (spec §3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mteb_lrd import nrs
from mteb_lrd.metrics import jaccard_retention
from mteb_lrd.metrics.nrs import anchor_ids
from tests.metrics.reference import assert_summary_equal, ref_anchors, ref_nrs, ref_nrs_summary

TOL = 1e-6


@pytest.mark.parametrize("backend", ["numpy", "faiss-cpu"])
@pytest.mark.parametrize(
    ("fixture", "k", "n_anchors"), [("states", 20, 500), ("states", 7, 40), ("deep_states", 20, 60)]
)
def test_nrs_matches_reference_sets(request, fixture, k, n_anchors, backend):
    x = request.getfixturevalue(fixture)
    ours = nrs(x, k=k, n_anchors=n_anchors, backend=backend)
    ref = ref_nrs(x, k=k, n_anchors=n_anchors)
    assert ours.n_anchors == len(ref["anchors"]) == min(n_anchors, x.shape[1])
    assert (ours.k, ours.n_used, ours.n_dropped) == (k, x.shape[1], 0)
    np.testing.assert_allclose(ours.jaccard, ref["jaccard"], atol=TOL)
    assert ours.first_last == pytest.approx(ref["first_last"], abs=TOL)
    assert 0 < ours.jaccard.min() and ours.jaccard.max() < 1  # the fixture is not trivial
    assert_summary_equal(ours.summary(), ref_nrs_summary(ref))


def test_anchor_rule_is_the_references():
    for n, count in [(1000, 500), (300, 500), (50, 7)]:
        ids = anchor_ids(n, count, seed=42)
        assert ids.tolist() == ref_anchors(n, count, 42)
        assert ids.tolist() == sorted(
            np.random.RandomState(42).choice(n, min(count, n), replace=False).tolist()
        )
    assert anchor_ids(10, 10).tolist() == list(range(10))


def test_anchor_seed_changes_the_anchors_and_the_result(states):
    assert anchor_ids(150, 40, seed=1).tolist() != anchor_ids(150, 40, seed=42).tolist()
    a, b = nrs(states, k=7, n_anchors=40, seed=1), ref_nrs(states, k=7, n_anchors=40, seed=1)
    np.testing.assert_allclose(a.jaccard, b["jaccard"], atol=TOL)


def test_identical_layers_retain_everything(states):
    result = nrs(np.repeat(states[:1], 3, axis=0), k=10)
    np.testing.assert_array_equal(result.jaccard, 1.0)
    assert result.first_last == 1.0
    assert result.summary()["mean_instability"] == 0.0


def test_jaccard_retention_hand_computed():
    a = np.array([[1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4]])
    b = np.array([[4, 3, 2, 1], [5, 6, 7, 8], [3, 4, 5, 6]])
    np.testing.assert_allclose(jaccard_retention(a, b), [1.0, 0.0, 2 / 6])


def test_jaccard_retention_matches_sets_on_random_rows():
    rng = np.random.default_rng(5)
    a = np.array([rng.choice(30, 8, replace=False) for _ in range(100)])
    b = np.array([rng.choice(30, 8, replace=False) for _ in range(100)])
    expected = [len(set(x) & set(y)) / len(set(x) | set(y)) for x, y in zip(a, b, strict=True)]
    np.testing.assert_allclose(jaccard_retention(a, b), expected, atol=1e-12)


def test_one_transition_summary(states):
    result = nrs(states[:2], k=5)
    summary = result.summary()
    assert summary["early_jaccard"] == summary["late_jaccard"] == pytest.approx(result.jaccard[0])
    assert math.isnan(summary["mid_jaccard"])  # J[1:2] is empty for L = 1
    assert result.first_last == pytest.approx(result.jaccard[0], abs=1e-12)


@pytest.mark.parametrize("bad", [{"k": 0}, {"k": 2.5}, {"n_anchors": 0}, {"backend": "gpu"}])
def test_nrs_rejects_bad_parameters(states, bad):
    with pytest.raises(ValueError):
        nrs(states, **bad)


def test_nrs_needs_more_rows_than_k(states):
    with pytest.raises(ValueError, match="at least 21 valid rows"):
        nrs(states[:, :20], k=20)
    assert nrs(states[:, :21], k=20).jaccard.shape == (states.shape[0] - 1,)


@pytest.mark.parametrize("backend", ["numpy", "faiss-cpu"])
def test_nrs_by_layer_equals_nrs_and_reads_one_layer_at_a_time(states, backend):
    from mteb_lrd.metrics.nrs import nrs_by_layer

    x = states.astype(np.float32).copy()
    x[1, 4] = np.inf  # dropped from every layer
    reads = []

    def read(layer):
        reads.append(layer)
        return x[layer]

    ours = nrs_by_layer(read, x.shape[0], k=7, n_anchors=40, seed=3, backend=backend)
    whole = nrs(x, k=7, n_anchors=40, seed=3, backend=backend)
    assert sorted(reads) == sorted(2 * list(range(x.shape[0])))
    np.testing.assert_array_equal(ours.jaccard, whole.jaccard)
    assert (ours.first_last, ours.n_used, ours.n_dropped, ours.n_anchors) == (
        whole.first_last, whole.n_used, whole.n_dropped, whole.n_anchors,
    )  # fmt: skip
    with pytest.raises(ValueError, match="needs at least 8 valid rows"):
        nrs_by_layer(lambda layer: x[layer, :6], x.shape[0], k=7)
