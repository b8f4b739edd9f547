"""Permutation tests against hand-counted tables and a plain loop over orders."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from mteb_lrd.metrics import permutation
from mteb_lrd.metrics.permutation import holm, joint_permutation, permutation_spearman


@pytest.mark.parametrize(
    ("y", "rho", "p"),
    [
        # n = 6: the exact two-sided p of the reported correlations (720 orders)
        ([2, 1, 4, 3, 5, 6], 0.886, 0.033),
        ([1, 3, 2, 5, 4, 6], 0.886, 0.033),
        ([2, 3, 1, 4, 5, 6], 0.829, 0.058),
        ([6, 5, 3, 4, 2, 1], -0.943, 0.017),
        ([2, 1, 3, 6, 4, 5], 0.771, 0.103),
    ],
)
def test_exact_p_at_six_models(y, rho, p):
    test = permutation_spearman([1, 2, 3, 4, 5, 6], y)
    assert test.exact and test.orders == 720 and test.n == 6
    assert test.statistic == pytest.approx(rho, abs=5e-4)
    assert test.p == pytest.approx(p, abs=5e-4)


def _loop(x, y_rows, how):
    """Every order, one at a time, through scipy's Spearman."""
    n = len(x)

    def stat(xx):
        values = [stats.spearmanr(xx, row).statistic for row in y_rows]
        return np.median(values) if how == "median" else np.mean(values)

    observed = stat(x)
    orders = list(itertools.permutations(range(n)))
    hits = sum(abs(stat([x[i] for i in order])) >= abs(observed) - 1e-12 for order in orders)
    return observed, hits / len(orders)


@pytest.mark.parametrize("how", ["median", "mean"])
def test_joint_permutation_equals_the_loop_with_ties(how):
    rng = np.random.RandomState(3)
    x = [0.3, 0.1, 0.3, 0.9, 0.5, 0.2]  # a tie
    y = rng.rand(3, 6).round(1)  # ties inside tasks
    test = joint_permutation(x, y, statistic=how)
    observed, p = _loop(x, y, how)
    assert test.statistic == pytest.approx(observed, abs=1e-12) and test.p == pytest.approx(p, abs=1e-12)


def test_monte_carlo_above_the_exact_limit(monkeypatch):
    monkeypatch.setattr(permutation, "EXACT_LIMIT", 5)
    x = np.arange(7.0)
    y = x + np.array([0.5, -0.5, 0.2, 0.0, -0.2, 0.3, 0.1])
    test = permutation_spearman(x, y, resamples=20_000, seed=1)
    assert not test.exact and test.orders == 20_000 and test.p >= 1 / 20_001
    monkeypatch.setattr(permutation, "EXACT_LIMIT", 10)
    exact = permutation_spearman(x, y)  # 5,040 orders
    assert exact.exact and test.p == pytest.approx(exact.p, abs=0.005)  # 20,000 draws: SE < 0.002


def test_holm_by_hand():
    assert holm([0.01, 0.04, 0.03, 0.005]).tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]).tolist() == [1.0, 1.0]


def test_a_p_equal_to_alpha_up_to_rounding_is_not_below_it():
    from mteb_lrd.metrics.permutation import below

    assert not below(holm([2 / 120, 0.5, 0.9])[0], 0.05)  # 5 models, |rho| = 1, best of three
    assert not below(np.nextafter(0.05, 0), 0.05)  # one rounding step under alpha is alpha
    assert not below(2 / 120, 0.05 / 3) and below(0.0499, 0.05) and not below(0.0501, 0.05)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: permutation_spearman([1, 2], [2, 1]), "at least 3 models"),
        (lambda: permutation_spearman([1, 2, 3], [1, 2]), "x must be"),
        (lambda: permutation_spearman([1, 2, np.nan], [1, 2, 3]), "finite"),
        (lambda: joint_permutation([1, 2, 3], [[1, 2, 3]], statistic="max"), "statistic must be"),
        (lambda: permutation_spearman([1, 2, 3], [1, 2, 3], resamples=0), "resamples"),
        (lambda: holm([]), "p-values"),
        (lambda: holm([1.5]), "p-values"),
    ],
)
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_sign_flip_by_hand():
    from mteb_lrd.metrics.permutation import sign_flip

    three = sign_flip([0.02, 0.01, 0.03])  # three models, all on one side: 2 of 8 assignments
    assert (three.p, three.orders, three.exact) == (0.25, 8, True) and three.statistic == pytest.approx(0.02)
    mixed = sign_flip([1.0, -1.0, 2.0, 0.5])
    flips = [abs(sum(s * v for s, v in zip(signs, [1.0, -1.0, 2.0, 0.5], strict=True)))
             for signs in itertools.product([1, -1], repeat=4)]  # fmt: skip
    assert mixed.p == pytest.approx(sum(f >= 2.5 - 1e-12 for f in flips) / 16)
    with pytest.raises(ValueError, match="differences"):
        sign_flip([])


def test_joint_permutation_with_a_score_per_model_and_task():
    rng = np.random.RandomState(8)
    x = rng.rand(2, 5).round(2)  # each task its own LRD score per model
    y = rng.rand(2, 5)
    test = joint_permutation(x, y)
    orders = list(itertools.permutations(range(5)))

    def stat(order):
        return np.median([stats.spearmanr(x[t][list(order)], y[t]).statistic for t in range(2)])

    observed = stat(range(5))
    p = sum(abs(stat(o)) >= abs(observed) - 1e-12 for o in orders) / len(orders)
    assert test.statistic == pytest.approx(observed) and test.p == pytest.approx(p)


def test_spearman_difference_by_hand():
    from mteb_lrd.metrics.permutation import spearman_difference

    y = [1.0, 2.0, 3.0, 4.0]
    test = spearman_difference(y, y[::-1], y)  # ρ = +1 against ρ = −1
    assert test.statistic == pytest.approx(2.0)
    # per-model terms 2·r², r = (−1.5, −.5, .5, 1.5)/√5: (.9, .1, .1, .9); only "all +" and "all −" reach |mean| .5
    assert test.p == pytest.approx(2 / 16) and test.exact and test.orders == 16
    same = spearman_difference(
        [3.0, 1.0, 2.0, 5.0, 4.0], [3.0, 1.0, 2.0, 5.0, 4.0], [1.0, 2.0, 3.0, 4.0, 5.0]
    )
    assert same.statistic == 0.0 and same.p == 1.0


def test_spearman_difference_equals_a_loop_over_rank_swaps_with_the_model_as_the_unit():
    import itertools

    from scipy import stats

    from mteb_lrd.metrics.permutation import spearman_difference

    rng = np.random.default_rng(4)
    a, b, y = rng.normal(size=(3, 2, 7))  # 2 tasks × 7 models each
    a[1, :3] = a[1, 3]  # ties within a task
    test = spearman_difference(a, b, y)

    def difference(first, second):
        return np.mean([stats.spearmanr(first[t], y[t]).statistic - stats.spearmanr(second[t], y[t]).statistic
                        for t in range(2)])  # fmt: skip

    observed = difference(a, b)
    assert test.statistic == pytest.approx(observed)
    ra, rb = stats.rankdata(a, axis=1), stats.rankdata(b, axis=1)
    hits = 0
    for swaps in itertools.product((False, True), repeat=7):  # a model's two ranks swapped in both tasks
        swapped = np.array(swaps)
        hits += abs(difference(np.where(swapped, rb, ra), np.where(swapped, ra, rb))) >= abs(observed) - 1e-12
    assert test.exact and test.orders == 2**7
    assert test.p == pytest.approx(hits / 2**7)


def test_spearman_difference_monte_carlo_approaches_the_complete_enumeration(monkeypatch):
    from mteb_lrd.metrics import permutation

    rng = np.random.default_rng(7)
    y = rng.normal(size=(3, 11))
    a, b = y + rng.normal(scale=0.5, size=y.shape), y + rng.normal(scale=1.5, size=y.shape)
    complete = permutation.spearman_difference(a, b, y)
    monkeypatch.setattr(permutation, "SIGN_FLIP_EXACT_LIMIT", 10)
    sampled = permutation.spearman_difference(a, b, y, resamples=20_000, seed=1)
    assert complete.exact and not sampled.exact and sampled.orders == 20_000
    assert sampled.statistic == complete.statistic
    assert sampled.p == pytest.approx(complete.p, abs=0.01)
    assert 0 < complete.p < 0.5  # the better-predicting score: a decided case, not p = 1


@pytest.mark.parametrize(
    ("a", "b", "y"),
    [([1, 2], [2, 1], [1, 2]), ([1, 2, 3], [1, 2], [1, 2, 3]), ([1, 2, np.nan], [1, 2, 3], [1, 2, 3])],
)
def test_spearman_difference_rejects_bad_input(a, b, y):
    from mteb_lrd.metrics.permutation import spearman_difference

    with pytest.raises(ValueError, match="a, b and y"):
        spearman_difference(a, b, y)


def test_minimum_detectable_rho_by_hand():
    from mteb_lrd.metrics.permutation import minimum_detectable_rho, permutation_spearman

    # n = 5: |rho| = 1 has p = 2/120; the next value, 0.9, has p = 10/120 > 0.05
    assert minimum_detectable_rho(5) == 1.0
    # Holm's 0.05 / 3 for the best of three scores: 2/120 equals it, so 5 models never decide
    assert np.isnan(minimum_detectable_rho(5, 0.05 / 3))
    assert minimum_detectable_rho(6) == pytest.approx(31 / 35)  # 0.886: the threshold known at six models
    m9 = minimum_detectable_rho(9)
    assert m9 == pytest.approx(0.7)
    x = np.arange(9.0)
    # a permutation reaching rho = 0.7 is significant, one just below is not
    y = next(
        np.array(p, dtype=float)
        for p in itertools.permutations(range(9))
        if abs(1 - 6 * sum((np.array(p) - x) ** 2) / 720 - 0.7) < 1e-9
    )
    assert permutation_spearman(x, y).p <= 0.05
    with pytest.raises(ValueError, match="n must be"):
        minimum_detectable_rho(2)


@pytest.mark.parametrize("alpha", [0.05, 0.25, 0.2, 0.01, 0.5])
def test_minimum_sign_flip_units_is_where_sign_flip_first_decides(alpha):
    from mteb_lrd.metrics.permutation import minimum_sign_flip_units, sign_flip

    m = minimum_sign_flip_units(alpha)
    assert sign_flip(np.ones(m)).p < alpha  # all models one way: the smallest p there is
    if m > 1:
        assert sign_flip(np.ones(m - 1)).p >= alpha


def test_minimum_sign_flip_units_by_hand():
    from mteb_lrd.metrics.permutation import minimum_sign_flip_units

    assert minimum_sign_flip_units(0.05) == 6  # 2/32 = 0.0625 at five models, 2/64 at six
    assert minimum_sign_flip_units(0.25) == 4  # 2/8 at three models equals 0.25: not below it
    with pytest.raises(ValueError, match="alpha must be"):
        minimum_sign_flip_units(0.0)
