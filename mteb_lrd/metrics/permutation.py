"""Permutation tests with the model as the unit: exact over every order of the models up to
:data:`EXACT_LIMIT` models, Monte Carlo with a stated number of draws above, and Holm's adjustment
for a family of such tests.

A rank correlation across n models is tested by relabelling the models: every one of the n! orders
of one variable against the other is equally likely under "no association". With several tasks,
:func:`joint_permutation` relabels the models *jointly* across tasks (one order for all tasks), so
the tasks' shared models are never treated as independent samples.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = [
    "EXACT_LIMIT",
    "MONTE_CARLO_RESAMPLES",
    "PermutationTest",
    "below",
    "holm",
    "joint_permutation",
    "minimum_detectable_rho",
    "minimum_sign_flip_units",
    "permutation_spearman",
    "sign_flip",
    "spearman_difference",
    "unit_centred_ranks",
]

SIGN_FLIP_EXACT_LIMIT = 20
"""Up to this many units every sign assignment is enumerated (2^20 = 1,048,576)."""

EXACT_LIMIT = 10
"""Up to this many models every order is enumerated (10! = 3,628,800)."""

MONTE_CARLO_RESAMPLES = 100_000
"""Random orders drawn above :data:`EXACT_LIMIT`; the p-value is ``(hits + 1) / (draws + 1)``."""

_CHUNK = 200_000  # orders evaluated at once
_SWAP_CHUNK = 4_096  # swap patterns ranked at once (patterns × tasks × models values)


@dataclass(frozen=True)
class PermutationTest:
    """A statistic, its two-sided permutation p-value, the number of models and how p was found.

    Attributes:
        statistic: Spearman ρ (one task) or the median / mean ρ over tasks.
        p: two-sided: the share of orders whose ``|statistic|`` is at least the observed one.
        n: models. exact: every order enumerated. orders: orders evaluated.
    """

    statistic: float
    p: float
    n: int
    exact: bool
    orders: int


def unit_centred_ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks along the last axis, centred and scaled to unit norm (zeros when constant)."""
    ranks = stats.rankdata(values, axis=-1)
    ranks -= ranks.mean(axis=-1, keepdims=True)
    norm = np.linalg.norm(ranks, axis=-1, keepdims=True)
    return np.divide(ranks, norm, out=np.zeros_like(ranks), where=norm > 0)


def _orders(n: int, resamples: int, seed: int) -> tuple[Iterator[np.ndarray], bool, int]:
    """Chunks of orders (index arrays): every order when ``n <= EXACT_LIMIT``, else random ones."""
    if n <= EXACT_LIMIT:
        every = itertools.permutations(range(n))

        def exact() -> Iterator[np.ndarray]:
            while chunk := list(itertools.islice(every, _CHUNK)):
                yield np.array(chunk, dtype=np.intp)

        return exact(), True, math.factorial(n)
    rng = np.random.default_rng(seed)

    def sampled() -> Iterator[np.ndarray]:
        for start in range(0, resamples, _CHUNK):
            yield rng.permuted(np.tile(np.arange(n), (min(_CHUNK, resamples - start), 1)), axis=1)

    return sampled(), False, resamples


def _check_resamples(resamples: object) -> None:
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a positive integer; got {resamples!r}")


def _statistic(rho: np.ndarray, how: str) -> np.ndarray:
    return np.median(rho, axis=-1) if how == "median" else np.mean(rho, axis=-1)


def joint_permutation(
    x: object, y: object, *, statistic: str = "median", resamples: int = MONTE_CARLO_RESAMPLES, seed: int = 0
) -> PermutationTest:
    """Test the median (or mean) over tasks of Spearman ρ(``x``, each row of ``y``), relabelling the
    models jointly across tasks.

    Args:
        x: ``(n,)`` one score per model, or ``(tasks, n)`` a score per model and task.
            y: ``(tasks, n)`` each task's main score per model.
        statistic: ``"median"`` or ``"mean"`` over tasks.
        resamples / seed: the Monte Carlo draws above :data:`EXACT_LIMIT` models.

    Raises:
        ValueError: fewer than 3 models, shapes that do not match, non-finite values, a bad statistic.
    """
    b = np.atleast_2d(np.asarray(y, dtype=np.float64))
    a = np.asarray(x, dtype=np.float64)
    if b.ndim != 2 or a.shape not in ((b.shape[1],), b.shape):
        raise ValueError(f"x must be (n,) or (tasks, n) and y (tasks, n); got {a.shape} and {b.shape}")
    a = np.broadcast_to(a, b.shape)
    if b.shape[1] < 3:
        raise ValueError(f"a permutation test needs at least 3 models; got {b.shape[1]}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("x and y must be finite")
    if statistic not in ("median", "mean"):
        raise ValueError(f"statistic must be 'median' or 'mean'; got {statistic!r}")
    _check_resamples(resamples)
    rx, ry = unit_centred_ranks(a), unit_centred_ranks(b)
    n = b.shape[1]
    observed = float(_statistic(np.sum(rx * ry, axis=-1), statistic))
    chunks, exact, count = _orders(n, resamples, seed)
    hits = 0
    for order in chunks:  # rho[p, t] = Σ_i rx[t, order[p, i]] · ry[t, i]
        rho = np.einsum("tpi,ti->pt", rx[:, order], ry)
        hits += int(np.sum(np.abs(_statistic(rho, statistic)) >= abs(observed) - 1e-12))
    p = hits / count if exact else (hits + 1) / (count + 1)
    return PermutationTest(observed, min(1.0, p), int(n), exact, count)


def permutation_spearman(
    x: object, y: object, *, resamples: int = MONTE_CARLO_RESAMPLES, seed: int = 0
) -> PermutationTest:
    """Spearman ρ across models with its permutation p-value (exact up to :data:`EXACT_LIMIT` models).

    Raises:
        ValueError: as :func:`joint_permutation`.
    """
    return joint_permutation(x, np.asarray(y, dtype=np.float64)[None, :], resamples=resamples, seed=seed)


def below(p: float, alpha: float) -> bool:
    """Whether ``p`` is below the level ``alpha``: significant. A p equal to ``alpha`` up to rounding
    (5 models, |ρ| = 1: 2/120, against Holm's 0.05/3) is not below it."""
    return bool(p < alpha * (1 - 1e-9))


def holm(pvalues: object) -> np.ndarray:
    """Holm's step-down adjustment of a family of p-values (same order as given, capped at 1).

    Raises:
        ValueError: for an empty family or a value outside [0, 1].
    """
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 1 or p.size == 0 or np.any(~np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError(f"p-values must be a non-empty 1-d sequence in [0, 1]; got {pvalues!r}")
    order = np.argsort(p, kind="stable")
    scaled = p[order] * (p.size - np.arange(p.size))
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return adjusted


def sign_flip(
    differences: object, *, resamples: int = MONTE_CARLO_RESAMPLES, seed: int = 0
) -> PermutationTest:
    """Test that paired differences (one per unit, e.g. one per model after averaging its tasks)
    centre on zero: the mean difference and the share of sign assignments whose ``|mean|`` is at
    least the observed one (every one of the 2^n up to :data:`SIGN_FLIP_EXACT_LIMIT` units, else
    ``resamples`` random ones). With 3 models all favouring one side, p = 2 / 8 = 0.25.

    Raises:
        ValueError: for no difference, non-finite values or bad ``resamples``.
    """
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim != 1 or d.size == 0 or not np.all(np.isfinite(d)):
        raise ValueError(
            f"differences must be a non-empty 1-d sequence of finite numbers; got {differences!r}"
        )
    _check_resamples(resamples)
    observed = float(d.mean())
    exact = d.size <= SIGN_FLIP_EXACT_LIMIT
    if exact:
        count = 2**d.size
        codes = np.arange(count, dtype=np.int64)[:, None]
        signs = 1 - 2 * ((codes >> np.arange(d.size)) & 1)  # every assignment, as rows of ±1
    else:
        count = resamples
        signs = np.random.default_rng(seed).choice([-1, 1], size=(resamples, d.size))
    hits = int(np.sum(np.abs(signs @ d / d.size) >= abs(observed) - 1e-12))
    p = hits / count if exact else (hits + 1) / (count + 1)
    return PermutationTest(observed, min(1.0, p), int(d.size), exact, count)


def spearman_difference(
    a: object, b: object, y: object, *, resamples: int = MONTE_CARLO_RESAMPLES, seed: int = 0
) -> PermutationTest:
    """Is score ``a`` a better predictor of ``y`` than score ``b`` across the same models?

    The statistic is ρ(a, y) − ρ(b, y) (Spearman; averaged over tasks when the inputs are
    ``(tasks, models)`` arrays). The test swaps a model's ranks under the two scores (in every task
    at once: the model is the unit) and recomputes both correlations from the swapped ranks
    (ranked again, ties averaged): every one of the 2^n swap patterns up to
    :data:`SIGN_FLIP_EXACT_LIMIT` models, else ``resamples`` random ones. The scores are compared
    through their ranks because their values live on different scales (radians, Jaccard, nats).

    The p-value is exact under "each model's two ranks are exchangeable", which "the two scores
    predict equally well" implies only approximately (a swap moves the other models' ranks too);
    ``benchmarks/difference_test_calibration.py`` measures its size and power. Two dependent
    correlations must be compared this way, not by their separate p-values.

    Raises:
        ValueError: shapes that differ, fewer than 3 models, non-finite values or bad ``resamples``.
    """
    arrays = [np.atleast_2d(np.asarray(v, dtype=np.float64)) for v in (a, b, y)]
    if len({x.shape for x in arrays}) != 1 or arrays[0].ndim != 2 or arrays[0].shape[1] < 3:
        raise ValueError(
            "a, b and y must share a (models,) or (tasks, models) shape with >= 3 models; "
            f"got {[x.shape for x in arrays]}"
        )
    if not all(np.all(np.isfinite(x)) for x in arrays):
        raise ValueError("a, b and y must be finite (a model without a score cannot be compared)")
    _check_resamples(resamples)
    ranks_a, ranks_b = (stats.rankdata(x, axis=-1) for x in arrays[:2])  # 1 .. n: one scale for both
    ry = unit_centred_ranks(arrays[2])
    n = ry.shape[1]
    observed = float(
        ((unit_centred_ranks(arrays[0]) - unit_centred_ranks(arrays[1])) * ry).sum(axis=-1).mean()
    )
    exact = n <= SIGN_FLIP_EXACT_LIMIT
    count = 2**n if exact else resamples
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, count, _SWAP_CHUNK):
        size = min(_SWAP_CHUNK, count - start)
        if exact:
            codes = np.arange(start, start + size, dtype=np.int64)[:, None]
            swapped = ((codes >> np.arange(n)) & 1).astype(bool)  # (patterns, n)
        else:
            swapped = rng.random((size, n)) < 0.5
        mask = swapped[:, None, :]  # the same models swapped in every task
        a_new = unit_centred_ranks(np.where(mask, ranks_b, ranks_a))
        b_new = unit_centred_ranks(np.where(mask, ranks_a, ranks_b))
        difference = ((a_new - b_new) * ry).sum(axis=-1).mean(axis=-1)
        hits += int(np.sum(np.abs(difference) >= abs(observed) - 1e-12))
    p = hits / count if exact else (hits + 1) / (count + 1)
    return PermutationTest(observed, min(1.0, p), int(n), exact, count)


def minimum_detectable_rho(n: int, alpha: float = 0.05) -> float:
    """The smallest ``|ρ|`` that an exact two-sided permutation test over ``n`` models can call
    significant at ``alpha`` (p :func:`below` it; every one of the n! orders, no ties): below it no
    data can decide. NaN when no order reaches it (5 models at 0.05 / 3).

    Raises:
        ValueError: ``n`` outside ``3 .. EXACT_LIMIT`` or ``alpha`` outside (0, 1).
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 3 <= n <= EXACT_LIMIT:
        raise ValueError(f"n must be an integer in 3..{EXACT_LIMIT}; got {n!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1); got {alpha!r}")
    orders = np.array(list(itertools.permutations(range(n))), dtype=np.int64)
    rho = 1 - 6 * ((orders - np.arange(n)) ** 2).sum(axis=1) / (n * (n * n - 1))
    magnitudes = np.abs(rho)
    candidates = [m for m in np.unique(magnitudes) if below(float(np.mean(magnitudes >= m - 1e-12)), alpha)]
    return float(min(candidates)) if candidates else float("nan")


def minimum_sign_flip_units(alpha: float = 0.05) -> int:
    """The fewest units (models) at which the exact two-sided :func:`sign_flip` can reach a p
    :func:`below` ``alpha``: its smallest p over ``m`` units, all differences of one sign, is
    ``2 / 2^m``. With fewer units no data can decide (at 0.05: 6 models, smallest p 2 / 64; at 0.25:
    4 models, as 2 / 8 is not below 0.25).

    Raises:
        ValueError: ``alpha`` outside (0, 1).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1); got {alpha!r}")
    return max(1, math.floor(1 - math.log2(alpha * (1 - 1e-9))) + 1)
