"""Fixtures for the LRD metric tests: small continuous random per-layer states (no kNN ties)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.metrics.reference import random_states


@pytest.fixture(scope="session")
def states() -> np.ndarray:
    """``(5, 150, 16)`` fp32: L = 4 transitions, 150 texts, 16 dims."""
    return random_states(n_layers=5, n=150, d=16, seed=0)


@pytest.fixture(scope="session")
def deep_states() -> np.ndarray:
    """``(8, 90, 12)`` fp32: L = 7, so the early / mid / late thirds differ from the whole."""
    return random_states(n_layers=8, n=90, d=12, seed=1)
