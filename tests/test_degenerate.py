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


def test_a_state_whose_texts_share_one_vector_is_named():
    states = _states(n=40)
    states[0] = states[0, :1]  # every text's h_0 is one vector: the embedding of one shared token
    states[2, 25:] = states[2, 0]  # 16 of 40 texts share a vector at h_2: 25 distinct, more than half
    messages = degenerate_input_warnings(states)
    assert len(messages) == 1 and messages[0].startswith("h_0 (1 distinct) of 40 texts")
    assert "h_2" not in messages[0] and "d0L" in messages[0]
    states[2, 19:] = states[2, 0]  # now 19 distinct: fewer than half
    assert degenerate_input_warnings(states)[0].startswith("h_0 (1 distinct), h_2 (19 distinct) of 40 texts")
    with pytest.warns(UserWarning, match="degenerate input: h_0 \\(1 distinct\\)"):
        layer_dynamics(states, CAPS, params=PARAMS)


def test_a_decoder_under_a_template_is_warned_that_its_embedding_output_is_one_vector(tiny_model_dir, texts):
    from mteb_lrd.extraction.extractor import LayerExtractor

    bare = LayerExtractor(str(tiny_model_dir("llama")), show_progress_bar=False).extract(texts).states
    templated = (
        LayerExtractor(str(tiny_model_dir("llama")), template="prompteol", show_progress_bar=False)
        .extract(texts)
        .states
    )
    assert not any("h_0" in m for m in degenerate_input_warnings(np.asarray(bare)))  # last words differ
    assert degenerate_input_warnings(np.asarray(templated))[0].startswith(
        f"h_0 (1 distinct) of {len(texts)} texts"
    )


def test_a_cls_pooled_encoder_is_warned_that_its_embedding_output_is_one_vector(tiny_model_dir, texts):
    from mteb_lrd.extraction.extractor import LayerExtractor

    path = str(tiny_model_dir("bert"))
    cls = LayerExtractor(path, pooling="cls", show_progress_bar=False).extract(texts).states
    mean = LayerExtractor(path, pooling="mean", show_progress_bar=False).extract(texts).states
    assert degenerate_input_warnings(np.asarray(cls))[0].startswith(f"h_0 (1 distinct) of {len(texts)} texts")
    assert degenerate_input_warnings(np.asarray(mean)) == []
