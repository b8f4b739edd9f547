"""Input handling shared by every metric: validation, bad rows, dtypes, torch; and subsample()."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mteb_lrd import frenet, gfmi, lrd, nrs
from mteb_lrd.metrics import prepare_states, subsample
from tests.metrics.reference import random_states

# Small enough for every function's defaults except the ks: (L+1, N, d) = (4, 40, 6).
KW = {"frenet": {}, "nrs": {"k": 5}, "gfmi": {"k": 6}, "lrd": {"nrs_k": 5, "gfmi_k": 6, "backend": "numpy"}}
FUNCS = {"frenet": frenet, "nrs": nrs, "gfmi": gfmi, "lrd": lrd}


def _run(name, x):
    return FUNCS[name](x, **KW[name])


def _numbers(name, result) -> list[np.ndarray]:
    """The numeric outputs of each function, flattened, for equality checks."""
    if name == "lrd":
        return _numbers("frenet", result.frenet) + _numbers("nrs", result.nrs) + _numbers("gfmi", result.gfmi)
    if name == "frenet":
        return [result.speed, result.curvature, np.array([result.d0L, result.rank])]
    if name == "nrs":
        return [result.jaccard, np.array([result.first_last])]
    return [result.mi, result.auc, result.peak_mi, result.peak_percentile]


def _assert_equal_results(name, a, b, atol=0.0):
    for x, y in zip(_numbers(name, a), _numbers(name, b), strict=True):
        np.testing.assert_allclose(x, y, atol=atol, rtol=0)


@pytest.fixture(scope="module")
def small() -> np.ndarray:
    return random_states(n_layers=4, n=40, d=6, seed=2)


# --- subsample ---------------------------------------------------------------------------------


def test_subsample_keeps_everything_up_to_the_cap():
    np.testing.assert_array_equal(subsample(10, 10), np.arange(10))
    np.testing.assert_array_equal(subsample(10, None), np.arange(10))
    np.testing.assert_array_equal(subsample(0, 5), np.arange(0))


def test_subsample_is_the_reference_rule():
    ids = subsample(5000, 1000)
    expected = np.sort(np.random.RandomState(42).choice(5000, 1000, replace=False))
    np.testing.assert_array_equal(ids, expected)
    assert len(set(ids.tolist())) == 1000 and np.all(np.diff(ids) > 0) and ids.max() < 5000
    np.testing.assert_array_equal(subsample(5000, 1000), ids)  # deterministic
    assert not np.array_equal(subsample(5000, 1000, seed=0), ids)


@pytest.mark.parametrize(("n", "cap"), [(-1, 5), (10, 0), (10, -2)])
def test_subsample_rejects_bad_arguments(n, cap):
    with pytest.raises(ValueError):
        subsample(n, cap)


# --- bad rows: NaN, Inf, zero --------------------------------------------------------------------


@pytest.mark.parametrize("name", FUNCS)
def test_nan_inf_zero_rows_are_excluded_and_counted(small, name):
    x = small.copy()
    x[0, 3, 1] = np.nan
    x[2, 8] = -np.inf
    x[3, 20] = 0.0  # a zero vector at one layer drops the text at every layer
    x[:, 33, 0] = np.nan
    result = _run(name, x)
    clean = _run(name, np.delete(small, [3, 8, 20, 33], axis=1))
    n_dropped = result.n_dropped
    assert n_dropped == 4
    _assert_equal_results(name, result, clean)


def test_prepare_states_reports_kept_rows_and_normalises(small):
    x = small.astype(np.float64) * 7.0
    x[1, 5] = np.nan
    prepared = prepare_states(x)
    assert prepared.x.dtype == np.float32 and prepared.num_layers == small.shape[0] - 1
    np.testing.assert_array_equal(prepared.kept, np.delete(np.arange(40), 5))
    np.testing.assert_allclose(np.linalg.norm(prepared.x, axis=2), 1.0, atol=1e-6)
    assert prepared.n_dropped == 1


@pytest.mark.parametrize("name", FUNCS)
def test_too_few_valid_rows_after_dropping_is_a_value_error(small, name):
    x = small.copy()
    x[:, 2:] = np.nan  # 2 valid rows: enough for nothing but frenet
    if name == "frenet":
        assert frenet(x).n_used == 2
        x[:, 1] = 0.0
    with pytest.raises(ValueError, match="valid rows"):
        _run(name, x)


# --- shapes --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FUNCS)
@pytest.mark.parametrize(
    ("shape", "match"),
    [
        ((1, 40, 6), "at least 2 hidden states"),
        ((4, 40), r"shape \(L\+1, N, d\)"),
        ((40,), r"shape \(L\+1, N, d\)"),
        ((2, 4, 40, 6), r"shape \(L\+1, N, d\)"),
        ((4, 0, 6), "valid rows"),
        ((4, 40, 0), "d = 0"),
    ],
)
def test_wrong_shapes_are_value_errors(name, shape, match):
    with pytest.raises(ValueError, match=match):
        _run(name, np.ones(shape, dtype=np.float32))


@pytest.mark.parametrize("name", FUNCS)
def test_rows_not_more_than_k(small, name):
    n_min = {"frenet": 2, "nrs": 6, "gfmi": 7, "lrd": 7}[name]
    _run(name, small[:, :n_min])  # enough
    with pytest.raises(ValueError, match="valid rows"):
        _run(name, small[:, : n_min - 1])


@pytest.mark.parametrize("name", FUNCS)
def test_one_dimensional_vectors(name):
    # d = 1: every normalised vector is +1 or -1; heavy ties, but the results stay in range.
    x = np.random.default_rng(4).standard_normal((3, 30, 1))
    result = _run(name, x)
    if name in ("frenet", "lrd"):
        fr = result if name == "frenet" else result.frenet
        assert fr.rank == 1
        np.testing.assert_allclose(fr.speed, 0.0, atol=1e-7)  # the only 1-D subspace is the line itself
    if name in ("nrs", "lrd"):  # two distinct unit vectors (+1, -1): no k-NN lists, undefined
        nrs_result = result if name == "nrs" else result.nrs
        assert set(nrs_result.undefined) == {0, 1, 2} and np.isnan(nrs_result.jaccard).all()
        assert all("2 distinct vectors" in why for why in nrs_result.undefined.values())
        j = nrs_result.unmasked().jaccard
        assert np.all((j >= 0) & (j <= 1))
    if name in ("gfmi", "lrd"):
        gfmi_result = result if name == "gfmi" else result.gfmi
        assert np.isnan(gfmi_result.mi).all() and np.all(gfmi_result.unmasked().mi >= 0)


# --- dtypes and containers -----------------------------------------------------------------------


@pytest.mark.parametrize("name", FUNCS)
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16])
def test_integer_input_equals_its_float32_cast(small, name, dtype):
    x = np.round(np.abs(small) * 30 if dtype == np.uint16 else small * 30).astype(dtype)  # |values| < 127
    _assert_equal_results(name, _run(name, x), _run(name, x.astype(np.float32)))


@pytest.mark.parametrize("name", FUNCS)
def test_float16_input_equals_its_float32_cast(small, name):
    x = small.astype(np.float16)
    _assert_equal_results(name, _run(name, x), _run(name, x.astype(np.float32)))


@pytest.mark.parametrize("name", FUNCS)
def test_float64_input_matches_float32(small, name):
    _assert_equal_results(name, _run(name, small.astype(np.float64)), _run(name, small), atol=1e-6)


@pytest.mark.parametrize("name", FUNCS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_torch_tensor_input(small, name, dtype):
    tensor = torch.from_numpy(small).to(dtype)
    expected = tensor.float().numpy()
    _assert_equal_results(name, _run(name, tensor), _run(name, expected), atol=1e-6)


@pytest.mark.parametrize("name", FUNCS)
def test_nested_lists_are_accepted(small, name):
    _assert_equal_results(name, _run(name, small.tolist()), _run(name, small), atol=1e-6)


@pytest.mark.parametrize("name", FUNCS)
@pytest.mark.parametrize(
    "bad",
    [
        np.ones((3, 10, 4), dtype=np.complex64),
        np.full((3, 10, 4), "a"),
        np.empty((3, 10, 4), dtype=object),
        None,
        [[[1.0, 2.0], [3.0]]],  # ragged
        torch.ones((3, 10, 4), dtype=torch.complex64),
    ],
    ids=["complex", "str", "object", "none", "ragged", "torch-complex"],
)
def test_non_real_input_is_a_type_error(name, bad):
    with pytest.raises(TypeError):
        _run(name, bad)


def test_frenet_rank_argument(small):
    assert frenet(small, rank=100).rank == small.shape[2]  # clamped to d
    with pytest.raises(ValueError, match="rank"):
        frenet(small, rank=0)
    with pytest.raises(ValueError, match="rank"):
        frenet(small, rank=2.5)
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="var_threshold"):
            frenet(small, var_threshold=bad)


# --- finite rows that fp32 cannot hold ------------------------------------------------------------


def test_finite_float64_rows_beyond_float32_range_are_kept(small):
    # A finite vector is a valid direction; only NaN / Inf / zero rows may be dropped (spec §1).
    x = small.astype(np.float64)
    x[:, 3] *= 1e200
    x[:, 4] *= 1e-300
    prepared = prepare_states(x)
    assert prepared.n_dropped == 0
    np.testing.assert_allclose(prepared.x, prepare_states(small).x, atol=1e-6)


def test_subnormal_float32_rows_are_normalised_to_unit_length():
    x = np.zeros((2, 3, 2), dtype=np.float32)
    x[:, 0] = [1.4e-45, 2.8e-45]  # float32 subnormals: a valid direction (1, 2)/√5
    x[:, 1] = [1.0, 0.0]
    x[:, 2] = [0.0, 1.0]
    prepared = prepare_states(x)
    np.testing.assert_allclose(np.linalg.norm(prepared.x, axis=2), 1.0, atol=1e-6)
