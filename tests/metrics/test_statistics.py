"""Statistics against scipy and straightforward implementations on fixed data."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from mteb_lrd.metrics.statistics import (
    paired_spearman_difference,
    partial_spearman,
    spearman,
    wilcoxon_paired,
)

X = np.array([0.1, 0.4, 0.35, 0.8, 0.6, 0.9, 0.2])
Y = np.array([1.0, 2.5, 2.0, 3.9, 4.1, 3.0, 0.5])
Z = np.array([5.0, 1.0, 3.0, 2.0, 8.0, 4.0, 6.0])


def test_spearman_matches_scipy_and_hand_case():
    got = spearman(X, Y)
    ref = stats.spearmanr(X, Y)

    def rho(y):
        return stats.spearmanr(X, y).statistic

    exact = stats.permutation_test((Y,), rho, permutation_type="pairings", n_resamples=np.inf)
    assert got.rho == pytest.approx(ref.statistic) and got.n == 7
    assert got.p == pytest.approx(exact.pvalue)  # scipy's own exact permutation test (5,040 orders)
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]).rho == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]).rho == pytest.approx(-1.0)


def test_spearman_undefined_cases_are_nan():
    assert np.isnan(spearman([1, 1, 1, 1], [1, 2, 3, 4]).rho)
    assert np.isnan(spearman([1, 2], [1, 2]).rho)
    with pytest.raises(ValueError, match="same length"):
        spearman([1, 2, 3], [1, 2])


def test_partial_spearman_matches_residual_formula():
    # Straightforward reference: Pearson partial correlation of ranks via the recursive formula.
    rx, ry, rz = (stats.rankdata(v) for v in (X, Y, Z))
    r = np.corrcoef([rx, ry, rz])
    expected = (r[0, 1] - r[0, 2] * r[1, 2]) / np.sqrt((1 - r[0, 2] ** 2) * (1 - r[1, 2] ** 2))
    got = partial_spearman(X, Y, Z)
    assert got.rho == pytest.approx(expected)
    dof = 7 - 3
    t = expected * np.sqrt(dof / (1 - expected**2))
    assert got.p == pytest.approx(2 * stats.t.sf(abs(t), dof))


def test_partial_spearman_no_dof_is_nan():
    assert np.isnan(partial_spearman(X[:4], Y[:4], np.eye(4)[:, :3]).rho)
    assert np.isnan(partial_spearman(X[:2], Y[:2], Z[:2]).rho)


def test_partial_spearman_repeated_covariate_costs_no_degree_of_freedom():
    # A copy (or monotone transform) of a covariate adds nothing to the rank regression: the
    # residuals, ρ and the t test's n - 2 - 1 degrees of freedom are those of the single column.
    single = partial_spearman(X, Y, Z)
    for repeated in (np.column_stack([Z, Z]), np.column_stack([Z, np.log(Z), -3 * Z])):
        got = partial_spearman(X, Y, repeated)
        assert got.rho == pytest.approx(single.rho) and got.p == pytest.approx(single.p)
    # Five observations, three copies: one covariate's worth of freedom is lost, not three.
    assert np.isfinite(partial_spearman(X[:5], Y[:5], np.column_stack([Z[:5]] * 3)).p)


@given(st.one_of(st.floats(max_value=0.0), st.floats(min_value=1.0), st.just(float("nan"))))
def test_paired_difference_rejects_bad_confidence(confidence):
    with pytest.raises(ValueError, match="confidence"):
        paired_spearman_difference([1.0, 2.0, 3.0], [1.0, 3.0, 2.0], [1.0, 2.0, 3.0], confidence=confidence)


@given(st.one_of(st.integers(max_value=0), st.booleans(), st.floats()))
def test_paired_difference_rejects_bad_resample_counts(n_resamples):
    with pytest.raises(ValueError, match="n_resamples"):
        paired_spearman_difference([1.0, 2.0, 3.0], [1.0, 3.0, 2.0], [1.0, 2.0, 3.0], n_resamples=n_resamples)


def test_wilcoxon_matches_scipy():
    a = np.array([0.1, -0.2, 0.05, 0.3, -0.1, 0.25, 0.15])
    b = np.array([0.0, -0.1, -0.05, 0.1, -0.3, 0.2, 0.0])
    assert wilcoxon_paired(a, b) == pytest.approx(stats.wilcoxon(a, b).pvalue)
    assert np.isnan(wilcoxon_paired([1.0, 2.0], [1.0, 2.0]))
    with pytest.raises(ValueError, match="NaN"):
        wilcoxon_paired([np.nan, 1.0], [1.0, 2.0])


def test_paired_spearman_difference_against_a_loop():
    rng = np.random.default_rng(1)
    gold = rng.normal(size=60)
    a, b = gold + rng.normal(scale=0.5, size=60), gold + rng.normal(scale=1.5, size=60)
    a[:5] = a[0]  # ties
    result = paired_spearman_difference(a, b, gold, n_resamples=150, seed=3)
    draws = np.random.default_rng(3).integers(0, 60, size=(150, 60))
    loop = np.array(
        [stats.spearmanr(a[i], gold[i]).statistic - stats.spearmanr(b[i], gold[i]).statistic for i in draws]
    )
    assert result.delta == pytest.approx(
        stats.spearmanr(a, gold).statistic - stats.spearmanr(b, gold).statistic
    )
    assert (result.ci_low, result.ci_high) == pytest.approx(tuple(np.quantile(loop, [0.025, 0.975])))
    assert result.p == pytest.approx(max(2 * min(np.mean(loop <= 0), np.mean(loop >= 0)), 1 / 150))
    assert result.n == 60 and result.n_resamples == 150 and result.ci_low < result.delta < result.ci_high


def test_paired_spearman_difference_hand_cases():
    gold = np.arange(20.0)
    same = paired_spearman_difference(gold, gold, gold, n_resamples=50)
    assert (same.delta, same.ci_low, same.ci_high, same.p) == (0.0, 0.0, 0.0, 1.0)
    noise = np.random.default_rng(0).permutation(20).astype(float)
    better = paired_spearman_difference(gold, noise, gold, n_resamples=500)
    assert better.delta == pytest.approx(1 - stats.spearmanr(noise, gold).statistic)
    assert better.ci_low > 0 and better.p == pytest.approx(1 / 500)
    flat = paired_spearman_difference(np.ones(5), np.ones(5), np.arange(5.0), n_resamples=10)
    assert np.isnan(flat.delta) and np.isnan(flat.p) and flat.n_resamples == 0


@pytest.mark.parametrize(
    ("a", "b", "gold", "match"),
    [([1, 2, 3], [1, 2], [1, 2, 3], "same length"), ([1, 2], [1, 2], [1, 2], "at least 3"),
     ([1, np.nan, 3], [1, 2, 3], [1, 2, 3], "NaN"), ([[1, 2, 3]], [1, 2, 3], [1, 2, 3], "1-d")],
)  # fmt: skip
def test_paired_spearman_difference_rejects_bad_input(a, b, gold, match):
    with pytest.raises(ValueError, match=match):
        paired_spearman_difference(a, b, gold)
