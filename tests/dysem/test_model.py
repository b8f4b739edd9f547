"""DySem and the baselines as MTEB models, end to end through ``mteb.evaluate`` on an in-memory STS task."""

from __future__ import annotations

import json

import mteb
import numpy as np
import pytest
from scipy.stats import spearmanr

from mteb_lrd.dysem import (
    DySemModel,
    ParallelCorpus,
    RepresentationExtractor,
    attention_sum_baseline,
    consensus_mask,
    dynamic_similarity,
    mean_pooling_baseline,
    model_similarity_task,
    prompteol_baseline,
)
from mteb_lrd.dysem.evaluation import (
    evaluate_models,
    format_comparisons,
    paired_comparisons,
    predictions_folder,
    read_similarities,
)
from mteb_lrd.dysem.prompts import apply_prompt
from mteb_lrd.tasks.local_tasks import make_task
from tests.tiny_models import TEXTS, load_tiny_tokenizer

# "German" and "French" stand-ins the tiny vocabulary can read: other sentences of the same list.
DE = TEXTS[3:] + TEXTS[:3]
FR = TEXTS[7:] + TEXTS[:7]
PAIRS = [(TEXTS[i], TEXTS[(i * 5 + 3) % 16], float((i * 7) % 6)) for i in range(16)]


@pytest.fixture(scope="module")
def extractor(tiny_model_dir):
    path = tiny_model_dir("llama")
    return RepresentationExtractor(path, load_tiny_tokenizer(path), batch_size=8, device="cpu")


@pytest.fixture(scope="module")
def corpus():
    return ParallelCorpus({"en": TEXTS, "de": DE, "fr": FR})


@pytest.fixture
def sts_task():
    rows = [{"sentence1": a, "sentence2": b, "score": s} for a, b, s in PAIRS]
    return make_task("STS", "DySemTinySTS", lambda: {"default": {"test": rows}})


def manual_reps(extractor, texts, lang_texts):
    source = extractor.extract(apply_prompt(texts, "EP"), ["attention"])["attention"]
    stack = np.stack(
        [extractor.extract(apply_prompt(t, "EP"), ["attention"])["attention"] for t in lang_texts]
    )
    return source, stack


def test_encode_packs_value_vectors_and_consensus_masks(extractor, corpus):
    model = DySemModel(extractor, languages=["de", "fr"], k=5, value="source", translations=corpus)
    packed = model.encode_texts(TEXTS[:6])
    d = extractor.hidden_size
    source, stack = manual_reps(extractor, TEXTS[:6], [DE[:6], FR[:6]])
    assert packed.shape == (6, 2 * d)
    np.testing.assert_array_equal(packed[:, :d], source)
    np.testing.assert_array_equal(packed[:, d:] > 0.5, consensus_mask(stack))
    mean_model = DySemModel(extractor, languages=["de", "fr"], k=5, value="mean", translations=corpus)
    np.testing.assert_allclose(mean_model.encode_texts(TEXTS[:6])[:, :d], stack.mean(0), rtol=1e-6)


def test_mteb_evaluate_scores_dysem_and_records_dimensions(extractor, corpus, sts_task, tmp_path):
    model = DySemModel(extractor, languages=["en", "de", "fr"], num_languages=2, k=6, translations=corpus)
    result = mteb.evaluate(
        model,
        [model_similarity_task(sts_task())],
        cache=mteb.ResultCache(tmp_path),
        overwrite_strategy="always",
        co2_tracker=False,
        show_progress_bar=False,
    )
    scores = result.task_results[0].scores["test"][0]
    s1, s2, gold = zip(*PAIRS, strict=True)
    src1, stack1 = manual_reps(extractor, list(s1), [list(s1), [DE[TEXTS.index(t)] for t in s1]])
    src2, stack2 = manual_reps(extractor, list(s2), [list(s2), [DE[TEXTS.index(t)] for t in s2]])
    sims, sizes = dynamic_similarity(src1, src2, consensus_mask(stack1), consensus_mask(stack2), 6)
    assert scores["main_score"] == pytest.approx(spearmanr(sims, gold)[0], abs=1e-6)
    assert scores["spearman"] == scores["main_score"]
    assert scores["mean_dimensions"] == pytest.approx(sizes.mean())
    files = list(tmp_path.rglob("DySemTinySTS.json"))
    assert len(files) == 1 and "experiments" in files[0].parts  # settings stored as an mteb experiment
    assert json.loads(files[0].read_text())["scores"]["test"][0]["mean_dimensions"] == pytest.approx(
        sizes.mean()
    )


def test_each_translation_source_is_its_own_experiment(extractor, corpus):
    """Other translations give other vectors: the mteb experiment (the results folder) must differ."""
    from mteb_lrd.dysem.translation import ParallelCorpus

    other = ParallelCorpus({"en": TEXTS, "de": FR, "fr": DE}, name="swapped")

    def experiment(translations):
        model = DySemModel(extractor, languages=["en", "de"], k=6, translations=translations)
        return model.mteb_model_meta.experiment_kwargs

    assert experiment(corpus) == experiment(corpus)
    assert experiment(corpus)["translations"] != experiment(other)["translations"]
    assert "translations" not in experiment(None)


@pytest.mark.parametrize("build", [prompteol_baseline, attention_sum_baseline, mean_pooling_baseline])
def test_baselines_score_cosine_and_report_full_dimension(extractor, sts_task, build):
    model = build(extractor)
    result = mteb.evaluate(
        model, [model_similarity_task(sts_task())], cache=None, co2_tracker=False, show_progress_bar=False
    )
    scores = result.task_results[0].scores["test"][0]
    assert scores["main_score"] == pytest.approx(scores["cosine_spearman"], abs=1e-9)
    assert scores["mean_dimensions"] == extractor.hidden_size
    twice = model_similarity_task(model_similarity_task(sts_task()))  # wrapping again changes nothing
    again = mteb.evaluate(model, [twice], cache=None, co2_tracker=False, show_progress_bar=False)
    assert again.task_results[0].scores["test"][0]["main_score"] == scores["main_score"]


def test_similarity_matrix_matches_pairwise(extractor, corpus):
    model = DySemModel(extractor, languages=["en", "de"], k=4, translations=corpus)
    a, b = model.encode_texts(TEXTS[:5]), model.encode_texts(TEXTS[5:9])
    matrix = model.similarity(a, b)
    for i in range(5):
        np.testing.assert_allclose(
            matrix[i], model.similarity_pairwise(np.repeat(a[i : i + 1], 4, 0), b), atol=1e-6
        )


def test_missing_translations_and_bad_settings_are_explained(extractor):
    with pytest.raises(ValueError, match="needs German translations"):
        DySemModel(extractor, languages=["en", "de"]).encode_texts(TEXTS[:2])
    for kwargs, message in [
        ({"k": 0}, "k must be"),
        ({"value": "median"}, "value must be"),
        ({"num_languages": 3}, "num_languages"),
        ({"languages": ["en", "en"]}, "without repeats"),
        ({"prompt": "XP"}, "prompt must be"),
    ]:
        with pytest.raises(ValueError, match=message):
            DySemModel(extractor, **{"languages": ["en", "de"], **kwargs})


def test_encode_honours_the_mteb_batch_size(tiny_model_dir, sts_task):
    path = tiny_model_dir("qwen2")
    fresh = RepresentationExtractor(path, load_tiny_tokenizer(path), batch_size=64, device="cpu")
    mteb.evaluate(
        prompteol_baseline(fresh),
        [model_similarity_task(sts_task())],
        cache=None,
        encode_kwargs={"batch_size": 3},
        co2_tracker=False,
        show_progress_bar=False,
    )
    unique_1, unique_2 = (
        len({a for a, _, _ in PAIRS}),
        len({b for _, b, _ in PAIRS} - {a for a, _, _ in PAIRS}),
    )
    assert fresh.forward_batches == -(-unique_1 // 3) + -(-unique_2 // 3)
    assert fresh.batch_size == 64  # restored after the call


def test_language_specific_prompts_reach_the_model(tiny_model_dir, corpus):
    path = tiny_model_dir("llama")
    fresh = RepresentationExtractor(path, load_tiny_tokenizer(path), device="cpu")
    DySemModel(fresh, languages=["en", "de"], k=4, prompt="LP", translations=corpus).encode_texts(TEXTS[:4])
    passes = fresh.forward_texts
    fresh.extract(apply_prompt(DE[:4], "LP", "de"), ["attention"])  # the German prompt was the one used
    fresh.extract(apply_prompt(TEXTS[:4], "LP", "en"), ["attention"])
    assert fresh.forward_texts == passes == 8


def test_paired_comparisons_read_what_evaluate_models_saved(extractor, corpus, sts_task, tmp_path):
    """The per-pair similarities mteb saves reproduce each model's score, and the paired difference
    is the difference of the two scores in the table."""
    dysem = DySemModel(extractor, languages=["en", "de"], num_languages=2, k=6, translations=corpus)
    models = {
        "DySem (k=6, L=2)": lambda t: dysem,
        "attention sum (dense)": lambda t: attention_sum_baseline(extractor),
    }
    task_cls = sts_task
    table = evaluate_models(models, {"Tiny": task_cls}, None, predictions_dir=tmp_path / "pred")
    gold = [s for _, _, s in PAIRS]
    for label in models:
        saved = read_similarities(tmp_path / "pred", label, task_cls())
        assert (predictions_folder(tmp_path / "pred", label) / "DySemTinySTS_predictions.json").is_file()
        assert 100 * spearmanr(saved, gold)[0] == pytest.approx(table[label]["Tiny"]["spearman"], abs=1e-6)
    paired = paired_comparisons(
        tmp_path / "pred",
        "DySem (k=6, L=2)",
        ["attention sum (dense)", "not run"],
        {"Tiny": (task_cls, gold)},
    )
    row = paired["Tiny"]["attention sum (dense)"]
    expected = (
        table["DySem (k=6, L=2)"]["Tiny"]["spearman"] - table["attention sum (dense)"]["Tiny"]["spearman"]
    )
    assert 100 * row["delta"] == pytest.approx(expected, abs=1e-6)
    assert row["ci_low"] <= row["delta"] <= row["ci_high"] and 0 < row["p"] <= 1 and row["n"] == len(PAIRS)
    assert list(paired["Tiny"]) == ["attention sum (dense)"]  # a model without predictions is left out
    text = format_comparisons("DySem (k=6, L=2)", paired)
    assert "| Tiny | attention sum (dense) |" in text and f"{expected:+.2f}" in text
    floor = {"Tiny": {"x": {**row, "p": 1 / row["n_resamples"]}}}
    assert "| ≤ 0.0005 |" in format_comparisons("DySem", floor)  # bootstrap p at its resolution


def test_a_torn_predictions_file_from_a_killed_run_is_replaced(extractor, sts_task, tmp_path):
    models = {"dense": lambda t: attention_sum_baseline(extractor)}
    torn = predictions_folder(tmp_path, "dense") / "DySemTinySTS_predictions.json"
    torn.parent.mkdir(parents=True)
    torn.write_text('{"mteb_model_meta": {"model_na')  # mteb writes it in place, not atomically
    table = evaluate_models(models, {"Tiny": sts_task}, None, predictions_dir=tmp_path)
    saved = read_similarities(tmp_path, "dense", sts_task())
    gold = [s for _, _, s in PAIRS]
    assert 100 * spearmanr(saved, gold)[0] == pytest.approx(table["dense"]["Tiny"]["spearman"], abs=1e-6)
