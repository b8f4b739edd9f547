"""The layer-dynamics wrapper inside unmodified ``mteb.evaluate`` runs (tiny models, in-memory tasks)."""

from __future__ import annotations

import json
import math
import warnings

import mteb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sentence_transformers import SentenceTransformer

from mteb_lrd import with_layer_dynamics
from mteb_lrd.adapter.options import LayerDynamicsOptions
from mteb_lrd.extraction.extractor import extract_layer_states
from mteb_lrd.metrics import frenet, subsample
from tests.mteb_helpers import classification_task, pair_task, retrieval_task, sts_task

RUN = {"co2_tracker": False, "show_progress_bar": False}


def _count_forwards(model):
    counter = {"n": 0}

    def hook(*_):
        counter["n"] += 1

    # sentence-transformers calls ``model.forward`` directly (no module hooks): count the embedding layer,
    # which runs exactly once per forward pass.
    handle = model[0].auto_model.embeddings.register_forward_hook(hook)
    return counter, handle


def _result_file(cache, task_name):
    files = list(cache.cache_path.rglob(f"{task_name}.json"))
    assert len(files) == 1, files
    return json.loads(files[0].read_text())


@pytest.mark.parametrize("make_task", [sts_task, classification_task])
def test_wrapper_writes_both_keys_same_scores_one_forward_per_batch(make_task, tiny_st, tmp_path):
    task = make_task()
    encode_kwargs = {"batch_size": 4}
    counter, handle = _count_forwards(tiny_st)
    plain = mteb.evaluate(tiny_st, [task], cache=None, encode_kwargs=dict(encode_kwargs), **RUN)
    plain_forwards, counter["n"] = counter["n"], 0
    cache = mteb.ResultCache(tmp_path / "cache")
    wrapped = with_layer_dynamics(tiny_st)
    mteb.evaluate(wrapped, [task], cache=cache, encode_kwargs=dict(encode_kwargs), **RUN)
    handle.remove()
    # one forward per batch: exactly the plain run's count (per-layer scores come from the cache)
    assert counter["n"] == plain_forwards
    if task.metadata.type == "STS":
        assert plain_forwards == 2 * math.ceil(16 / 4)  # two columns of 16 sentences, batch_size honoured

    row = _result_file(cache, task.metadata.name)["scores"]["test"][0]
    expected = plain.task_results[0].scores["test"][0]["main_score"]
    assert row["main_score"] == pytest.approx(expected, abs=1e-6)  # the file is rounded to 6 digits
    per_layer = row["per_layer"]
    assert per_layer["layers"] == [0, 1, 2, 3, 4] and len(per_layer["scores"]) == 5
    assert per_layer["main_score"] == task.metadata.main_score
    dynamics = row["layer_dynamics"]
    assert len(dynamics["frenet"]["speed"]) == 4 and len(dynamics["gfmi"]["auc"]) == 5
    assert next(iter(dynamics["summary"])) == "frenet_d0L"
    assert dynamics["n_texts"] == 16 and dynamics["n_dropped"] == 0
    assert dynamics["caps"] == {"frenet": 1000, "nrs": 1000, "gfmi": 5000}
    assert dynamics["pooling"].endswith("mean")


def test_layer_dynamics_follow_texts_rule_and_caps(tiny_st, texts):
    """STS: unique sentences of both columns in first-appearance order, capped with the seed-42 rule."""
    task = sts_task()
    wrapped = with_layer_dynamics(tiny_st, frenet_cap=7, nrs_cap=9, gfmi_cap=11, per_layer=False)
    result = mteb.evaluate(wrapped, [task], cache=None, **RUN)
    row = result.task_results[0].scores["test"][0]
    assert "per_layer" not in row
    task.load_data()
    data = task.dataset["default"]["test"]
    unique = list(dict.fromkeys(list(data["sentence1"]) + list(data["sentence2"])))
    states = extract_layer_states(tiny_st, unique, show_progress_bar=False).states
    expected = frenet(states[:, subsample(len(unique), 7)])
    dynamics = row["layer_dynamics"]
    assert dynamics["n_used"] == {"frenet": 7, "nrs": 9, "gfmi": 11}
    np.testing.assert_allclose(dynamics["frenet"]["speed"], expected.speed, atol=1e-5)
    assert dynamics["frenet"]["d0L"] == pytest.approx(expected.d0L, abs=1e-5)
    assert dynamics["params"]["nrs_k"] == 8 and dynamics["params"]["gfmi_k"] == 10  # clamped to N - 1


def test_classification_layer_dynamics_use_the_evaluation_split_only(tiny_st, texts):
    """A classification task also encodes its training split (each layer's classifier is trained on
    it); the layer dynamics measure the evaluation split's texts, as the texts rule says."""
    from mteb_lrd.tasks.local_tasks import make_task

    train = [{"text": f"{t} indeed", "label": i % 2} for i, t in enumerate(texts[:16])]
    test = [{"text": t, "label": i % 2} for i, t in enumerate(texts[:16])]
    task = make_task("Classification", "TinySplitClassification", lambda: {"default": {"train": train, "test": test}},
                     n_experiments=2, samples_per_label=4)()  # fmt: skip
    wrapped = with_layer_dynamics(tiny_st, frenet_cap=None, nrs_cap=None, gfmi_cap=None)
    row = mteb.evaluate(wrapped, [task], cache=None, **RUN).task_results[0].scores["test"][0]
    assert row["layer_dynamics"]["n_texts"] == 16
    states = extract_layer_states(tiny_st, texts[:16], show_progress_bar=False).states
    assert row["layer_dynamics"]["frenet"]["d0L"] == pytest.approx(frenet(states).d0L, abs=1e-5)
    assert len(row["per_layer"]["scores"]) == states.shape[0]  # per-layer classifiers still trained


def test_repeated_texts_are_encoded_as_the_plain_run_encodes_them(tiny_st, texts):
    """A column that repeats sentences is encoded row by row, in the batches of a plain run (encoding
    each distinct text once changed the batches, hence the last bits of the scores); the layer
    dynamics count each distinct text once."""
    repeated = [texts[i % 5] for i in range(16)]  # 5 distinct sentences per column, 16 rows
    task = sts_task(repeated, name="TinyRepeatedSTS")
    plain = mteb.evaluate(tiny_st, [task], cache=None, **RUN).task_results[0].scores["test"][0]
    encoded: list[int] = []
    handle = tiny_st[0].auto_model.embeddings.register_forward_hook(
        lambda _module, _args, out: encoded.append(out.shape[0])  # (batch, tokens, d)
    )
    wrapped = with_layer_dynamics(tiny_st, per_layer=False)
    row = mteb.evaluate(wrapped, [task], cache=None, **RUN).task_results[0].scores["test"][0]
    handle.remove()
    task.load_data()
    data = task.dataset["default"]["test"]
    assert sum(encoded) == 2 * len(data)  # every row of both columns, as the plain run
    assert row["main_score"] == plain["main_score"]
    unique = list(dict.fromkeys(list(data["sentence1"]) + list(data["sentence2"])))
    expected = frenet(extract_layer_states(tiny_st, unique, show_progress_bar=False).states)
    assert row["layer_dynamics"]["n_texts"] == len(unique)
    assert row["layer_dynamics"]["frenet"]["d0L"] == pytest.approx(expected.d0L, abs=1e-5)


@pytest.mark.parametrize("make_task", [pair_task, retrieval_task])
def test_pair_and_retrieval_tasks(make_task, tiny_st):
    task = make_task()
    plain = mteb.evaluate(tiny_st, [task], cache=None, **RUN).task_results[0].scores["test"][0]
    row = (
        mteb.evaluate(with_layer_dynamics(tiny_st), [task], cache=None, **RUN)
        .task_results[0]
        .scores["test"][0]
    )
    assert row["main_score"] == plain["main_score"]
    assert len(row["per_layer"]["scores"]) == 5
    # retrieval: corpus documents only (16), not the 8 queries
    assert row["layer_dynamics"]["n_texts"] == 16


def test_rerun_on_plain_cache_adds_missing_keys(tiny_st, tmp_path):
    cache = mteb.ResultCache(tmp_path / "cache")
    task = sts_task()
    mteb.evaluate(tiny_st, [task], cache=cache, **RUN)
    assert "layer_dynamics" not in _result_file(cache, task.metadata.name)["scores"]["test"][0]
    mteb.evaluate(with_layer_dynamics(tiny_st), [task], cache=cache, **RUN)
    row = _result_file(cache, task.metadata.name)["scores"]["test"][0]
    assert "layer_dynamics" in row and "per_layer" in row
    # and a plain run on that cache still skips (the plugin does not affect other models)
    counter, handle = _count_forwards(tiny_st)
    mteb.evaluate(tiny_st, [task], cache=cache, **RUN)
    handle.remove()
    assert counter["n"] == 0


def test_mock_run_passes_and_unsupported_types_are_named(tiny_st):
    wrapped = with_layer_dynamics(tiny_st)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = mteb.mock_run(wrapped)
    assert results.all_passed
    sts_row = results["MockSTSTask"].scores["test"][0]
    assert "layer_dynamics" in sts_row and "per_layer" in sts_row
    assert "layer_dynamics" not in results["MockBitextMiningTask"].scores["test"][0]
    messages = [str(w.message) for w in caught if "mteb-lrd" in str(w.message)]
    assert any("MockBitextMiningTask" in m and "BitextMining" in m for m in messages)


def test_plain_transformers_decoder(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    from tests.tiny_models import load_tiny_tokenizer

    path = tiny_model_dir("qwen2")
    model = AutoModelForCausalLM.from_pretrained(str(path))
    wrapped = with_layer_dynamics(model, tokenizer=load_tiny_tokenizer(path), name="tiny/qwen2")
    row = mteb.evaluate(wrapped, [sts_task()], cache=None, **RUN).task_results[0].scores["test"][0]
    assert row["layer_dynamics"]["pooling"] == "last" and row["layer_dynamics"]["final_norm"] == "as_is"
    assert len(row["per_layer"]["scores"]) == 5


def test_unknown_option_is_a_clear_error(tiny_st):
    with pytest.raises(ValueError, match="unknown options.*allowed"):
        with_layer_dynamics(tiny_st, frenet_caps=10)


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.integers(-5, 2), st.floats(allow_nan=True), st.booleans(), st.text(max_size=2)))
def test_bad_caps_rejected(cap):
    with pytest.raises(ValueError, match="frenet_cap"):
        LayerDynamicsOptions(frenet_cap=cap)


def test_prompts_match_a_plain_run(tiny_st_dir):
    """A model with query / document prompts: the wrapper prepends the same prompts as mteb's own wrapper."""
    model = SentenceTransformer(str(tiny_st_dir), device="cpu", prompts={"query": "the ", "document": "a "})
    task = retrieval_task()
    plain = mteb.evaluate(model, [task], cache=None, **RUN).task_results[0].scores["test"][0]
    wrapped = with_layer_dynamics(model)
    row = mteb.evaluate(wrapped, [task], cache=None, **RUN).task_results[0].scores["test"][0]
    assert row["main_score"] == plain["main_score"]
    assert row["layer_dynamics"]["prompt"] == "a "  # corpus documents carry the document prompt
    no_prompt = mteb.evaluate(SentenceTransformer(str(tiny_st_dir), device="cpu"), [task], cache=None, **RUN)
    assert (
        no_prompt.task_results[0].scores["test"][0]["ndcg_at_10"] != plain["ndcg_at_10"]
    )  # prompts matter here
