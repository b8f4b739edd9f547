"""Percentile bootstrap intervals of per-layer statistics, resampling items (texts, anchors, pairs).

Every layer is resampled with the same draws (one seeded generator), so the intervals of adjacent
layers are paired, as the profiles they bound. Vectorised: resamples are drawn as index matrices
and evaluated in chunks, without a Python loop over items.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse

__all__ = [
    "BOOTSTRAP_CONFIDENCE",
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "check_settings",
    "Interval",
    "bootstrap_mean",
    "bootstrap_median_spearman",
    "bootstrap_spearman",
]

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0
BOOTSTRAP_CONFIDENCE = 0.95
_CHUNK_ELEMENTS = 4_000_000  # values resampled at once (bounds the working memory to ~32 MB)


@dataclass(frozen=True)
class Interval:
    """Per-layer percentile interval.

    Attributes:
        low: ``(m,)`` lower bounds; ``high``: ``(m,)`` upper bounds.
        resamples: bootstrap resamples; ``seed``: their generator's seed; ``confidence``: level.
        over: what was resampled (``"anchors"``, ``"pairs"``).
    """

    low: np.ndarray
    high: np.ndarray
    resamples: int
    seed: int
    confidence: float
    over: str

    def to_dict(self) -> dict[str, Any]:
        """``{"low": [...], "high": [...], "resamples", "seed", "confidence", "over"}``."""
        return {
            "low": self.low.tolist(),
            "high": self.high.tolist(),
            "resamples": self.resamples,
            "seed": self.seed,
            "confidence": self.confidence,
            "over": self.over,
        }


def check_settings(resamples: object, confidence: object, *, name: str = "resamples") -> None:
    """Validate a bootstrap's number of resamples (named ``name`` in the message) and confidence.

    Raises:
        ValueError: ``resamples`` not a positive integer or ``confidence`` outside (0, 1).
    """
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) or resamples < 1:
        raise ValueError(f"{name} must be a positive integer; got {resamples!r}")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1); got {confidence!r}")


def _check(values: np.ndarray, resamples: int, confidence: float) -> None:
    if values.ndim != 2 or values.shape[0] < 1 or values.shape[1] < 2:
        raise ValueError(
            f"need a (layers, items) array with a layer and at least 2 items; got shape {values.shape}"
        )
    check_settings(resamples, confidence)


def _draws(n: int, resamples: int, seed: int, per_draw: int) -> Any:
    """Index matrices ``(chunk, n)`` of the resamples, in chunks of bounded size."""
    rng = np.random.default_rng(seed)
    chunk = max(1, _CHUNK_ELEMENTS // max(1, n * per_draw))
    for start in range(0, resamples, chunk):
        yield rng.integers(0, n, size=(min(chunk, resamples - start), n))


def _interval(estimates: np.ndarray, resamples: int, seed: int, confidence: float, over: str) -> Interval:
    alpha = (1 - confidence) / 2
    low, high = np.nanquantile(estimates, [alpha, 1 - alpha], axis=0)
    return Interval(low, high, int(resamples), int(seed), float(confidence), over)


def bootstrap_mean(
    values: np.ndarray,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = BOOTSTRAP_CONFIDENCE,
    over: str = "items",
) -> Interval:
    """Interval of each row's mean of ``values`` ``(m, n)``, resampling the ``n`` columns.

    Raises:
        ValueError: fewer than 2 items, a non-2-D array, or bad ``resamples`` / ``confidence``.
    """
    values = np.asarray(values, dtype=np.float64)
    _check(values, resamples, confidence)
    means = [
        values[:, idx].mean(axis=2).T for idx in _draws(values.shape[1], resamples, seed, values.shape[0])
    ]
    return _interval(np.concatenate(means), resamples, seed, confidence, over)


def _counts(idx: np.ndarray) -> np.ndarray:
    """``(b, n)`` multiplicity of each item in each resample of the index matrix ``idx``."""
    b, n = idx.shape
    flat = (np.arange(b)[:, None] * n + idx).ravel()
    return np.bincount(flat, minlength=b * n).reshape(b, n).astype(np.float64)


def _resampled_ranks(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties averaged) each item would have in each resample, from the
    multiplicities alone: items are grouped by value once, so no resample is sorted."""
    unique, inverse = np.unique(values, return_inverse=True)
    if unique.size == values.size:  # no ties: each item is its own group, in sorted order
        order = np.argsort(values, kind="stable")
        groups = counts[:, order]
        inverse = np.empty_like(order)
        inverse[order] = np.arange(order.size)
    else:
        membership = sparse.csr_matrix((np.ones(values.size), (inverse, np.arange(values.size))))
        groups = np.asarray((membership @ counts.T).T)  # (b, g): copies of each distinct value
    below = np.cumsum(groups, axis=1) - groups
    return (below + (groups + 1) / 2)[:, inverse]


def _weighted_correlation(rx: np.ndarray, ry: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Pearson correlation of each resample's ranks, items weighted by their multiplicity."""
    total = counts.sum(axis=-1, keepdims=True)
    dx = rx - (counts * rx).sum(-1, keepdims=True) / total
    dy = ry - (counts * ry).sum(-1, keepdims=True) / total
    with np.errstate(invalid="ignore", divide="ignore"):
        return (counts * dx * dy).sum(-1) / np.sqrt((counts * dx**2).sum(-1) * (counts * dy**2).sum(-1))


def bootstrap_spearman(
    x: np.ndarray,
    y: np.ndarray,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = BOOTSTRAP_CONFIDENCE,
    over: str = "pairs",
) -> Interval:
    """Interval of the Spearman correlation of each row of ``x`` ``(m, n)`` with ``y`` ``(n,)``,
    resampling the ``n`` items (ties get average ranks, as in ``scipy.stats.spearmanr``).

    A resample is held as each item's multiplicity; ranks follow from the multiplicities of the
    values sorted once, so the cost is linear in the items per resample, with no sort.

    Raises:
        ValueError: shapes that do not match, fewer than 2 items, or bad ``resamples`` / ``confidence``.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    _check(x, resamples, confidence)
    if y.shape != (x.shape[1],):
        raise ValueError(f"y must have one value per item ({x.shape[1]}); got shape {y.shape}")
    estimates = []
    for idx in _draws(x.shape[1], resamples, seed, 4):
        counts = _counts(idx)
        ry = _resampled_ranks(y, counts)
        estimates.append(
            np.stack([_weighted_correlation(_resampled_ranks(row, counts), ry, counts) for row in x], 1)
        )
    return _interval(np.concatenate(estimates), resamples, seed, confidence, over)


def bootstrap_median_spearman(
    x: np.ndarray,
    y: np.ndarray,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = BOOTSTRAP_CONFIDENCE,
) -> Interval:
    """Interval of the median over tasks of Spearman ρ(``x[t]``, ``y[t]``), resampling the ``n``
    models (columns) with the same draw for every task: the model as the unit.

    Args:
        x / y: ``(tasks, n)`` a score and the main score per task and model.

    Raises:
        ValueError: shapes that do not match, fewer than 2 models, or bad ``resamples`` / ``confidence``.
    """
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    _check(x, resamples, confidence)
    if y.shape != x.shape:
        raise ValueError(f"x and y must have the same (tasks, n) shape; got {x.shape} and {y.shape}")
    estimates = []
    for idx in _draws(x.shape[1], resamples, seed, 2 * x.shape[0]):
        counts = _counts(idx)
        rho = np.stack([_weighted_correlation(_resampled_ranks(xt, counts), _resampled_ranks(yt, counts), counts)
                        for xt, yt in zip(x, y, strict=True)], axis=1)  # fmt: skip
        with warnings.catch_warnings():  # a resample of identical models has no ρ in any task: NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            estimates.append(np.nanmedian(rho, axis=1)[:, None])
    return _interval(np.concatenate(estimates), resamples, seed, confidence, "models")
