"""Bootstrap intervals against a straightforward loop over resamples (scipy / numpy per resample)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from mteb_lrd.metrics import bootstrap
from mteb_lrd.metrics.bootstrap import bootstrap_mean, bootstrap_spearman
from mteb_lrd.metrics.nrs import jaccard_retention, nrs


def _reference(values, statistic, resamples, seed, confidence=0.95):
    """One resample at a time, the draws taken as one (resamples, n) matrix."""
    n = values.shape[1]
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    estimates = np.array([[statistic(row[i]) for row in values] for i in idx])
    alpha = (1 - confidence) / 2
    return np.nanquantile(estimates, [alpha, 1 - alpha], axis=0)


@pytest.mark.parametrize("chunk", [10**9, 97])  # one chunk, and many chunks of uneven size
def test_mean_interval_equals_the_loop(monkeypatch, chunk):
    monkeypatch.setattr(bootstrap, "_CHUNK_ELEMENTS", chunk)
    values = np.random.RandomState(1).rand(3, 40)
    got = bootstrap_mean(values, resamples=300, seed=5)
    low, high = _reference(values, np.mean, 300, 5)
    assert got.low == pytest.approx(low, abs=1e-12) and got.high == pytest.approx(high, abs=1e-12)
    assert (got.resamples, got.seed, got.confidence) == (300, 5, 0.95)


@pytest.mark.parametrize("chunk", [10**9, 150])
def test_spearman_interval_equals_the_loop_with_ties(monkeypatch, chunk):
    monkeypatch.setattr(bootstrap, "_CHUNK_ELEMENTS", chunk)
    rng = np.random.RandomState(2)
    y = rng.randint(0, 6, 30).astype(float)  # gold scores with many ties
    x = np.stack([y + rng.randn(30) * s for s in (0.5, 2.0)])
    x = np.vstack([x, np.round(x[1])])  # a row with ties of its own
    got = bootstrap_spearman(x, y, resamples=200, seed=3)
    idx = np.random.default_rng(3).integers(0, 30, size=(200, 30))
    rho = np.array([[stats.spearmanr(row[i], y[i]).statistic for row in x] for i in idx])
    low, high = np.nanquantile(rho, [0.025, 0.975], axis=0)
    assert got.low == pytest.approx(low, abs=1e-12) and got.high == pytest.approx(high, abs=1e-12)
    assert got.low[0] > got.low[1]  # less noise, a higher correlation


def test_constant_items_give_a_point_interval():
    got = bootstrap_mean(np.full((2, 10), 0.25))
    assert got.low.tolist() == got.high.tolist() == [0.25, 0.25]


def test_nrs_interval_brackets_the_profile_and_is_recorded():
    rng = np.random.RandomState(0)
    base = rng.randn(120, 16)
    states = np.stack([base + rng.randn(120, 16) * s for s in (0.0, 0.3, 0.6, 1.2)])
    result = nrs(states, k=5, n_anchors=60)
    ci = result.jaccard_ci
    assert ci is not None and ci.over == "anchors" and ci.low.shape == result.jaccard.shape
    assert np.all(ci.low <= result.jaccard) and np.all(result.jaccard <= ci.high)
    assert np.all(ci.high - ci.low > 0)


def test_nrs_interval_uses_the_per_anchor_retention():
    rng = np.random.RandomState(4)
    states = rng.randn(3, 50, 8)
    result = nrs(states, k=4, n_anchors=50)
    unit = states / np.linalg.norm(states, axis=2, keepdims=True)
    order = [np.argsort(-(layer @ layer.T) + 10 * np.eye(50), axis=1)[:, :4] for layer in unit]
    per_anchor = np.stack([jaccard_retention(order[i], order[i + 1]) for i in range(2)])
    expected = bootstrap_mean(per_anchor, over="anchors")
    assert result.jaccard_ci.low == pytest.approx(expected.low) and result.jaccard_ci.high == pytest.approx(
        expected.high
    )


@settings(max_examples=30, deadline=None)
@given(
    shape=st.sampled_from([(3,), (2, 1), (0, 5), (1, 2, 3)]),
    resamples=st.sampled_from([0, -1, 1.5]),
    confidence=st.sampled_from([0.0, 1.0, 1.5]),
)
def test_bad_input_is_a_clear_error(shape, resamples, confidence):
    with pytest.raises(ValueError, match="items"):
        bootstrap_mean(np.zeros(shape))
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_mean(np.zeros((2, 4)), resamples=resamples)
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_spearman(np.zeros((2, 4)), np.zeros(4), confidence=confidence)
    with pytest.raises(ValueError, match="one value per item"):
        bootstrap_spearman(np.zeros((2, 4)), np.zeros(3))


def test_median_spearman_interval_resamples_models_jointly():
    from mteb_lrd.metrics.bootstrap import bootstrap_median_spearman

    rng = np.random.RandomState(6)
    x = rng.rand(3, 8).round(1)
    y = x + rng.rand(3, 8)
    got = bootstrap_median_spearman(x, y, resamples=300, seed=2)
    idx = np.random.default_rng(2).integers(0, 8, size=(300, 8))
    medians = [np.nanmedian([stats.spearmanr(x[t][i], y[t][i]).statistic for t in range(3)]) for i in idx]
    low, high = np.nanquantile(medians, [0.025, 0.975])
    assert got.over == "models" and got.low[0] == pytest.approx(low) and got.high[0] == pytest.approx(high)
