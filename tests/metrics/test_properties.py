"""Hypothesis properties over shapes and values: only the documented errors, results finite and in range."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from mteb_lrd import frenet, gfmi, lrd, nrs
from mteb_lrd.metrics.informative import touches

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Element strategies per dtype: finite, no subnormals, inside each type's range (NaN / Inf rows are
# injected separately so that most rows stay valid).
ELEMENTS = {
    np.float16: st.floats(-6e4, 6e4, width=16, allow_subnormal=False),
    np.float32: st.floats(-1e6, 1e6, width=32, allow_subnormal=False),
    np.float64: st.floats(-1e6, 1e6, allow_subnormal=False),
    np.int16: st.integers(-5, 5),
    np.bool_: st.booleans(),
}


@st.composite
def raw_states(draw):
    """``(states, n_bad)``: any small shape and dtype, some rows poisoned with NaN, ±Inf or zeros."""
    dtype = draw(st.sampled_from(list(ELEMENTS)))
    shape = (draw(st.integers(1, 4)), draw(st.integers(0, 14)), draw(st.integers(1, 5)))
    x = draw(arrays(dtype, shape, elements=ELEMENTS[dtype]))
    if np.issubdtype(dtype, np.floating) and shape[1] > 0:
        poisoned = draw(st.lists(st.integers(0, shape[1] - 1), max_size=3, unique=True))
        for row in poisoned:
            layer = draw(st.integers(0, shape[0] - 1))
            x[layer, row, draw(st.integers(0, shape[2] - 1))] = draw(
                st.sampled_from([np.nan, np.inf, -np.inf])
            )
    with np.errstate(invalid="ignore"):
        valid = (np.isfinite(x.astype(np.float64)).all(axis=2) & (x != 0).any(axis=2)).all(axis=0)
    return x, int(shape[1] - valid.sum())


def _check_rows(result, x, n_bad):
    assert result.n_dropped == n_bad
    assert result.n_used + result.n_dropped == x.shape[1]


def _expect(fn, x, n_bad, min_rows, **kwargs):
    """Call ``fn``; a ValueError exactly when there are too few layers or valid rows."""
    should_fail = x.shape[0] < 2 or x.shape[1] - n_bad < min_rows
    if should_fail:
        with pytest.raises(ValueError):
            fn(x, **kwargs)
        return None
    return fn(x, **kwargs)


def _finite_or_nan(summary: dict) -> None:
    for key, value in summary.items():
        assert not math.isinf(value), key


def _nan_exactly_where_undefined(values: np.ndarray, undefined: dict, span: int) -> None:
    """Entries reading states ``i .. i + span`` are NaN exactly when one of those states is undefined."""
    assert all(isinstance(why, str) and why for why in undefined.values())
    assert np.array_equal(np.isnan(values), touches(undefined, np.arange(values.size), span))


@SETTINGS
@given(raw_states(), st.one_of(st.none(), st.integers(1, 6)))
def test_frenet_properties(data, rank):
    x, n_bad = data
    result = _expect(frenet, x, n_bad, 2, rank=rank)
    if result is None:
        return
    _check_rows(result, x, n_bad)
    assert 1 <= result.rank <= x.shape[2]
    bound = math.pi / 2 * math.sqrt(result.rank) + 1e-6
    assert result.speed.shape == (x.shape[0] - 1,) and result.curvature.shape == (x.shape[0] - 2,)
    raw = result.unmasked()  # as computed: finite and in range
    assert np.all(np.isfinite(raw.speed)) and np.all((raw.speed >= 0) & (raw.speed <= bound))
    assert 0 <= raw.d0L <= bound
    assert np.all(np.isfinite(raw.curvature)) and np.all(raw.curvature >= 0)
    _nan_exactly_where_undefined(result.speed, result.undefined, 1)
    _nan_exactly_where_undefined(result.curvature, result.undefined, 2)
    assert math.isnan(result.d0L) == (result.first_state is None)
    _finite_or_nan(result.summary())


@SETTINGS
@given(raw_states(), st.integers(1, 4), st.integers(1, 20))
def test_nrs_properties(data, k, n_anchors):
    x, n_bad = data
    result = _expect(nrs, x, n_bad, k + 1, k=k, n_anchors=n_anchors, backend="numpy")
    if result is None:
        return
    _check_rows(result, x, n_bad)
    assert result.n_anchors == min(n_anchors, result.n_used)
    raw = result.unmasked()
    assert np.all((raw.jaccard >= 0) & (raw.jaccard <= 1))
    assert 0 <= raw.first_last <= 1
    _nan_exactly_where_undefined(result.jaccard, result.undefined, 1)
    assert math.isnan(result.first_last) == (result.first_state is None)
    _finite_or_nan(result.summary())


@SETTINGS
@given(raw_states(), st.integers(1, 4), st.sampled_from(["numpy", "faiss-cpu"]))
def test_gfmi_properties(data, k, backend):
    x, n_bad = data
    result = _expect(gfmi, x, n_bad, k + 1, k=k, backend=backend)
    if result is None:
        return
    _check_rows(result, x, n_bad)
    raw = result.unmasked()
    assert np.all(np.isfinite(raw.mi)) and np.all(raw.mi >= 0)
    # I(a; b) <= H(b): no layer agrees with the final partition more than the final layer itself.
    assert np.all(raw.mi <= raw.mi[-1] + 1e-9)
    assert np.all(np.isfinite(raw.auc)) and np.all(raw.auc >= 0)
    assert np.all(np.isin(raw.peak_percentile, raw.percentiles))
    last = x.shape[0] - 1
    expected = np.array([s in result.undefined or last in result.undefined for s in range(last + 1)])
    assert np.array_equal(np.isnan(result.auc), expected)
    _finite_or_nan(result.summary())


@SETTINGS
@given(raw_states(), st.integers(1, 3), st.integers(1, 3))
def test_lrd_properties(data, nrs_k, gfmi_k):
    x, n_bad = data
    result = _expect(lrd, x, n_bad, max(nrs_k, gfmi_k) + 1, nrs_k=nrs_k, gfmi_k=gfmi_k, backend="numpy")
    if result is None:
        return
    assert result.n_dropped == n_bad and result.n_input == x.shape[1]
    raw = result.unmasked()
    assert np.all((raw.nrs.jaccard >= 0) & (raw.nrs.jaccard <= 1))
    assert np.all(raw.gfmi.mi >= 0) and np.all(raw.frenet.speed >= 0)
    record = result.to_dict()
    json.dumps(record, allow_nan=False)
    assert record.get("undefined", {}) == result.undefined


@st.composite
def poisoned_continuous(draw):
    """Continuous random states (no kNN ties) with some rows poisoned, and the indices of those rows."""
    n_layers, n, d = draw(st.integers(2, 4)), draw(st.integers(12, 30)), draw(st.integers(2, 6))
    x = (
        np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        .standard_normal((n_layers, n, d))
        .astype(np.float32)
    )
    bad = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=4, unique=True))
    for row in bad:
        layer = draw(st.integers(0, n_layers - 1))
        kind = draw(st.sampled_from(["nan", "inf", "-inf", "zero"]))
        if kind == "zero":
            x[layer, row] = 0.0
        else:
            x[layer, row, draw(st.integers(0, d - 1))] = float(kind)
    return x, sorted(bad)


@settings(max_examples=25, deadline=None)
@given(poisoned_continuous())
def test_bad_rows_give_the_clean_rows_results(data):
    x, bad = data
    clean = np.delete(x, bad, axis=1)
    kwargs = {"nrs_k": 4, "gfmi_k": 5, "n_anchors": 7, "backend": "numpy"}
    dirty, ref = lrd(x, **kwargs), lrd(clean, **kwargs)
    assert dirty.n_dropped == len(bad) and ref.n_dropped == 0
    np.testing.assert_array_equal(dirty.frenet.speed, ref.frenet.speed)
    np.testing.assert_array_equal(dirty.frenet.curvature, ref.frenet.curvature)
    np.testing.assert_array_equal(dirty.nrs.jaccard, ref.nrs.jaccard)
    np.testing.assert_array_equal(dirty.gfmi.mi, ref.gfmi.mi)
