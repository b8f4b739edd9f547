"""Dynamic similarity: the paper's worked example, edge cases, and the batched code against a
plain per-pair loop written the reference's way (argsort over masked candidates, union, cosine)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mteb_lrd.dysem import consensus_mask, dynamic_similarity, semantic_sets


def reference_set(values: np.ndarray, mask: np.ndarray, k: int) -> np.ndarray:
    """Top-k of the masked candidates by a stable full sort (ties: lower index first)."""
    candidates = np.flatnonzero(mask)
    order = np.argsort(-values[candidates], kind="stable")
    return np.sort(candidates[order][:k])


def reference_similarity(vx, vy, mx, my, k):
    sims, sizes = [], []
    for x, y, a, b in zip(vx, vy, mx, my, strict=True):
        union = np.union1d(reference_set(x, a, k), reference_set(y, b, k))
        sizes.append(union.size)
        if union.size == 0:
            sims.append(0.0)
            continue
        xu, yu = x[union].astype(np.float64), y[union].astype(np.float64)
        denom = np.linalg.norm(xu) * np.linalg.norm(yu)
        sims.append(float(xu @ yu / denom) if denom > 1e-9 else 0.0)
    return np.array(sims), np.array(sizes)


# Figure 1 of the paper (d = 5, k = 3; 1-based dimensions in the paper, 0-based here).
ES = [1.5, 0.2, 0.3, 1.1, 1.2]
FR = [0.7, 0.3, -0.3, 1.6, 1.1]
EN = [1.1, 0.1, -0.9, 0.6, 0.7]
X = np.array([1.1, 0.3, -0.9, 0.6, 0.7])
Y = np.array([1.1, 0.5, 0.5, 0.3, 0.2])
Z = np.array([0.9, 0.8, 0.5, 0.8, 0.1])


def one_hot(indices, d=5):
    mask = np.zeros(d, dtype=bool)
    mask[list(indices)] = True
    return mask


def test_worked_example_consensus_and_set():
    mask = consensus_mask(np.array([ES, FR, EN])[:, None, :])[0]
    assert mask.tolist() == [True, True, False, True, True]  # dimension 3 is not positive everywhere
    assert np.flatnonzero(semantic_sets(np.array([EN]), mask[None], 3)[0]).tolist() == [0, 3, 4]  # {1, 4, 5}


def test_worked_example_similarities_and_unions():
    # S(x) = {1,4,5}, S(y) = {1,3}, S(z) = {2,3}: masks equal to the sets, k large enough to keep them.
    masks_a = np.array([one_hot([0, 3, 4]), one_hot([0, 2])])
    masks_b = np.array([one_hot([0, 2]), one_hot([1, 2])])
    sims, sizes = dynamic_similarity(np.array([X, Y]), np.array([Y, Z]), masks_a, masks_b, k=3)
    assert sims == pytest.approx([0.5056, 0.9619], abs=5e-5)
    assert sizes.tolist() == [4, 3]  # {1,3,4,5} and {1,2,3}


def test_empty_mask_gives_empty_set_and_zero():
    v = np.ones((1, 4))
    sims, sizes = dynamic_similarity(v, v, np.zeros((1, 4), bool), np.zeros((1, 4), bool), k=2)
    assert sims.tolist() == [0.0] and sizes.tolist() == [0]


def test_fewer_candidates_than_k_keeps_the_whole_mask():
    mask = np.array([[True, False, True, False, False]])
    assert semantic_sets(np.arange(5.0)[None], mask, k=4).tolist() == mask.tolist()


def test_ties_break_towards_lower_indices_and_never_exceed_k():
    values = np.array([[1.0, 2.0, 2.0, 2.0, 2.0, 0.5]])
    sets = semantic_sets(values, np.ones_like(values, bool), k=2)
    assert np.flatnonzero(sets[0]).tolist() == [1, 2]


def test_all_negative_values_are_ranked_within_the_mask():
    values = np.array([[-5.0, -1.0, -3.0, -0.5]])
    mask = np.array([[True, True, True, False]])
    assert np.flatnonzero(semantic_sets(values, mask, k=2)[0]).tolist() == [1, 2]


def test_zero_norm_on_the_union_scores_zero():
    x = np.array([[0.0, 0.0, 1.0]])
    y = np.array([[0.0, 0.0, 1.0]])
    mask = np.array([[True, True, False]])
    sims, sizes = dynamic_similarity(x, y, mask, mask, k=2)
    assert sims.tolist() == [0.0] and sizes.tolist() == [2]


@pytest.mark.parametrize("k", [1, 7, 32, 64, 100])
def test_batched_equals_per_pair_loop(k):
    rng = np.random.default_rng(k)
    p, d = 300, 64
    vx, vy = rng.normal(size=(p, d)).astype(np.float32), rng.normal(size=(p, d)).astype(np.float32)
    mx, my = rng.random((p, d)) < 0.6, rng.random((p, d)) < 0.6
    mx[:5] = False  # some empty masks
    sims, sizes = dynamic_similarity(vx, vy, mx, my, k)
    ref_sims, ref_sizes = reference_similarity(vx, vy, mx, my, k)
    np.testing.assert_array_equal(sizes, ref_sizes)
    np.testing.assert_allclose(sims, ref_sims, atol=1e-6)


def test_batched_equals_loop_with_many_ties():
    rng = np.random.default_rng(0)
    vx = rng.integers(-2, 3, size=(200, 40)).astype(np.float32)
    vy = rng.integers(-2, 3, size=(200, 40)).astype(np.float32)
    mx, my = rng.random((200, 40)) < 0.7, rng.random((200, 40)) < 0.7
    sims, sizes = dynamic_similarity(vx, vy, mx, my, 9)
    ref_sims, ref_sizes = reference_similarity(vx, vy, mx, my, 9)
    np.testing.assert_array_equal(sizes, ref_sizes)
    np.testing.assert_allclose(sims, ref_sims, atol=1e-6)


def test_chunking_does_not_change_results():
    rng = np.random.default_rng(1)
    v = rng.normal(size=(1100, 16))
    m = rng.random((1100, 16)) < 0.5
    whole = semantic_sets(v, m, 5)
    assert np.array_equal(whole[700:], semantic_sets(v[700:], m[700:], 5))


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(
        np.float64, hnp.array_shapes(min_dims=2, max_dims=2, max_side=12), elements=st.floats(-1e3, 1e3)
    ),
    st.integers(1, 20),
    st.randoms(use_true_random=False),
)
def test_property_range_and_set_sizes(values, k, rnd):
    mask = np.array(
        [[rnd.random() < 0.5 for _ in range(values.shape[1])] for _ in range(values.shape[0])], bool
    )
    sets = semantic_sets(values, mask, k)
    assert np.all(sets <= mask)
    assert np.array_equal(sets.sum(axis=1), np.minimum(mask.sum(axis=1), k))
    sims, sizes = dynamic_similarity(values, values[::-1], mask, mask[::-1], k)
    assert np.all(np.abs(sims) <= 1 + 1e-9) and np.all(sizes <= values.shape[1])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 3), bool), np.ones((2, 3), bool), 0), "k must be"),
        ((np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 3), bool), np.ones((2, 3), bool), 1.5), "k must be"),
        ((np.ones(3), np.ones(3), np.ones(3, bool), np.ones(3, bool), 1), "2-D"),
        ((np.ones((2, 3)), np.ones((2, 4)), np.ones((2, 3), bool), np.ones((2, 4), bool), 1), "same shape"),
        ((np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 4), bool), np.ones((2, 3), bool), 1), "mask"),
        ((np.full((2, 3), np.nan), np.ones((2, 3)), np.ones((2, 3), bool), np.ones((2, 3), bool), 1), "NaN"),
        ((np.ones((2, 3)), np.ones((2, 3)), np.full((2, 3), 0.5), np.ones((2, 3), bool), 1), "boolean"),
    ],
)
def test_bad_input_is_rejected_with_a_clear_message(args, message):
    with pytest.raises(ValueError, match=message):
        dynamic_similarity(*args)


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.integers(max_value=0), st.floats(allow_nan=True), st.text(max_size=3), st.booleans()))
def test_property_bad_k_only_raises_value_error(k):
    with pytest.raises(ValueError, match="k must be"):
        dynamic_similarity(np.ones((1, 2)), np.ones((1, 2)), np.ones((1, 2), bool), np.ones((1, 2), bool), k)
