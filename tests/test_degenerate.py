"""Degenerate inputs give a warning that says why the numbers mean little."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from mteb_lrd.metrics.params import MetricParams
from mteb_lrd.parameters import Caps
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


def test_a_templated_decoder_run_writes_its_h0_scores_as_null_with_the_reason(tiny_model_dir, texts):
    """Through mteb and the wrapper: a decoder pooled at the last token of a template has one h_0
    vector for every text; every score that reads h_0 is null in the result, with the reason, and
    the summaries equal those measured from h_1 on (d0L: h_1 → h_L)."""
    import mteb

    from mteb_lrd import lrd, with_layer_dynamics
    from mteb_lrd.extraction.extractor import LayerExtractor
    from tests.mteb_helpers import sts_task
    from tests.tiny_models import load_tiny_tokenizer

    path = tiny_model_dir("llama")
    tok = load_tiny_tokenizer(path)
    options = {
        "per_layer": False,
        "frenet_cap": None,
        "nrs_cap": None,
        "gfmi_cap": None,
        "nrs_k": 3,
        "gfmi_k": 3,
    }
    wrapped = with_layer_dynamics(str(path), tokenizer=tok, template="prompteol", **options)
    with pytest.warns(UserWarning, match="h_0 \\(1 distinct\\)"):
        row = mteb.evaluate(wrapped, [sts_task(texts)], cache=None, show_progress_bar=False)
    dynamics = row.task_results[0].scores["test"][0]["layer_dynamics"]
    reason = {"h_0": "one vector for all texts"}
    assert dynamics["undefined"] == {"frenet": reason, "nrs": reason, "gfmi": reason}
    assert dynamics["first_state"] == {"frenet": 1, "nrs": 1, "gfmi": 1}
    assert dynamics["frenet"]["speed"][0] is None and dynamics["nrs"]["jaccard"][0] is None
    assert dynamics["gfmi"]["auc"][0] is None and None not in dynamics["gfmi"]["auc"][1:]
    unique = list(dict.fromkeys(texts + [texts[(i * 5 + 3) % len(texts)] for i in range(len(texts))]))
    states = (
        LayerExtractor(str(path), tok, template="prompteol", show_progress_bar=False).extract(unique).states
    )
    from_h1 = lrd(states[1:], nrs_k=3, gfmi_k=3, n_anchors=500).summary()
    assert dynamics["summary"]["frenet_d0L"] == pytest.approx(from_h1["frenet_d0L"], abs=1e-6)
    assert dynamics["summary"]["nrs_jaccard_first_last"] == pytest.approx(from_h1["nrs_jaccard_first_last"])
