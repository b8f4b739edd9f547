"""Small statistics for the studies: rank correlation, partial correlation, bootstrap, Wilcoxon.

Pure numpy / scipy. Every function validates its input and returns plain floats.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from mteb_lrd.metrics.bootstrap import check_settings
from mteb_lrd.metrics.permutation import permutation_spearman, unit_centred_ranks

__all__ = [
    "PAIRED_RESAMPLES",
    "PAIRED_SEED",
    "Correlation",
    "PairedDifference",
    "paired_spearman_difference",
    "partial_pearson",
    "partial_spearman",
    "spearman",
    "wilcoxon_paired",
]


@dataclass(frozen=True)
class Correlation:
    """A correlation coefficient with its two-sided p-value and sample size (NaN when undefined)."""

    rho: float
    p: float
    n: int


@dataclass(frozen=True)
class PairedDifference:
    """``ρ(a, gold) − ρ(b, gold)`` on the same items, with a paired bootstrap interval and p-value."""

    delta: float
    ci_low: float
    ci_high: float
    p: float
    n: int
    n_resamples: int

    def to_dict(self) -> dict[str, float | int]:
        """The fields as a JSON-ready dict."""
        return dict(self.__dict__)


def _vector(x: object, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-d sequence, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or Inf")
    return a


def spearman(x: object, y: object) -> Correlation:
    """Spearman's ρ and its two-sided permutation p-value, the models as the unit (exact over every
    order up to :data:`~mteb_lrd.metrics.permutation.EXACT_LIMIT` items, Monte Carlo above: see
    :func:`~mteb_lrd.metrics.permutation.permutation_spearman`); NaN when n < 3 or a vector is
    constant. scipy's t-approximation misstates p at a handful of models (ρ = 0.829 at n = 6: 0.04
    against the exact 0.058)."""
    a, b = _vector(x, "x"), _vector(y, "y")
    if a.size != b.size:
        raise ValueError(f"x and y must have the same length, got {a.size} and {b.size}")
    if a.size < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return Correlation(float("nan"), float("nan"), int(a.size))
    test = permutation_spearman(a, b)
    return Correlation(float(test.statistic), float(test.p), int(a.size))


def _partial_inputs(x: object, y: object, covariates: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validated ``x``, ``y`` (length n) and covariates as an ``(n, k)`` array."""
    a, b = _vector(x, "x"), _vector(y, "y")
    z = np.asarray(covariates, dtype=np.float64)
    z = z[:, None] if z.ndim == 1 else z
    if z.ndim != 2 or z.shape[0] != a.size or b.size != a.size:
        raise ValueError(f"x, y and covariates must have n = {a.size} rows, got {b.size} and {z.shape}")
    if not np.all(np.isfinite(z)):
        raise ValueError("covariates contain NaN or Inf")
    return a, b, z


def _residuals(values: np.ndarray, covariates: np.ndarray) -> tuple[np.ndarray, int] | None:
    """Residuals of the columns of ``values`` regressed (least squares, with intercept) on the
    columns of ``covariates``, with their degrees of freedom ``n − rank(design)``.

    None when n < 3, when fewer than two degrees of freedom remain (two residual vectors on one
    line correlate ±1 whatever the data) or when a residual vector is constant.
    """
    n = values.shape[0]
    if n < 3:
        return None
    design = np.column_stack([np.ones(n), covariates])
    free = n - int(np.linalg.matrix_rank(design))
    if free < 2:
        return None
    coef, *_ = np.linalg.lstsq(design, values, rcond=None)
    residual = values - design @ coef
    if np.any(residual.std(axis=0) < 1e-12):
        return None
    return residual, free


def partial_spearman(x: object, y: object, covariates: object) -> Correlation:
    """Spearman partial correlation of x and y controlling for covariates (rank, then residualise).

    The ranks of x and y are regressed (least squares, with intercept) on the ranks of each covariate
    column; ρ is the Pearson correlation of the residuals. The p-value uses a t distribution with
    ``n - 1 - rank(design)`` degrees of freedom (``n - 2 - k`` for k independent covariates; a
    covariate that repeats others costs none); NaN when that is < 1 or a residual vector is constant.

    Args:
        x, y: length-n vectors.
        covariates: an (n,) or (n, k) array; categorical covariates must be one-hot (drop one level).
    """
    a, b, z = _partial_inputs(x, y, covariates)
    n = a.size
    ranks = np.column_stack([stats.rankdata(a), stats.rankdata(b)])
    found = _residuals(ranks, np.apply_along_axis(stats.rankdata, 0, z))
    if found is None:
        return Correlation(float("nan"), float("nan"), n)
    residual, free = found
    dof = free - 1
    rho = float(np.clip(np.corrcoef(residual.T)[0, 1], -1.0, 1.0))
    if abs(rho) == 1.0:
        return Correlation(rho, 0.0, n)
    t = rho * np.sqrt(dof / (1.0 - rho**2))
    return Correlation(rho, float(2 * stats.t.sf(abs(t), dof)), n)


def partial_pearson(x: object, y: object, covariates: object) -> Correlation:
    """The authors' partial correlation: Pearson's r of the residuals of x and y regressed (least
    squares, with intercept) on the covariates' raw values, with scipy's ``pearsonr`` p-value on
    those residuals (``n - 2`` degrees of freedom, as their code computes it; the exact test would
    use ``n - 2 - k``). NaN when n < 3, when the residuals have fewer than two degrees of freedom
    left (``n - rank(design) < 2``: two residual vectors on one line correlate ±1 whatever the
    data, e.g. five families among six models) or a residual vector is constant.

    Args:
        x, y: length-n vectors.
        covariates: an (n,) or (n, k) array (the authors: log(hidden dim)).
    """
    a, b, z = _partial_inputs(x, y, covariates)
    found = _residuals(np.column_stack([a, b]), z)
    if found is None:
        return Correlation(float("nan"), float("nan"), a.size)
    residual, _ = found
    result = stats.pearsonr(residual[:, 0], residual[:, 1])
    return Correlation(float(result.statistic), float(result.pvalue), a.size)


def wilcoxon_paired(x: object, y: object) -> float:
    """Two-sided Wilcoxon signed-rank p-value of x − y (scipy); NaN with < 2 non-zero differences."""
    a, b = _vector(x, "x"), _vector(y, "y")
    if a.size != b.size:
        raise ValueError(f"x and y must be paired (same length), got {a.size} and {b.size}")
    if np.count_nonzero(a - b) < 2:
        return float("nan")
    return float(stats.wilcoxon(a, b).pvalue)


def _row_spearman(rx: np.ndarray, ry: np.ndarray) -> np.ndarray:
    """Spearman's ρ of every row pair, from :func:`~mteb_lrd.metrics.permutation.unit_centred_ranks`
    of both (Pearson of the ranks; NaN for a constant row)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rx * ry).sum(axis=1) / np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))


PAIRED_RESAMPLES = 2000
"""Bootstrap resamples of :func:`paired_spearman_difference` (a p-value's resolution is 1 / this)."""

PAIRED_SEED = 0
"""Seed of the resampling in :func:`paired_spearman_difference`."""


def paired_spearman_difference(
    a: object,
    b: object,
    gold: object,
    *,
    n_resamples: int = PAIRED_RESAMPLES,
    confidence: float = 0.95,
    seed: int = PAIRED_SEED,
    chunk: int = 200,
) -> PairedDifference:
    """How much better the predictions ``a`` rank ``gold`` than the predictions ``b`` do.

    Items (e.g. sentence pairs) are resampled with replacement, the same items for both, so the
    interval accounts for the two predictions being correlated. ``p`` is the two-sided bootstrap
    p-value: twice the share of resamples on the far side of zero (at least ``1 / n_resamples``).

    Raises:
        ValueError: inputs of different lengths, fewer than 3 items, NaN/Inf, bad ``confidence`` or
            ``n_resamples``.
    """
    x, y, g = _vector(a, "a"), _vector(b, "b"), _vector(gold, "gold")
    if not x.size == y.size == g.size:
        raise ValueError(f"a, b and gold must have the same length, got {x.size}, {y.size}, {g.size}")
    if x.size < 3:
        raise ValueError(f"need at least 3 items, got {x.size}")
    check_settings(n_resamples, confidence, name="n_resamples")
    delta = float(stats.spearmanr(x, g).statistic - stats.spearmanr(y, g).statistic)
    rng = np.random.default_rng(seed)
    deltas = []
    for start in range(0, n_resamples, chunk):  # chunks bound the (resamples x items) rank arrays
        idx = rng.integers(0, x.size, size=(min(chunk, n_resamples - start), x.size))
        rg = unit_centred_ranks(g[idx])  # the gold ranks serve both predictions
        deltas.append(
            _row_spearman(unit_centred_ranks(x[idx]), rg) - _row_spearman(unit_centred_ranks(y[idx]), rg)
        )
    d = np.concatenate(deltas)
    d = d[np.isfinite(d)]  # a resample with constant values has no correlation
    if d.size == 0:
        return PairedDifference(delta, float("nan"), float("nan"), float("nan"), int(x.size), 0)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(d, [alpha, 1 - alpha])
    far = min(np.mean(d <= 0), np.mean(d >= 0))
    p = float(min(1.0, max(2 * far, 1 / d.size)))
    return PairedDifference(delta, float(low), float(high), p, int(x.size), int(d.size))
