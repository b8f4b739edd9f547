"""The sentence-transformers evaluator: values equal to lrd() and a loop, trainer logs, CSV, card, state."""

from __future__ import annotations

import csv
import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from mteb_lrd import LayerDynamicsEvaluator, MetricParams, extract_layer_states, lrd
from mteb_lrd.parameters import Caps
from tests.tiny_models import WORDS

PARAMS = MetricParams(nrs_k=4, gfmi_k=4, n_anchors=10)
CAPS = Caps(1000, 1000, 1000)


def _sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) for _ in range(n)]


@pytest.fixture
def pairs():
    one, two = _sentences(24, 1), _sentences(24, 2)
    gold = [float(s) for s in np.random.default_rng(3).uniform(0, 5, size=24)]
    return one, two, gold


@pytest.fixture
def model(tiny_st_dir):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(tiny_st_dir), device="cpu")


def test_lrd_scores_equal_lrd_on_the_same_states(model):
    texts = _sentences(30, 0)
    evaluator = LayerDynamicsEvaluator(texts, caps=CAPS, params=PARAMS, summaries="all", write_csv=False)
    metrics = evaluator(model)
    expected = lrd(
        extract_layer_states(model, texts, show_progress_bar=False).states, params=PARAMS
    ).summary()
    assert set(metrics) == set(expected)
    for key, value in expected.items():
        assert metrics[key] == pytest.approx(value, rel=1e-9, abs=1e-12, nan_ok=True), key
    assert evaluator.primary_metric == "frenet_d0L" and evaluator.greater_is_better


def test_sts_metrics_equal_a_per_layer_loop_and_the_stock_evaluator(model, pairs):
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    one, two, gold = pairs
    evaluator = LayerDynamicsEvaluator(
        None, one, two, gold, name="dev", caps=CAPS, params=PARAMS, write_csv=False
    )
    metrics = evaluator(model)
    stock = EmbeddingSimilarityEvaluator(one, two, gold, name="dev", write_csv=False)(model)
    assert metrics["dev_spearman_cosine"] == pytest.approx(stock["dev_spearman_cosine"], abs=1e-6)
    left = extract_layer_states(model, one, show_progress_bar=False).states
    right = extract_layer_states(model, two, show_progress_bar=False).states
    for layer in range(left.shape[0]):  # the straightforward way: one layer, one pair at a time
        cosines = [
            float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
            for a, b in zip(left[layer], right[layer], strict=True)
        ]
        expected = stats.spearmanr(gold, cosines).statistic
        assert metrics[f"dev_spearman_cosine_h{layer}"] == pytest.approx(expected, abs=1e-6)
    assert evaluator.primary_metric == "dev_spearman_cosine"
    # the model card gets the metrics (sentence-transformers' evaluation table)
    logged = model.model_card_data.eval_results_dict[evaluator]
    assert logged["dev_frenet_d0L"] == metrics["dev_frenet_d0L"]


def test_the_model_is_left_as_it_was(model, pairs):
    model.train()
    model[0].auto_model.encoder.layer[0].eval()  # a mixed state is kept exactly
    modes = [m.training for m in model.modules()]
    weight = model[0].auto_model.embeddings.word_embeddings.weight
    weight.grad = torch.full_like(weight, 0.5)
    frozen = model[0].auto_model.encoder.layer[1].attention.self.query.weight
    frozen.requires_grad_(False)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    LayerDynamicsEvaluator(None, *pairs, caps=CAPS, params=PARAMS, write_csv=False)(model)
    assert [m.training for m in model.modules()] == modes
    assert torch.equal(weight.grad, torch.full_like(weight, 0.5)) and not frozen.requires_grad
    assert all(p.requires_grad for n, p in model.named_parameters() if p is not frozen)
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name]) and p.device.type == "cpu", name


def test_one_csv_row_per_call_written_whole(model, pairs, tmp_path):
    evaluator = LayerDynamicsEvaluator(None, *pairs, name="dev", caps=CAPS, params=PARAMS)
    for steps in (5, 10):
        evaluator(model, output_path=str(tmp_path), epoch=0, steps=steps)
    with (tmp_path / "layer_dynamics_evaluation_dev_results.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["steps"] for r in rows] == ["5", "10"]
    assert "frenet_d0L" in rows[0] and "spearman_cosine_h0" in rows[0]
    other = LayerDynamicsEvaluator(_sentences(12, 5), name="dev", caps=CAPS, params=PARAMS)
    with pytest.raises(ValueError, match="other columns"):
        other(model, output_path=str(tmp_path))


def test_inside_the_trainer_the_metrics_reach_the_log_history_at_each_evaluation(model, pairs, tmp_path):
    pytest.importorskip("accelerate")
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.losses import CosineSimilarityLoss

    one, two, gold = pairs
    train = Dataset.from_dict({"sentence1": one, "sentence2": two, "score": [g / 5 for g in gold]})
    evaluator = LayerDynamicsEvaluator(None, one, two, gold, name="dev", caps=CAPS, params=PARAMS)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path), max_steps=4, per_device_train_batch_size=8, eval_strategy="steps",
        eval_steps=2, logging_steps=2, save_strategy="no", report_to="none", use_cpu=True, seed=0,
    )  # fmt: skip
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=train,
                                         loss=CosineSimilarityLoss(model), evaluator=evaluator)  # fmt: skip
    trainer.train()
    evaluations = [e for e in trainer.state.log_history if "eval_dev_frenet_d0L" in e]
    assert [e["step"] for e in evaluations] == [2, 4]
    assert all(np.isfinite(e["eval_dev_spearman_cosine_h0"]) for e in evaluations)
    (csv_file,) = tmp_path.rglob("layer_dynamics_evaluation_dev_results.csv")
    with csv_file.open() as fh:
        assert [row["steps"] for row in csv.DictReader(fh)] == ["2", "4"]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2), st.integers(0, 2))
def test_pairs_of_unequal_length_or_too_few_are_refused(extra_one, extra_two):
    one, two, gold = (
        ["a b", "c d", "e f"] + ["g"] * extra_one,
        ["h i", "j k", "l m"] + ["n"] * extra_two,
        [1.0, 2.0, 3.0],
    )
    if extra_one or extra_two:
        with pytest.raises(ValueError, match="differ in length"):
            LayerDynamicsEvaluator(None, one, two, gold)
    else:
        LayerDynamicsEvaluator(None, one, two, gold)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"texts": ["a", "b"]}, "at least 3 texts"),
        ({"sentences1": ["a"], "sentences2": ["b"]}, "together"),
        ({"sentences1": ["a", "b"], "sentences2": ["c", "d"], "scores": [1, 2]}, "at least 3 pairs"),
        (
            {"sentences1": ["a", "b", "c"], "sentences2": ["c", "d", "e"], "scores": [1, float("nan"), 2]},
            "finite",
        ),
        ({"texts": ["a", "b", "c"], "summaries": ["frenet_d0L", "d1L"]}, "unknown summaries"),
        ({"texts": ["a", "b", "c"], "summaries": []}, "unknown summaries"),
        ({"texts": ["a", "b", "c"], "bootstrap": 100}, "bootstrap needs STS pairs"),
        (
            {
                "sentences1": ["a", "b", "c"],
                "sentences2": ["c", "d", "e"],
                "scores": [1, 2, 3],
                "bootstrap": -5,
            },
            "bootstrap must be a positive integer",
        ),  # fmt: skip
    ],
)
def test_bad_input_is_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LayerDynamicsEvaluator(**kwargs)


def test_the_legacy_fit_runs_it_too(model, pairs, tmp_path):
    pytest.importorskip("accelerate")
    from sentence_transformers import InputExample
    from sentence_transformers.sentence_transformer.losses import CosineSimilarityLoss
    from torch.utils.data import DataLoader

    one, two, gold = pairs
    examples = [InputExample(texts=[a, b], label=g / 5) for a, b, g in zip(one, two, gold, strict=True)]
    evaluator = LayerDynamicsEvaluator(None, one, two, gold, name="dev", caps=CAPS, params=PARAMS)
    model.fit(train_objectives=[(DataLoader(examples, batch_size=8, shuffle=False), CosineSimilarityLoss(model))],
              evaluator=evaluator, epochs=1, evaluation_steps=2, output_path=str(tmp_path / "out"),
              checkpoint_path=str(tmp_path / "checkpoints"), show_progress_bar=False)  # fmt: skip
    (csv_file,) = (tmp_path / "out").rglob("layer_dynamics_evaluation_dev_results.csv")
    with csv_file.open() as fh:
        assert len(list(csv.DictReader(fh))) >= 1


def test_an_uninformative_h0_logs_nan_with_its_reason_once(tiny_st_dir, caplog):
    """A CLS-pooled model's h_0 is the CLS embedding, one vector for every text: the scores reading
    it are NaN, the summaries start at h_1, and the log says which state and why, once."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    backbone = Transformer(str(tiny_st_dir))
    cls = SentenceTransformer(modules=[backbone, Pooling(backbone.get_word_embedding_dimension(), "cls")])
    texts = _sentences(30, 0)
    evaluator = LayerDynamicsEvaluator(texts, caps=CAPS, params=PARAMS, summaries="all", write_csv=False)
    with caplog.at_level("WARNING", logger="mteb_lrd"):
        first, second = evaluator(cls), evaluator(cls)
    assert evaluator.last_result.frenet.first_state == 1
    states = extract_layer_states(cls, texts, show_progress_bar=False).states
    assert first["frenet_d0L"] == pytest.approx(lrd(states[1:], params=PARAMS).frenet.d0L, abs=1e-9)
    assert first == pytest.approx(second, nan_ok=True)
    messages = [r.getMessage() for r in caplog.records if "uninformative hidden states" in r.getMessage()]
    assert len(messages) == 1 and "h_0 one vector for all texts" in messages[0]


def test_the_bootstrap_band_of_spearman_cosine_goes_to_the_csv_only(model, pairs, tmp_path):
    from mteb_lrd.metrics.bootstrap import bootstrap_spearman

    one, two, gold = pairs
    evaluator = LayerDynamicsEvaluator(
        None, one, two, gold, name="dev", caps=CAPS, params=PARAMS, bootstrap=300
    )
    metrics = evaluator(model, output_path=str(tmp_path), epoch=0, steps=1)
    assert not any(key.endswith(("_low", "_high")) for key in metrics)  # not in the trainer's log
    with (tmp_path / "layer_dynamics_evaluation_dev_results.csv").open() as fh:
        row = next(csv.DictReader(fh))
    a, b = (model.encode(side, convert_to_numpy=True) for side in (one, two))
    cosine = np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    expected = bootstrap_spearman(cosine[None], np.asarray(gold), resamples=300)  # the report's draws
    assert float(row["spearman_cosine_low"]) == pytest.approx(expected.low[0], abs=1e-6)
    assert float(row["spearman_cosine_high"]) == pytest.approx(expected.high[0], abs=1e-6)
    assert (
        float(row["spearman_cosine_low"])
        <= float(row["spearman_cosine"])
        <= float(row["spearman_cosine_high"])
    )
