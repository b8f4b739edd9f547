"""Consensus mask, value vectors and the language order (label-free by default, labels only with a warning)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis.extra import numpy as hnp

from mteb_lrd.dysem import (
    LabelLeakageWarning,
    consensus_mask,
    language_agreement,
    rank_languages,
    rank_languages_by_labels,
    value_vectors,
)


def test_mask_is_positive_in_every_language():
    stack = np.array([[[1.0, -1.0, 2.0, 0.0]], [[3.0, 2.0, 0.5, 1.0]]])
    assert consensus_mask(stack).tolist() == [[True, False, True, False]]  # zero is not positive


def test_mask_of_one_language_is_its_positive_part():
    rng = np.random.default_rng(0)
    single = rng.normal(size=(1, 5, 7))
    assert np.array_equal(consensus_mask(single), single[0] > 0)


@settings(max_examples=50, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=3, max_dims=3, max_side=6)))
def test_property_mask_matches_loop_or_rejects_non_finite(stack):
    if not np.all(np.isfinite(stack)):
        with pytest.raises(ValueError, match="NaN or infinite"):
            consensus_mask(stack)
        return
    mask = consensus_mask(stack)
    for i in range(stack.shape[1]):
        for j in range(stack.shape[2]):
            assert mask[i, j] == all(stack[lang, i, j] > 0 for lang in range(stack.shape[0]))


@pytest.mark.parametrize("bad", [np.ones((2, 3)), np.ones((0, 2, 3)), np.array([[["a"]]])])
def test_mask_rejects_bad_shapes(bad):
    with pytest.raises(ValueError):
        consensus_mask(bad)


def test_value_vectors_source_and_mean():
    stack = np.array([[[1.0, 2.0]], [[3.0, 6.0]]])
    source = np.array([[9.0, 9.0]])
    assert value_vectors(stack, "mean").tolist() == [[2.0, 4.0]]
    assert value_vectors(stack, "source", source=source).tolist() == [[9.0, 9.0]]
    with pytest.raises(ValueError, match="needs the source"):
        value_vectors(stack, "source")
    with pytest.raises(ValueError, match='"source" or "mean"'):
        value_vectors(stack, "median")


def test_agreement_with_source_is_mean_cosine():
    source = np.array([[1.0, 0.0], [0.0, 1.0]])
    stack = np.array([source, [[1.0, 1.0], [0.0, -1.0]]])
    expected_second = (1 / np.sqrt(2) + -1.0) / 2
    np.testing.assert_allclose(language_agreement(stack, source), [1.0, expected_second])


def test_consensus_agreement_uses_the_other_languages():
    stack = np.array([[[1.0, 0.0]], [[1.0, 0.0]], [[0.0, 1.0]]])
    # first two agree with the mean of the others (cos 1/sqrt2), the third is orthogonal to both others' mean
    np.testing.assert_allclose(
        language_agreement(stack, method="consensus"), [1 / np.sqrt(2), 1 / np.sqrt(2), 0.0]
    )


def test_rank_languages_orders_by_agreement_and_keeps_ties_stable():
    rng = np.random.default_rng(0)
    source = rng.normal(size=(20, 8))
    stack = np.array([source + s * rng.normal(size=(20, 8)) for s in (2.0, 0.1, 0.1, 5.0)])
    stack[2] = stack[1]  # a tie: the given order decides
    assert rank_languages(stack, ["de", "fr", "es", "zh"], source=source) == ["fr", "es", "de", "zh"]


def test_label_order_warns_and_ranks_by_spearman():
    rng = np.random.default_rng(1)
    gold = rng.random(30)
    good_a = rng.normal(size=(30, 4))
    good_b = good_a + (1 - gold)[:, None] * rng.normal(size=(30, 4)) * 3
    noise_a, noise_b = rng.normal(size=(30, 4)), rng.normal(size=(30, 4))
    with pytest.warns(LabelLeakageWarning, match="leak"):
        order = rank_languages_by_labels([noise_a, good_a], [noise_b, good_b], gold, ["xx", "yy"])
    assert order == ["yy", "xx"]


def test_label_free_order_does_not_warn(recwarn):
    rank_languages(np.ones((2, 3, 4)), ["a", "b"], source=np.ones((3, 4)))
    assert not [w for w in recwarn if issubclass(w.category, LabelLeakageWarning)]
