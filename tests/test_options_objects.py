"""User-facing entry points take their keywords or the one options object they map onto."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mteb_lrd import ExtractionOptions, LayerDynamicsOptions, LayerExtractor, with_layer_dynamics
from tests.tiny_models import load_tiny_tokenizer

TEXTS = ["a cat sat on the mat", "dogs bark", "the weather is mild today", "one more sentence here"]


def test_an_options_object_extracts_exactly_as_its_keywords(tiny_model_dir):
    path = tiny_model_dir("bert")
    tokenizer = load_tiny_tokenizer(path)
    keywords = {"pooling": "cls", "batch_size": 3, "max_length": 16, "show_progress_bar": False}
    by_keywords = LayerExtractor(str(path), tokenizer, **keywords)
    by_options = LayerExtractor(str(path), tokenizer, options=ExtractionOptions(**keywords))
    assert by_options.options == by_keywords.options == ExtractionOptions(**keywords)
    assert (by_options.pooling, by_options.batch_size, by_options.max_length) == ("cls", 3, 16)
    np.testing.assert_array_equal(by_options.extract(TEXTS).states, by_keywords.extract(TEXTS).states)


def test_options_and_keywords_together_are_refused(tiny_model_dir):
    path = tiny_model_dir("bert")
    with pytest.raises(ValueError, match="not both.*batch_size"):
        LayerExtractor(str(path), load_tiny_tokenizer(path), batch_size=4, options=ExtractionOptions())
    with pytest.raises(TypeError, match="ExtractionOptions"):
        LayerExtractor(str(path), load_tiny_tokenizer(path), options={"batch_size": 4})


@settings(max_examples=40, deadline=None)
@given(
    field=st.sampled_from(["batch_size", "max_length", "shard_size"]),
    value=st.one_of(st.integers(max_value=0), st.booleans(), st.floats(allow_nan=True), st.text(max_size=3)),
)
def test_bad_sizes_name_their_field(field, value):
    with pytest.raises(ValueError, match=field):
        ExtractionOptions(**{field: value})


@settings(max_examples=40, deadline=None)
@given(
    field=st.sampled_from(["pooling", "last_token", "final_norm", "pooling_overrides"]),
    value=st.text(max_size=8).filter(
        lambda v: v not in {"auto", "mean", "cls", "last", "true", "reference", "as_is", "all", "none"}
    ),  # fmt: skip
)
def test_bad_choices_name_their_field(field, value):
    with pytest.raises(ValueError, match=field):
        ExtractionOptions(**{field: value})


def test_reference_overrides_resolve_to_the_authors_table_and_bad_templates_fail_early():
    from mteb_lrd.extraction.pooling import REFERENCE_POOLING_OVERRIDES

    assert ExtractionOptions(pooling_overrides="reference").pooling_overrides == REFERENCE_POOLING_OVERRIDES
    with pytest.raises(ValueError, match="template"):
        ExtractionOptions(template="no placeholder")
    with pytest.raises(ValueError, match="dtype"):
        ExtractionOptions(dtype="float8")


def test_with_layer_dynamics_takes_its_options_object_or_its_fields(tiny_st_dir):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_st_dir))
    by_fields = with_layer_dynamics(model, frenet_cap=7, per_layer=False, seed=3)
    by_object = with_layer_dynamics(
        model, options=LayerDynamicsOptions(frenet_cap=7, per_layer=False, seed=3)
    )
    assert (
        by_object.options == by_fields.options == LayerDynamicsOptions(frenet_cap=7, per_layer=False, seed=3)
    )
    assert by_object.extractor.options == by_fields.extractor.options
    with pytest.raises(ValueError, match=r"not both.*seed"):
        with_layer_dynamics(model, options=LayerDynamicsOptions(), seed=1)


def test_prune_takes_its_options_object_or_its_keywords(tmp_path, texts):
    from sentence_transformers import SentenceTransformer

    from mteb_lrd import prune, pruning_record
    from mteb_lrd.pruning.options import PruneOptions
    from tests.tiny_models import build_tiny_sentence_transformer

    model = SentenceTransformer(
        str(build_tiny_sentence_transformer(tmp_path / "st8", num_layers=8)), device="cpu"
    )
    by_keywords = prune(model, rule="nrs", budget=0.5, texts=texts, name="org/base")
    by_options = prune(model, options=PruneOptions(rule="nrs", budget=0.5, texts=texts, name="org/base"))
    assert pruning_record(by_options) == pruning_record(by_keywords)
    assert pruning_record(by_options)["base_model"] == "org/base"
    np.testing.assert_array_equal(by_options.encode(TEXTS), by_keywords.encode(TEXTS))
    with pytest.raises(ValueError, match="not both.*blocks"):
        prune(model, [1], options=PruneOptions(blocks=(2,)))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "give blocks"),
        ({"rule": "nrs"}, "give blocks"),
        ({"rule": "nrs", "budget": 0}, "budget must be a fraction"),
        ({"rule": "nrs", "budget": True}, "budget must be a fraction"),
        ({"rule": " ", "blocks": [1]}, "rule must be a non-empty string"),
        ({"blocks": [1], "mapping": "middle"}, "mapping must be one of"),
        ({"blocks": "12"}, "blocks must be a sequence"),
        ({"rule": "nrs", "budget": 0.5, "texts": "one text"}, "texts must be a sequence"),
    ],
)
def test_bad_prune_options_are_named(kwargs, message):
    from mteb_lrd.pruning.options import PruneOptions

    with pytest.raises(ValueError, match=message):
        PruneOptions(**kwargs)


def test_the_dysem_extractor_takes_its_options_object_or_its_keywords(tiny_model_dir):
    from mteb_lrd.dysem.representation import RepresentationExtractor
    from mteb_lrd.dysem.representation_options import RepresentationOptions

    path = tiny_model_dir("llama")
    tokenizer = load_tiny_tokenizer(path)
    by_keywords = RepresentationExtractor(
        str(path), tokenizer, batch_size=3, max_length=12, prefetch=("hidden",)
    )
    by_options = RepresentationExtractor(
        str(path), tokenizer, options=RepresentationOptions(batch_size=3, max_length=12, prefetch=("hidden",))
    )
    assert by_options.options == by_keywords.options
    assert (by_options.batch_size, by_options.max_length) == (3, 12)
    assert by_options.identity == by_keywords.identity
    with pytest.raises(ValueError, match="not both.*batch_size"):
        RepresentationExtractor(str(path), tokenizer, batch_size=4, options=RepresentationOptions())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"max_length": 1}, "max_length"),
        ({"checkpoint_texts": True}, "checkpoint"),
        ({"dtype": "float16"}, "dtype"),
        ({"prefetch": "hidden"}, "prefetch"),
    ],  # fmt: skip
)
def test_bad_dysem_options_are_named(kwargs, message):
    from mteb_lrd.dysem.representation_options import RepresentationOptions

    with pytest.raises(ValueError, match=message):
        RepresentationOptions(**kwargs)


def test_the_training_evaluator_takes_its_options_object_or_its_keywords():
    from mteb_lrd import EvaluatorOptions, LayerDynamicsEvaluator

    texts = ["one text", "a second text", "and a third one", "a fourth"]
    by_keywords = LayerDynamicsEvaluator(texts, name="dev", seed=3, summaries=["frenet_d0L"], write_csv=False)
    chosen = EvaluatorOptions(name="dev", seed=3, summaries=["frenet_d0L"], write_csv=False)
    by_object = LayerDynamicsEvaluator(texts, options=chosen)
    settings = ("name", "seed", "summaries", "write_csv", "caps", "params", "batch_size", "bootstrap")
    assert all(getattr(by_object, s) == getattr(by_keywords, s) for s in settings)
    with pytest.raises(ValueError, match=r"not both.*seed"):
        LayerDynamicsEvaluator(texts, options=chosen, seed=4)
    for bad, message in (({"batch_size": 0}, "batch_size"), ({"bootstrap": -1}, "bootstrap"),
                         ({"summaries": ["d1L"]}, "unknown summaries")):  # fmt: skip
        with pytest.raises(ValueError, match=message):
            EvaluatorOptions(**bad)
