"""A state that carries no information about the texts gives no number: every score reading it is
NaN with its reason, and the model-level summaries start at the first informative state."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mteb_lrd import frenet, gfmi, lrd, nrs
from mteb_lrd.metrics.frenet import frenet_by_layer
from mteb_lrd.metrics.gfmi import gfmi_by_layer
from mteb_lrd.metrics.informative import ONE_VECTOR, SPREAD_TOL, first_informative, spread_rank, touches
from mteb_lrd.metrics.nrs import nrs_by_layer
from mteb_lrd.pipeline import lrd_summary

KW = {"nrs_k": 5, "gfmi_k": 5, "n_anchors": 40, "backend": "numpy"}


def _states(layers: int = 6, n: int = 80, d: int = 32, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((layers, n, d)).astype(np.float32)
    x[:, :, :4] *= 10  # a few dominant directions: an automatic rank well below d
    return x


def _with_one_vector_h0(x: np.ndarray) -> np.ndarray:
    x = x.copy()
    x[0] = x[0, :1]  # last-token pooling after a template token: one vector for every text
    return x


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def test_a_one_vector_h0_is_undefined_in_every_family_with_its_reason():
    result = lrd(_with_one_vector_h0(_states()), **KW)
    assert result.undefined == {family: {"h_0": ONE_VECTOR} for family in ("frenet", "nrs", "gfmi")}
    assert math.isnan(result.frenet.speed[0]) and np.isfinite(result.frenet.speed[1:]).all()
    assert math.isnan(result.frenet.curvature[0]) and np.isfinite(result.frenet.curvature[1:]).all()
    assert math.isnan(result.nrs.jaccard[0]) and np.isfinite(result.nrs.jaccard[1:]).all()
    assert math.isnan(result.gfmi.auc[0]) and np.isfinite(result.gfmi.auc[1:]).all()
    record = result.to_dict()
    assert record["frenet"]["speed"][0] is None and record["gfmi"]["auc"][0] is None
    assert record["undefined"]["nrs"] == {"h_0": ONE_VECTOR}
    assert record["first_state"] == {"frenet": 1, "nrs": 1, "gfmi": 1}
    json.dumps(record, allow_nan=False)


def test_summaries_start_at_the_first_informative_state():
    """With h_0 uninformative, every model-level score equals that of the states from h_1 on,
    measured independently (d0L is then h_1 → h_L, first→last retention h_1 → h_L)."""
    x = _with_one_vector_h0(_states())
    masked, without = lrd(x, **KW).summary(), lrd(x[1:], **KW).summary()
    assert masked.keys() == without.keys()
    assert all(_same(masked[key], without[key]) for key in masked), {
        key: (masked[key], without[key]) for key in masked if not _same(masked[key], without[key])
    }


def test_the_authors_behaviour_reads_every_state_as_computed():
    x = _with_one_vector_h0(_states())
    result = lrd(x, **KW)
    authors = lrd_summary(result, "authors")
    raw = result.unmasked()
    assert raw.undefined == {} and np.isfinite(raw.frenet.speed).all() and np.isfinite(raw.gfmi.auc).all()
    assert authors["frenet_d0L"] == raw.frenet.d0L != result.frenet.d0L
    assert authors["nrs_jaccard_first_last"] == raw.nrs.first_last


def test_healthy_states_are_untouched():
    result = lrd(_states(), **KW)
    assert result.undefined == {} and "undefined" not in result.to_dict()
    assert result.unmasked() is result  # nothing to unmask
    assert result.frenet.first_state == result.nrs.first_state == result.gfmi.first_state == 0


@pytest.mark.parametrize(("noise", "one_vector"), [(1e-7, True), (3e-3, False)])
def test_the_tolerance_separates_rounding_from_texts(noise, one_vector):
    """Rounding-sized differences (1e-7) are one vector; differences of a few thousandths are texts."""
    x = _states()
    rng = np.random.default_rng(1)
    x[0] = x[0, :1] + noise * rng.standard_normal(x[0].shape).astype(np.float32) * np.abs(x[0, :1]).max()
    result = nrs(x, k=5, n_anchors=40, backend="numpy")
    assert (result.undefined.get(0) == ONE_VECTOR) is one_vector


def test_an_uninformative_last_state_leaves_nothing_defined():
    x = _states()
    x[-1] = x[-1, :1]
    result = lrd(x, **KW)
    assert result.frenet.first_state is None and math.isnan(result.frenet.d0L)
    assert np.isnan(result.gfmi.auc).all()  # every layer is compared with h_L
    assert all(math.isnan(v) for k, v in result.summary().items() if k != "frenet_rank")


def test_a_state_inside_the_stack_makes_profile_summaries_undefined():
    x = _states()
    x[3] = x[3, :1]
    result = frenet(x)
    assert np.isnan(result.speed[[2, 3]]).all() and np.isfinite(result.speed[[0, 1, 4]]).all()
    summary = result.summary()
    assert math.isnan(summary["mean_speed"]) and summary["d0L"] == result.d0L > 0  # h_0 → h_L is defined
    assert result.first_state == 0


def test_frenet_needs_rank_r_nrs_needs_k_plus_one_distinct_rows():
    x = _states(d=32)
    x[1] = np.repeat(x[1, :3], [30, 30, 20], axis=0)  # 3 distinct rows: rank 2
    f = frenet(x, rank=4)
    assert f.undefined == {1: "rank 2 below the subspace rank r = 4"}
    n = nrs(x, k=5, n_anchors=40, backend="numpy")
    assert n.undefined == {1: "3 distinct vectors, fewer than k + 1 = 6"}
    assert nrs(x, k=2, n_anchors=40, backend="numpy").undefined == {}  # 3 distinct rows serve k = 2


@pytest.mark.parametrize("family", ["frenet", "nrs", "gfmi"])
def test_the_layer_by_layer_forms_mark_the_same_states(family):
    x = _with_one_vector_h0(_states())
    whole = {"frenet": lambda: frenet(x), "nrs": lambda: nrs(x, k=5, n_anchors=40, backend="numpy"),
             "gfmi": lambda: gfmi(x, k=5, backend="numpy")}[family]()  # fmt: skip
    by_layer = {"frenet": frenet_by_layer, "nrs": nrs_by_layer, "gfmi": gfmi_by_layer}[family]
    kwargs = {
        "frenet": {},
        "nrs": {"k": 5, "n_anchors": 40, "backend": "numpy"},
        "gfmi": {"k": 5, "backend": "numpy"},
    }
    layered = by_layer(lambda layer: x[layer], len(x), **kwargs[family])
    assert layered.undefined == whole.undefined and layered.first_state == whole.first_state
    assert layered.summary().keys() == whole.summary().keys()
    assert all(_same(layered.summary()[k], whole.summary()[k]) for k in whole.summary())


def test_helpers_by_hand():
    assert spread_rank(np.array([4.0, 1e-12, 0.0]), n=10) == 1
    assert spread_rank(np.array([10 * SPREAD_TOL**2 * 1.01]), n=10) == 1
    assert spread_rank(np.array([10 * SPREAD_TOL**2]), n=10) == 0
    assert first_informative({0: "x"}, 4) == 1 and first_informative({0: "x", 3: "y"}, 4) is None
    assert first_informative({0: "x", 1: "x", 2: "x"}, 4) is None
    assert touches({2: "x"}, np.arange(4), 1).tolist() == [False, True, True, False]
    assert touches({2: "x"}, np.arange(3), 2).tolist() == [True, True, True]
