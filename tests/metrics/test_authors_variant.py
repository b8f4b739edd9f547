"""The authors' variant (``reproduce="authors"``) against their code written out in reference.py, and
where it differs from ours: a divergence of either shows here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mteb_lrd import frenet
from mteb_lrd.metrics.knn import knn
from mteb_lrd.metrics.lrd import lrd
from mteb_lrd.metrics.summaries import authors_frenet_summary
from mteb_lrd.pipeline import lrd_summary
from tests.metrics.reference import (
    assert_summary_equal,
    normalise,
    random_states,
    ref_frenet,
    ref_frenet_summary,
    ref_frenet_summary_authors,
    ref_knn_authors,
)


@pytest.mark.parametrize("num_layers", [1, 2, 3, 4, 5, 7, 8])
def test_authors_frenet_summary_matches_their_definitions(num_layers):
    states = random_states(n_layers=num_layers + 1, n=60, d=12, seed=num_layers)
    ours = frenet(states)
    ref = ref_frenet(states)
    authors = {**ours.summary(), **authors_frenet_summary(ours.speed, ours.curvature, ours.d0L)}
    assert_summary_equal(authors, ref_frenet_summary_authors(ref))
    assert_summary_equal(ours.summary(), ref_frenet_summary(ref))


def test_late_thirds_differ_only_when_L_is_not_a_multiple_of_3():
    speed = np.arange(1.0, 8.0)  # L = 7: ours take the last 2, the authors the last ceil(7/3) = 3
    a = authors_frenet_summary(speed, np.ones(6), 1.0)
    assert a["late_speed"] == pytest.approx((5 + 6 + 7) / 3)
    assert a["early_speed"] == pytest.approx((1 + 2) / 2)
    b = authors_frenet_summary(np.arange(1.0, 7.0), np.ones(5), 1.0)  # L = 6: both take 2
    assert b["late_speed"] == pytest.approx((5 + 6) / 2)


def test_authors_fallbacks_replace_our_nans():
    a = authors_frenet_summary(np.zeros(4), np.array([]), 0.0)
    assert (a["straightness"], a["speed_cv"], a["early_late_speed_ratio"], a["peak_curvature_depth"]) == (
        1.0,
        0.0,
        1.0,
        0.5,
    )
    short = authors_frenet_summary(np.array([1.0, 3.0]), np.array([0.5]), 2.0)  # L < 3: mean of all
    assert short["early_speed"] == short["late_speed"] == 2.0


def test_lrd_summary_switch():
    states = random_states(n_layers=8, n=60, d=12, seed=3)  # L = 7
    result = lrd(states, nrs_k=5, n_anchors=30, gfmi_k=5)
    ours, authors = lrd_summary(result), lrd_summary(result, "authors")
    assert ours == result.summary()
    changed = {
        k for k in ours if not (ours[k] == authors[k] or (math.isnan(ours[k]) and math.isnan(authors[k])))
    }
    assert changed == {"frenet_late_speed", "frenet_early_late_speed_ratio"}
    assert all(not k.startswith(("nrs_", "gfmi_")) for k in changed)
    with pytest.raises(ValueError, match="reproduce"):
        lrd_summary(result, "paper")


def test_self_exclusion_by_rank_equals_ours_on_distinct_vectors():
    x = normalise(random_states(n_layers=1, n=80, d=10, seed=5)[0]).astype(np.float32)
    anchors = list(range(0, 80, 3))
    _, ours = knn(x, 6, np.array(anchors), backend="numpy")
    assert ours.tolist() == ref_knn_authors(x, 6, anchors)


def test_self_exclusion_by_rank_can_keep_the_anchor_among_duplicates():
    # three identical vectors: the authors' rule drops whichever duplicate ranks first, which may be
    # another copy (keeping the anchor as its own neighbour); ours drop the anchor by index.
    x = normalise(np.vstack([np.tile([1.0, 0.0, 0.0], (3, 1)), np.eye(3)[1:], [[0.5, 0.5, 0.0]]]))
    _, ours = knn(x.astype(np.float32), 2, np.arange(3), backend="numpy")
    assert all(q not in row for q, row in enumerate(ours.tolist()))
    authors = ref_knn_authors(x, 2, [0, 1, 2])
    assert any(q in row for q, row in enumerate(authors))
