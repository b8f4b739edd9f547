"""Small shared helpers for the metrics' summaries: thirds of a profile, a depth slope, NaN-safe means,
and the authors' variants of the Frenet summaries that differ from ours (``reproduce="authors"``)."""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "REPRODUCE_MODES",
    "authors_frenet_summary",
    "depth_slope",
    "safe_mean",
    "safe_ratio",
    "third",
]

REPRODUCE_MODES: tuple[str, ...] = ("ours", "authors")
"""``ours``: the documented definitions (default). ``authors``: the released code's variants."""


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


def authors_frenet_summary(speed: np.ndarray, curvature: np.ndarray, d0l: float) -> dict[str, float]:
    """The Frenet summaries whose definitions in the authors' code differ from ours.

    With ``L`` transitions: early speed = mean of ``s[:L // 3]``, late speed = mean of
    ``s[-L // 3:]`` (Python precedence: ``(-L) // 3``, i.e. the last ``ceil(L / 3)`` transitions;
    ours take ``max(1, L // 3)`` at both ends), both the mean of all transitions when ``L < 3``.
    Where ours give NaN the authors fall back to a number: straightness 1.0 (arc length
    <= 1e-15), speed_cv 0 (mean speed <= 0), early/late ratio 1.0 (late speed <= 0), peak curvature
    depth 0.5 (no curvature). Every other summary is identical and is not returned.
    """
    s = np.asarray(speed, dtype=np.float64)
    k = np.asarray(curvature, dtype=np.float64)
    n = s.size
    total = float(s.sum())
    mean_speed = safe_mean(s)
    early = float(s[: n // 3].mean()) if n >= 3 else mean_speed
    late = float(s[-n // 3 :].mean()) if n >= 3 else mean_speed
    return {
        "straightness": float(d0l) / total if total > 1e-15 else 1.0,
        "speed_cv": float(s.std()) / mean_speed if mean_speed > 0 else 0.0,
        "peak_curvature_depth": float(np.argmax(k) / k.size) if k.size else 0.5,
        "early_speed": early,
        "late_speed": late,
        "early_late_speed_ratio": early / late if late > 0 else 1.0,
    }
