"""The torch path (``device=``) against the numpy path: the same numbers within the stated
tolerances (Frenet 1e-6 rad from float64 subspaces; NRS and GFMI from the same neighbours), on the
CPU here and on a GPU where one is visible."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mteb_lrd import frenet, lrd
from mteb_lrd.metrics.frenet import frenet_by_layer
from mteb_lrd.metrics.gfmi import filtration_components, gfmi_by_layer
from mteb_lrd.metrics.knn import knn
from mteb_lrd.metrics.on_device import filtration_components_on_device, knn_on_device, metrics_device
from mteb_lrd.metrics.params import MetricParams
from tests.metrics.test_gfmi import _same_partition, knn_graphs

TOL = 1e-6
KW = {"nrs_k": 5, "gfmi_k": 8, "n_anchors": 60}
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _assert_close(on_device, on_cpu) -> None:
    assert on_device.frenet.rank == on_cpu.frenet.rank
    for name in ("speed", "curvature"):
        np.testing.assert_allclose(getattr(on_device.frenet, name), getattr(on_cpu.frenet, name),
                                   atol=TOL, equal_nan=True)  # fmt: skip
    np.testing.assert_array_equal(on_device.nrs.jaccard, on_cpu.nrs.jaccard)
    np.testing.assert_array_equal(on_device.gfmi.mi, on_cpu.gfmi.mi)
    assert on_device.undefined == on_cpu.undefined
    assert (on_device.n_input, on_device.n_dropped) == (on_cpu.n_input, on_cpu.n_dropped)
    theirs = on_cpu.summary()
    for key, value in on_device.summary().items():
        assert (math.isnan(value) and math.isnan(theirs[key])) or value == pytest.approx(
            theirs[key], abs=TOL
        ), key


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fixture", ["states", "deep_states"])
def test_lrd_on_a_device_equals_the_numpy_path(request, fixture, device):
    x = request.getfixturevalue(fixture)
    on_device = lrd(torch.from_numpy(x), device=device, **KW)
    _assert_close(on_device, lrd(x, device=None, backend="numpy", **KW))
    assert on_device.params["backend"] == f"torch ({device})"


@pytest.mark.parametrize("device", DEVICES)
def test_uninformative_states_bad_rows_and_fewer_texts_than_dims_on_a_device(states, device):
    x = states.astype(np.float64).copy()[:, :40]  # N = 40 < d: the Gram-matrix path
    x[0] = x[0, 0]  # h_0 one vector for every text (last-token pooling after a template)
    x[2, 5] = np.nan  # dropped at every layer
    x[-1, 9] = 0.0
    on_device = lrd(torch.from_numpy(x), device=device, **KW)
    on_cpu = lrd(x, device=None, backend="numpy", **KW)
    _assert_close(on_device, on_cpu)
    assert on_device.undefined["nrs"] == {"h_0": "one vector for all texts"} and on_device.n_dropped == 2


@pytest.mark.parametrize("device", DEVICES)
def test_by_layer_forms_on_a_device_equal_the_numpy_path(deep_states, device):
    def read(layer: int) -> np.ndarray:
        return deep_states[layer]

    num = deep_states.shape[0]
    ours = frenet_by_layer(read, num, device=device)
    theirs = frenet_by_layer(read, num, device=None)
    np.testing.assert_allclose(ours.speed, theirs.speed, atol=TOL)
    assert ours.d0L == pytest.approx(theirs.d0L, abs=TOL)
    np.testing.assert_array_equal(
        gfmi_by_layer(read, num, k=8, device=device).auc, gfmi_by_layer(read, num, k=8, device=None).auc
    )
    assert frenet(deep_states, device=device).rank == theirs.rank


@settings(max_examples=40, deadline=None)
@given(n=st.integers(3, 30), d=st.integers(2, 6), k=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_knn_on_a_device_gives_exact_neighbour_lists_with_ties(n, d, k, seed):
    # Rows drawn from a few distinct vectors: many exact ties. Which of the rows tied at the k-th
    # similarity make the list is any backend's choice; the similarities, the exclusion of self and
    # the order (decreasing similarity, then increasing index) are not.
    rng = np.random.default_rng(seed)
    pool = rng.standard_normal((3, d)).astype(np.float32)
    x = pool[rng.integers(0, 3, n)]
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    k = min(k, n - 1)
    sims, idx = (a.numpy() for a in knn_on_device(torch.from_numpy(x), k))
    ref_sims = knn(x, k, backend="numpy")[0]
    np.testing.assert_allclose(sims, ref_sims, atol=1e-6)
    assert not (idx == np.arange(n)[:, None]).any()
    np.testing.assert_allclose(sims, np.take_along_axis(x @ x.T, idx, axis=1), atol=1e-6)
    tied = sims[:, 1:] == sims[:, :-1]
    assert (sims[:, 1:] <= sims[:, :-1]).all() and (idx[:, 1:][tied] > idx[:, :-1][tied]).all()


@settings(max_examples=60, deadline=None)
@given(graph=knn_graphs())
def test_filtration_on_a_device_equals_the_numpy_filtration(graph):
    distances, neighbours, p = graph
    expected = filtration_components(distances, neighbours, p)
    got = filtration_components_on_device(
        torch.from_numpy(distances), torch.from_numpy(neighbours), p
    ).numpy()
    assert got.shape == expected.shape and got.min() >= 0 and got.max() < distances.shape[0]
    assert all(_same_partition(a, b) for a, b in zip(got, expected, strict=True))


def test_devices_are_resolved_or_refused_clearly():
    assert metrics_device(None, torch.zeros(2, 3, 4)) is None
    assert metrics_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="torch device"):
        metrics_device("quantum")
    with pytest.raises(ValueError, match="torch device"):
        MetricParams(device="quantum")
    if not torch.cuda.is_available():
        assert metrics_device("auto", torch.zeros(2, 3, 4)) is None  # numpy here
        with pytest.raises(ValueError, match="no CUDA device"):
            lrd(np.zeros((2, 40, 3)), device="cuda")
