"""Per-family sub-sampling and the texts → LRD pipeline."""

from __future__ import annotations

import numpy as np
import pytest

from mteb_lrd import frenet, gfmi, lrd, nrs
from mteb_lrd.extraction.extractor import LayerExtractor
from mteb_lrd.metrics.params import MetricParams
from mteb_lrd.metrics.states import subsample
from mteb_lrd.parameters import Caps
from mteb_lrd.pipeline import layer_dynamics, profile_texts
from tests.tiny_models import load_tiny_tokenizer


@pytest.fixture
def states():
    return np.random.default_rng(3).standard_normal((4, 120, 8)).astype(np.float32)


def test_caps_validation():
    with pytest.raises(ValueError, match="nrs_cap"):
        Caps(nrs=1)
    with pytest.raises(ValueError, match="gfmi_cap"):
        Caps(gfmi=2.5)


def test_subsample_rule():
    assert np.array_equal(subsample(10, 20), np.arange(10))
    expected = np.sort(np.random.RandomState(42).choice(100, 30, replace=False))
    assert np.array_equal(subsample(100, 30), expected)


def test_uncapped_equals_one_lrd_call(states):
    got = layer_dynamics(states, Caps(None, None, None), params=MetricParams(nrs_k=5, gfmi_k=6, n_anchors=50))
    want = lrd(states, nrs_k=5, gfmi_k=6, n_anchors=50)
    np.testing.assert_allclose(got.frenet.speed, want.frenet.speed)
    np.testing.assert_allclose(got.nrs.jaccard, want.nrs.jaccard)
    np.testing.assert_allclose(got.gfmi.auc, want.gfmi.auc)


def test_each_family_uses_its_own_seeded_rows(states):
    caps = Caps(frenet=40, nrs=60, gfmi=None)
    got = layer_dynamics(states, caps, params=MetricParams(nrs_k=5, gfmi_k=6, n_anchors=50))
    assert (got.frenet.n_used, got.nrs.n_used, got.gfmi.n_used) == (40, 60, 120)
    np.testing.assert_allclose(got.frenet.speed, frenet(states[:, subsample(120, 40)]).speed)
    np.testing.assert_allclose(got.nrs.jaccard, nrs(states[:, subsample(120, 60)], k=5, n_anchors=50).jaccard)
    np.testing.assert_allclose(got.gfmi.auc, gfmi(states, k=6).auc)


def test_profile_texts_extracts_only_sampled_texts(tiny_model_dir, texts):
    path = tiny_model_dir("bert")
    extractor = LayerExtractor(str(path), load_tiny_tokenizer(path), show_progress_bar=False)
    seen = []
    original = extractor.extract

    def spy(batch, prompt=None):
        seen.append(list(batch))
        return original(batch, prompt=prompt)

    extractor.extract = spy
    caps = Caps(frenet=8, nrs=8, gfmi=10)
    dynamics, extracted = profile_texts(extractor, texts, caps=caps, params=MetricParams(nrs_k=3, gfmi_k=3))
    union = np.unique(np.concatenate([subsample(len(texts), c) for c in (8, 8, 10)]))
    assert seen == [[texts[i] for i in union]]
    full = original(texts).states
    np.testing.assert_allclose(extracted.states, full[:, union], atol=1e-6)
    want = frenet(full[:, subsample(len(texts), 8)])
    np.testing.assert_allclose(dynamics.result.frenet.speed, want.speed, atol=1e-5)
    record = dynamics.to_dict()
    assert record["caps"] == {"frenet": 8, "nrs": 8, "gfmi": 10}
    assert record["n_texts"] == len(texts) and record["seed"] == 42
    assert record["extraction"]["pooling"] == "mean"
