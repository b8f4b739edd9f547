"""Text templates (PromptEOL for decoders): the template equals putting the texts into it by hand,
in extraction, in the mteb wrapper and in the cache key."""

from __future__ import annotations

import mteb
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mteb_lrd import with_layer_dynamics
from mteb_lrd.extraction.extractor import LayerExtractor
from mteb_lrd.extraction.templates import TEMPLATES, TEXT_SLOT, apply_template, resolve_template
from tests.mteb_helpers import sts_task
from tests.tiny_models import TEXTS, load_tiny_tokenizer

PROMPTEOL = 'This sentence : "{text}" means in one word:"'


def _by_hand(texts: list[str], template: str) -> list[str]:
    return [template.replace("{text}", t) for t in texts]


def test_named_and_custom_templates_resolve():
    assert resolve_template("prompteol") == PROMPTEOL == TEMPLATES["prompteol"]
    assert resolve_template("the {text} .") == "the {text} ."
    for none in (None, "", "none"):
        assert resolve_template(none) is None
    assert apply_template(["a", "b"], None) == ["a", "b"]
    # braces in a text are the text's own: no format() expansion
    assert apply_template(["{x} and {text}"], "<{text}>") == ["<{x} and {text}>"]
    assert apply_template(TEXTS, PROMPTEOL) == _by_hand(TEXTS, PROMPTEOL)


@given(st.text(max_size=30).filter(lambda t: t.count(TEXT_SLOT) != 1 and t not in ("", "none")))
def test_a_template_without_exactly_one_slot_is_refused(template):
    if template in TEMPLATES:
        return
    with pytest.raises(ValueError, match="exactly once"):
        resolve_template(template)


def test_bad_template_type_is_refused():
    with pytest.raises(ValueError, match="string"):
        resolve_template(3)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_extraction_with_a_template_equals_templated_texts(kind, tiny_model_dir, tmp_path):
    path = tiny_model_dir(kind)
    tok = load_tiny_tokenizer(path)
    templated = LayerExtractor(str(path), tok, batch_size=4, show_progress_bar=False, template="prompteol")
    plain = LayerExtractor(str(path), tok, batch_size=4, show_progress_bar=False)
    ours = templated.extract(TEXTS)
    by_hand = plain.extract(_by_hand(TEXTS, PROMPTEOL))
    np.testing.assert_array_equal(ours.states, by_hand.states)
    np.testing.assert_array_equal(ours.embeddings, by_hand.embeddings)
    assert not np.allclose(ours.states[-1], plain.extract(TEXTS).states[-1])
    assert templated.describe()["template"] == PROMPTEOL and plain.describe()["template"] is None


def test_sentence_transformer_template_equals_encode_of_templated_texts(tiny_st_dir):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_st_dir), device="cpu")
    template = "the {text} and"
    result = LayerExtractor(model, batch_size=4, show_progress_bar=False, template=template).extract(TEXTS)
    np.testing.assert_array_equal(result.embeddings, model.encode(_by_hand(TEXTS, template), batch_size=4))


def test_the_template_is_part_of_the_cache_key(tiny_model_dir, tmp_path):
    path = tiny_model_dir("llama")
    tok = load_tiny_tokenizer(path)

    def extract(template):
        extractor = LayerExtractor(
            str(path), tok, cache_dir=str(tmp_path), show_progress_bar=False, template=template
        )
        return extractor.extract(TEXTS)

    a, b, again = extract(None), extract("prompteol"), extract(None)
    assert len(list(tmp_path.rglob("*.npz"))) == 2  # the template's own shard; no template reuses
    assert not np.allclose(a.states, b.states)
    np.testing.assert_array_equal(a.states, again.states)


def test_bad_template_fails_when_the_extractor_is_built(tiny_model_dir):
    path = tiny_model_dir("llama")
    with pytest.raises(ValueError, match="exactly once"):
        LayerExtractor(str(path), load_tiny_tokenizer(path), template="no slot")


def test_wrapper_scores_and_measures_the_templated_texts(tiny_model_dir):
    """``with_layer_dynamics(template=...)`` scores a decoder exactly as the bare decoder scores a task
    whose texts were put into the template by hand, and its layer dynamics are those texts'."""
    path = tiny_model_dir("llama")
    tok = load_tiny_tokenizer(path)
    run = {"cache": None, "co2_tracker": False, "show_progress_bar": False}
    options = {"per_layer": True, "frenet_cap": 16, "nrs_cap": 16, "gfmi_cap": 16, "nrs_k": 3, "gfmi_k": 3}
    templated = with_layer_dynamics(str(path), tokenizer=tok, template="prompteol", **options)
    bare = with_layer_dynamics(str(path), tokenizer=tok, **options)
    ours = mteb.evaluate(templated, [sts_task(TEXTS, "TinySTS")], **run).task_results[0]
    by_hand = mteb.evaluate(bare, [sts_task(_by_hand(TEXTS, PROMPTEOL), "TinySTS")], **run).task_results[0]
    a, b = ours.scores["test"][0], by_hand.scores["test"][0]
    assert a["main_score"] == pytest.approx(b["main_score"], abs=1e-12)
    assert a["layer_dynamics"]["summary"] == pytest.approx(b["layer_dynamics"]["summary"], nan_ok=True)
    assert a["per_layer"]["scores"] == pytest.approx(b["per_layer"]["scores"], nan_ok=True)
    assert a["layer_dynamics"]["template"] == PROMPTEOL and "template" not in b["layer_dynamics"]
    bare_scores = mteb.evaluate(bare, [sts_task(TEXTS, "TinySTS")], **run).task_results[0].scores["test"][0]
    assert bare_scores["main_score"] != pytest.approx(a["main_score"])
