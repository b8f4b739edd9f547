"""Degenerate inputs give a warning that says why the numbers mean little."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from mteb_lrd.parameters import Caps, MetricParams
from mteb_lrd.pipeline import degenerate_input_warnings, layer_dynamics

PARAMS = MetricParams(nrs_k=3, gfmi_k=3, n_anchors=20)
CAPS = Caps(None, None, None)


def _states(n=40, d=8, layers=4, seed=0):
    return np.random.default_rng(seed).standard_normal((layers, n, d)).astype(np.float32)


def test_healthy_input_has_no_warning():
    assert degenerate_input_warnings(_states()) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layer_dynamics(_states(), CAPS, params=PARAMS)


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        (_states(d=1), "one dimension"),
        (np.repeat(_states(n=3), [10, 10, 20], axis=1), "only 3 distinct vectors"),
        (
            np.concatenate([_states(n=10), np.repeat(_states(n=2, seed=1), 15, axis=1)], axis=1),
            "duplicate others",
        ),
        (np.repeat(_states(layers=1), 4, axis=0), "same vectors"),
    ],
    ids=["d=1", "three distinct", "mostly duplicates", "identical layers"],
)
def test_degenerate_inputs_warn(states, expected):
    assert any(expected in m for m in degenerate_input_warnings(states))
    with pytest.warns(UserWarning, match=f"degenerate input: .*{expected}"):
        layer_dynamics(states, CAPS, params=PARAMS)
