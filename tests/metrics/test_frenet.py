"""Frenet family against a plain SVD implementation, plus hand-computed cases (spec §2)."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest

from mteb_lrd import frenet
from mteb_lrd.metrics import grassmann_distance, menger_curvature
from tests.metrics.reference import assert_summary_equal, random_states, ref_frenet, ref_frenet_summary

TOL = 1e-6


@pytest.mark.parametrize("fixture", ["states", "deep_states"])
def test_frenet_matches_reference_svd(request, fixture):
    x = request.getfixturevalue(fixture)
    ours, ref = frenet(x), ref_frenet(x)
    assert 2 < ours.rank < x.shape[2]  # chosen by the variance rule, not clamped
    assert ours.rank == ref["rank"]
    np.testing.assert_allclose(ours.speed, ref["speed"], atol=TOL)
    np.testing.assert_allclose(ours.curvature, ref["curvature"], atol=TOL)
    assert ours.d0L == pytest.approx(ref["d0L"], abs=TOL)
    assert ours.speed.shape == (x.shape[0] - 1,) and ours.curvature.shape == (x.shape[0] - 2,)
    assert (ours.n_used, ours.n_dropped) == (x.shape[1], 0)
    assert_summary_equal(ours.summary(), ref_frenet_summary(ref))


@pytest.mark.parametrize("rank", [2, 3, 7])
def test_frenet_fixed_rank_matches_reference(states, rank):
    ours, ref = frenet(states, rank=rank), ref_frenet(states, rank=rank)
    assert ours.rank == rank
    np.testing.assert_allclose(ours.speed, ref["speed"], atol=TOL)
    np.testing.assert_allclose(ours.curvature, ref["curvature"], atol=TOL)
    assert ours.d0L == pytest.approx(ref["d0L"], abs=TOL)
    assert_summary_equal(ours.summary(), ref_frenet_summary(ref))


def test_var_threshold_changes_rank(states):
    low, high = frenet(states, var_threshold=0.5).rank, frenet(states, var_threshold=0.999).rank
    assert 2 <= low < high


def test_identical_layers_do_not_move(states):
    x = np.repeat(states[:1], 4, axis=0)
    result = frenet(x)
    np.testing.assert_allclose(result.speed, 0.0, atol=1e-6)
    np.testing.assert_array_equal(result.curvature, 0.0)  # degenerate triangles: exactly 0
    assert result.d0L == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("r", [1, 2, 3])
def test_orthogonal_subspaces_are_pi_over_2_sqrt_r_apart(r):
    eye = np.eye(2 * r)
    assert float(grassmann_distance(eye[:, :r], eye[:, r:])) == pytest.approx(
        math.pi / 2 * math.sqrt(r), abs=1e-12
    )
    assert float(grassmann_distance(eye[:, :r], eye[:, :r])) == pytest.approx(0.0, abs=1e-7)


def test_orthogonal_layers_through_frenet():
    # Layer 0 spreads over axes {0, 1}, layer 1 over axes {2, 3}: rank-2 subspaces at distance π/2·√2.
    rng = np.random.default_rng(3)
    n = 64
    a = np.zeros((n, 4))
    b = np.zeros((n, 4))
    a[:, :2] = rng.standard_normal((n, 2))
    b[:, 2:] = rng.standard_normal((n, 2))
    result = frenet(np.stack([a, b]), rank=2)
    assert result.speed[0] == pytest.approx(math.pi / 2 * math.sqrt(2), abs=1e-6)
    assert result.d0L == pytest.approx(math.pi / 2 * math.sqrt(2), abs=1e-6)


def test_principal_angle_of_a_rotated_line():
    theta = 0.3
    q_a = np.array([[1.0], [0.0]])
    q_b = np.array([[math.cos(theta)], [math.sin(theta)]])
    assert float(grassmann_distance(q_a, q_b)) == pytest.approx(theta, abs=1e-12)


def test_menger_curvature_hand_computed():
    # 3-4-5 right triangle: area 6, so κ = 4·6 / (3·4·5) = 0.4 (the circumradius is 2.5).
    assert float(menger_curvature(3.0, 4.0, 5.0)) == pytest.approx(4 * 6 / (3 * 4 * 5), abs=1e-12)
    # Equilateral triangle of side s: κ = 2/(s·√3)·... = 1/R with R = s/√3.
    assert float(menger_curvature(2.0, 2.0, 2.0)) == pytest.approx(math.sqrt(3) / 2, abs=1e-12)
    # Vectorised over arrays, independent of argument order.
    out = menger_curvature(np.array([3.0, 5.0]), np.array([4.0, 3.0]), np.array([5.0, 4.0]))
    np.testing.assert_allclose(out, [0.4, 0.4], atol=1e-12)


@pytest.mark.parametrize(
    "sides",
    [(1.0, 2.0, 3.0), (1.0, 1.0, 3.0), (0.0, 1.0, 1.0), (0.0, 0.0, 0.0), (1e-6, 1e-6, 1e-6)],
)
def test_degenerate_triangle_has_zero_curvature(sides):
    # Collinear (q = 0), impossible (q < 0), a zero side, or a·b·c < 1e-15: κ = 0 by definition.
    assert float(menger_curvature(*sides)) == 0.0


def test_speed_bounded_by_pi_over_2_sqrt_r(states):
    result = frenet(states, rank=3)
    bound = math.pi / 2 * math.sqrt(3) + 1e-9
    assert np.all((result.speed >= 0) & (result.speed <= bound))
    assert 0 <= result.d0L <= bound
    assert np.all(result.curvature >= 0)


def test_two_layers_have_no_curvature(states):
    result = frenet(states[:2])
    assert result.curvature.shape == (0,)
    summary = result.summary()
    assert math.isnan(summary["mean_curvature"]) and math.isnan(summary["peak_curvature_depth"])
    assert summary["d0L"] == pytest.approx(result.speed[0], abs=1e-12)


@pytest.mark.parametrize("rank", [None, 3, 20])
def test_fewer_texts_than_dimensions_matches_reference_svd(rank):
    """N < d takes the thin-SVD route (no d×d decomposition); N ≥ d with r > d/2 the complement route."""
    wide = random_states(n_layers=5, n=30, d=64, seed=4, decay=0.9)
    ours, ref = frenet(wide, rank=rank), ref_frenet(wide, rank=rank)
    assert ours.rank == ref["rank"] and ours.rank <= 29
    np.testing.assert_allclose(ours.speed, ref["speed"], atol=TOL)
    np.testing.assert_allclose(ours.curvature, ref["curvature"], atol=TOL)
    assert ours.d0L == pytest.approx(ref["d0L"], abs=TOL)
    tall = random_states(n_layers=4, n=80, d=12, seed=5, decay=0.95)
    ours, ref = frenet(tall, rank=9), ref_frenet(tall, rank=9)  # 9 > 12 - 9: complements are compared
    np.testing.assert_allclose(ours.speed, ref["speed"], atol=TOL)
    assert ours.d0L == pytest.approx(ref["d0L"], abs=TOL)


@pytest.mark.parametrize("distinct", [1, 5])
def test_a_state_spanning_fewer_than_r_dimensions_still_has_an_orthonormal_basis(distinct):
    """N < d, a state whose rows take ``distinct`` values (a last-token-pooled h_0): its top-r
    subspace is not determined beyond ``distinct - 1`` directions, but its basis must stay
    orthonormal, so the state is at distance 0 from itself and no distance passes π/2·√r."""
    rng = np.random.default_rng(distinct)
    n, d, r = 60, 128, 20
    state = rng.standard_normal((distinct, d))[rng.integers(0, distinct, n)]
    same = frenet(np.repeat(state[None], 3, axis=0), rank=r)
    assert sorted(same.undefined) == [0, 1, 2] and np.isnan(same.speed).all()  # rank < r: undefined
    np.testing.assert_allclose(same.unmasked().speed, 0.0, atol=1e-6)  # as computed
    assert same.unmasked().d0L == pytest.approx(0.0, abs=1e-6)
    moving = np.stack([state, rng.standard_normal((n, d)), rng.standard_normal((n, d))])
    result = frenet(moving, rank=r)
    assert list(result.undefined) == [0] and result.first_state == 1
    assert np.all(result.unmasked().speed < math.pi / 2 * math.sqrt(r) - 0.5)  # not pinned at the maximum
    ref = ref_frenet(moving, rank=r)
    assert result.speed[1] == pytest.approx(ref["speed"][1], abs=TOL)  # determined states: as the SVD


@pytest.mark.parametrize(("n", "d", "num_states"), [(50, 16, 6), (30, 64, 5), (40, 40, 2), (12, 6, 3)])
@pytest.mark.parametrize("rank", [None, 3])
def test_frenet_by_layer_equals_frenet_bit_for_bit(n, d, num_states, rank):
    from mteb_lrd.metrics.frenet import frenet_by_layer

    x = np.random.default_rng(n + d).standard_normal((num_states, n, d)).astype(np.float32)
    x[1, 3] = np.nan  # dropped from every layer
    x[-1, 5] = 0.0
    reads = []

    def read(layer):
        reads.append(layer)
        return x[layer]

    whole, by_layer = frenet(x, rank=rank), frenet_by_layer(read, num_states, rank=rank)
    for name in ("speed", "curvature", "chord"):
        assert np.array_equal(getattr(whole, name), getattr(by_layer, name)), name
    assert (whole.d0L, whole.rank, whole.n_used, whole.n_dropped) == (
        by_layer.d0L, by_layer.rank, by_layer.n_used, by_layer.n_dropped,
    )  # fmt: skip
    assert len(reads) == 2 * num_states  # validity, then one decomposition per layer


def test_frenet_by_layer_refuses_what_frenet_refuses():
    from mteb_lrd.metrics.frenet import frenet_by_layer

    x = np.random.default_rng(0).standard_normal((3, 5, 4))
    with pytest.raises(ValueError, match="at least 2 hidden states"):
        frenet_by_layer(lambda layer: x[layer], 1)
    with pytest.raises(ValueError, match="rank must be"):
        frenet_by_layer(lambda layer: x[layer], 3, rank=0)
    with pytest.raises(ValueError, match="var_threshold"):
        frenet_by_layer(lambda layer: x[layer], 3, var_threshold=1.5)


@pytest.mark.parametrize(
    ("rank", "low_rank_layer"),
    [(3, None), (60, None), (3, 2), (60, 2)],  # top r solved for; the complement; each below rank r
)
def test_subset_eigensolves_equal_full_ones(monkeypatch, rank, low_rank_layer):
    # d = 64, N = 400: r = 3 solves the top 3 eigenpairs, r = 60 the 5 weakest (the complement);
    # with SUBSET_SHARE = 0 every layer is solved in full, as the reference does.
    rng = np.random.default_rng(3)  # an isotropic random walk: every layer spans all 64 directions
    x = np.cumsum(rng.standard_normal((6, 400, 64)), axis=0).astype(np.float32)
    if low_rank_layer is not None:  # a layer spanning 2 directions: rank 2 < r, undefined
        x[low_rank_layer] = x[low_rank_layer][:, :2] @ np.eye(2, 64)
    subset = frenet(x, rank=rank)
    monkeypatch.setattr(importlib.import_module("mteb_lrd.metrics.frenet"), "SUBSET_SHARE", 0.0)
    full = frenet(x, rank=rank)
    np.testing.assert_allclose(subset.speed, full.speed, atol=1e-9, equal_nan=True)
    np.testing.assert_allclose(subset.curvature, full.curvature, atol=1e-9, equal_nan=True)
    assert subset.d0L == pytest.approx(full.d0L, abs=1e-9)
    assert subset.undefined == full.undefined
    assert math.isfinite(subset.d0L)
    if low_rank_layer is not None:
        assert subset.undefined == {low_rank_layer: f"rank 2 below the subspace rank r = {rank}"}
