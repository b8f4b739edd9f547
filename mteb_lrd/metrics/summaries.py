"""Small shared helpers for the metrics' summaries: thirds of a profile, a depth slope, NaN-safe means."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["third", "depth_slope", "safe_mean", "safe_ratio", "finite_or_none"]


def third(length: int) -> int:
    """Width of the early / late thirds of a profile of ``length`` values: ``max(1, length // 3)``."""
    return max(1, length // 3)


def depth_slope(values: np.ndarray) -> float:
    """Least-squares slope of ``values`` against relative depth ``linspace(0, 1, len(values))``; 0 for one value."""
    values = np.asarray(values, dtype=np.float64)
    if values.size < 2:
        return 0.0
    return float(np.polyfit(np.linspace(0.0, 1.0, values.size), values, 1)[0])


def safe_mean(values: np.ndarray) -> float:
    """Mean of ``values``; NaN for an empty array (no warning)."""
    values = np.asarray(values, dtype=np.float64)
    return float(values.mean()) if values.size else math.nan


def safe_ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``; NaN when the denominator is (almost) zero."""
    return numerator / denominator if abs(denominator) > 1e-12 else math.nan


def finite_or_none(value: float) -> float | None:
    """JSON-friendly float: ``None`` for NaN / Inf (``json.dumps`` would write a bare ``NaN``)."""
    value = float(value)
    return value if math.isfinite(value) else None
