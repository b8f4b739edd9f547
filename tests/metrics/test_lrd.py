"""lrd() runs one kNN search per layer for NRS and GFMI: its numbers equal the three functions called alone."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mteb_lrd import frenet, gfmi, lrd, nrs

TOL = 1e-6


def _assert_same(combined, frenet_r, nrs_r, gfmi_r):
    np.testing.assert_allclose(combined.frenet.speed, frenet_r.speed, atol=TOL)
    np.testing.assert_allclose(combined.frenet.curvature, frenet_r.curvature, atol=TOL)
    assert combined.frenet.d0L == pytest.approx(frenet_r.d0L, abs=TOL)
    assert combined.frenet.rank == frenet_r.rank
    np.testing.assert_allclose(combined.nrs.jaccard, nrs_r.jaccard, atol=TOL)
    assert combined.nrs.first_last == pytest.approx(nrs_r.first_last, abs=TOL)
    np.testing.assert_allclose(combined.gfmi.mi, gfmi_r.mi, atol=TOL)
    np.testing.assert_allclose(combined.gfmi.auc, gfmi_r.auc, atol=TOL)
    np.testing.assert_allclose(combined.gfmi.peak_mi, gfmi_r.peak_mi, atol=TOL)
    np.testing.assert_array_equal(combined.gfmi.peak_percentile, gfmi_r.peak_percentile)
    summary = combined.summary()
    for prefix, result in (("frenet", frenet_r), ("nrs", nrs_r), ("gfmi", gfmi_r)):
        for key, value in result.summary().items():
            if math.isnan(value):
                assert math.isnan(summary[f"{prefix}_{key}"])
            else:
                assert summary[f"{prefix}_{key}"] == pytest.approx(value, abs=TOL), f"{prefix}_{key}"


@pytest.mark.parametrize("backend", ["numpy", "faiss-cpu"])
def test_lrd_equals_the_three_functions_called_separately(states, backend):
    _assert_same(
        lrd(states, backend=backend),
        frenet(states),
        nrs(states, backend=backend),
        gfmi(states, backend=backend),
    )


def test_lrd_with_nrs_k_larger_than_gfmi_k(deep_states):
    kwargs = {"nrs_k": 25, "gfmi_k": 8, "n_anchors": 30, "seed": 3, "rank": 4, "percentiles": [10, 40, 90]}
    combined = lrd(deep_states, backend="numpy", **kwargs)
    _assert_same(
        combined,
        frenet(deep_states, rank=4),
        nrs(deep_states, k=25, n_anchors=30, seed=3, backend="numpy"),
        gfmi(deep_states, k=8, percentiles=[10, 40, 90], backend="numpy"),
    )
    assert (combined.nrs.k, combined.nrs.n_anchors, combined.gfmi.k) == (25, 30, 8)
    assert combined.params["backend"] == "numpy" and combined.params["rank"] == 4


def test_lrd_result_is_json_serialisable(states):
    result = lrd(states[:2])  # L = 1: no curvature, NaN summaries must become null
    text = json.dumps(result.to_dict(), allow_nan=False)
    back = json.loads(text)
    assert back["num_layers"] == 1 and back["n_input"] == states.shape[1] and back["n_dropped"] == 0
    assert back["frenet"]["curvature"] == [] and back["frenet"]["summary"]["mean_curvature"] is None
    assert back["nrs"]["jaccard"] == pytest.approx(result.nrs.jaccard.tolist())
    assert back["summary"]["frenet_d0L"] == pytest.approx(result.frenet.d0L)
    assert len(back["gfmi"]["auc"]) == 2


def test_lrd_counts_dropped_rows_in_every_family(states):
    x = states.copy()
    x[1, 4] = np.nan
    x[3, 9, 2] = np.inf
    x[:, 77] = 0.0
    combined = lrd(x, backend="numpy")
    clean = np.delete(states, [4, 9, 77], axis=1)
    assert (
        combined.n_dropped
        == combined.frenet.n_dropped
        == combined.nrs.n_dropped
        == combined.gfmi.n_dropped
        == 3
    )
    assert combined.n_input == states.shape[1] and combined.frenet.n_used == states.shape[1] - 3
    _assert_same(combined, frenet(clean), nrs(clean, backend="numpy"), gfmi(clean, backend="numpy"))


@pytest.mark.parametrize(
    "bad",
    [
        {"nrs_k": 0},
        {"gfmi_k": 1.5},
        {"percentiles": [5.0]},
        {"backend": "nope"},
        {"rank": 0},
        {"n_anchors": 0},
    ],
)
def test_lrd_rejects_bad_parameters(states, bad):
    with pytest.raises(ValueError):
        lrd(states, **bad)


def test_lrd_needs_more_rows_than_the_larger_k(states):
    with pytest.raises(ValueError, match="at least 31 valid rows"):
        lrd(states[:, :30])


def test_lrd_takes_its_metric_parameters_as_one_object():
    from mteb_lrd.metrics.params import MetricParams

    states = np.random.RandomState(5).randn(4, 60, 12)
    by_keywords = lrd(states, nrs_k=5, n_anchors=30, gfmi_k=6, rank=3)
    by_object = lrd(states, params=MetricParams(nrs_k=5, n_anchors=30, gfmi_k=6, rank=3))
    assert by_object.summary() == pytest.approx(by_keywords.summary(), nan_ok=True)
    assert by_object.params == by_keywords.params
    with pytest.raises(ValueError, match="either as params= or as keywords"):
        lrd(states, params=MetricParams(nrs_k=5), gfmi_k=6)
