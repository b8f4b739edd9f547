"""Per-layer scoring does the layer-independent work once and stays exact.

A retrieval search is cut to the main score's cutoff (+ a tie margin) while the layers are scored:
the per-layer scores must still equal mteb's evaluator at full depth on each layer, also with tied
(duplicate) documents. mteb's dataloaders are built once per input for all layers, and the rebinding
is undone afterwards, also after an error.
"""

from __future__ import annotations

import random

import mteb
import mteb._create_dataloaders as dataloaders
import pytest
from datasets import Dataset

from mteb_lrd import _compat, with_layer_dynamics
from mteb_lrd.adapter.layer_scoring import (
    TIE_MARGIN,
    main_score_cutoff,
    main_score_only,
    reused_dataloaders,
    search_depth,
    texts_read_once,
)
from mteb_lrd.adapter.protocols import read_texts
from mteb_lrd.tasks.local_tasks import make_task
from tests.mteb_helpers import LayerEncoder, pair_task, sts_task
from tests.tiny_models import WORDS

RUN = {"co2_tracker": False, "show_progress_bar": False}


def deep_retrieval_task():
    """120 documents (every fifth one three times: exact ties), 24 queries with 1-3 relevant each."""
    draw = random.Random(0)
    texts = [" ".join(draw.choices(WORDS, k=draw.randint(3, 7))) for _ in range(100)]
    texts += [texts[i] for i in range(0, 100, 5)]  # duplicates under other ids
    corpus = [{"id": f"d{i:03d}", "text": t} for i, t in enumerate(texts)]
    queries = [{"id": f"q{i}", "text": " ".join(draw.choices(WORDS, k=3))} for i in range(24)]
    qrels = [
        {"query_id": f"q{i}", "corpus_id": f"d{j:03d}", "score": draw.randint(1, 2)}
        for i in range(24)
        for j in draw.sample(range(len(texts)), draw.randint(1, 3))
    ]
    data = {"corpus": corpus, "queries": queries, "qrels": qrels}
    return make_task("Retrieval", "TinyDeepRetrieval", lambda: {"default": {"test": data}})()


@pytest.mark.parametrize(
    ("name", "cutoff"),
    [("ndcg_at_10", 10), ("recall_at_100", 100), ("map_at_1000", 1000), ("mrr_at_5", 5),
     ("hit_rate_at_3", 3), ("ndcg", None), ("naucs_at_10_max", None), ("accuracy", None)],
)  # fmt: skip
def test_main_score_cutoff(name, cutoff):
    assert main_score_cutoff(name) == cutoff


def test_cut_search_keeps_every_layer_score_exact(tiny_st):
    wrapped = mteb.evaluate(with_layer_dynamics(tiny_st), [deep_retrieval_task()], cache=None, **RUN)
    row = wrapped.task_results[0].scores["test"][0]
    per_layer = row["per_layer"]
    assert per_layer["search_depth"] == 10 + TIE_MARGIN < 120
    assert per_layer["scores"][-1] == pytest.approx(row["main_score"], abs=1e-9)
    for layer, score in enumerate(per_layer["scores"]):
        full = mteb.evaluate(LayerEncoder(tiny_st, layer), [deep_retrieval_task()], cache=None, **RUN)
        assert score == pytest.approx(full.task_results[0].scores["test"][0]["main_score"], abs=1e-9), layer


def test_search_depth_is_restored_and_left_alone_without_a_cutoff():
    task = deep_retrieval_task()
    before = getattr(task, _compat.RETRIEVAL_TOP_K)  # canary: mteb still keeps the depth here
    assert before == 1000
    with search_depth(task) as depth:
        assert depth == getattr(task, _compat.RETRIEVAL_TOP_K) == 10 + TIE_MARGIN
    assert getattr(task, _compat.RETRIEVAL_TOP_K) == before
    with pytest.raises(KeyError), search_depth(task):
        raise KeyError("boom")
    assert getattr(task, _compat.RETRIEVAL_TOP_K) == before
    with search_depth(sts_task()) as depth:
        assert depth is None


@pytest.fixture
def counted(monkeypatch):
    """mteb's ``create_dataloader``, counted, wherever mteb calls it."""
    original, sites = _compat.dataloader_factory_sites()
    calls = []

    def counting(*args, **kwargs):
        calls.append(args[0])
        return original(*args, **kwargs)

    for module in [dataloaders, *sites]:
        monkeypatch.setattr(module, "create_dataloader", counting)
    return calls


@pytest.mark.parametrize(
    ("make", "rows"), [(pair_task, 16), (sts_task, 16), (deep_retrieval_task, 120), (deep_retrieval_task, 24)]
)
def test_dataloaders_are_built_once_for_all_layers(make, rows, tiny_st, counted):
    """Pair and STS inputs, a retrieval corpus (120 documents) and its queries (24; mteb re-filters
    them in place on every call, so each layer gets the ordinary run's split) are built for the
    ordinary run and once more for the first layer; later layers reuse them."""

    def built() -> int:
        return sum(len(dataset) == rows for dataset in counted)

    mteb.evaluate(tiny_st, [make()], cache=None, **RUN)
    plain = built()
    assert plain >= 1
    counted.clear()
    result = mteb.evaluate(with_layer_dynamics(tiny_st), [make()], cache=None, **RUN)
    assert len(result.task_results[0].scores["test"][0]["per_layer"]["scores"]) == 5
    assert built() == 2 * plain


def test_the_factory_is_restored_also_after_an_error():
    original, sites = _compat.dataloader_factory_sites()
    names = {module.__name__ for module in sites}
    assert {"mteb.models.search_wrappers", "mteb._evaluators.pair_classification_evaluator"} <= names
    with pytest.raises(RuntimeError), reused_dataloaders():
        assert all(module.create_dataloader is not original for module in sites)
        raise RuntimeError("boom")
    assert all(module.create_dataloader is original for module in sites)


def test_different_inputs_never_share_a_loader():
    texts = ["a dog runs fast", "the cat sat on the mat"]
    metadata = sts_task().metadata
    with reused_dataloaders():
        from mteb.models import search_wrappers

        first = search_wrappers.create_dataloader(Dataset.from_dict({"text": texts}), task_metadata=metadata)
        swapped = Dataset.from_dict({"text": texts[::-1]})
        other = search_wrappers.create_dataloader(swapped, task_metadata=metadata)
        again = search_wrappers.create_dataloader(swapped, task_metadata=metadata, batch_size=1)
    assert [t for b in first for t in b["text"]] == texts
    assert [t for b in other for t in b["text"]] == texts[::-1]
    assert again is not other and again.batch_size == 1


def test_abstention_is_computed_for_the_ordinary_run_only(tiny_st, monkeypatch):
    """The nAUC keys of the ordinary scores stay; the layers do not compute them again."""
    from mteb._evaluators import retrieval_metrics

    original, calls = retrieval_metrics.evaluate_abstention, []

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(retrieval_metrics, "evaluate_abstention", counting)
    plain = mteb.evaluate(tiny_st, [deep_retrieval_task()], cache=None, **RUN).task_results[0]
    per_run = len(calls)
    assert per_run >= 1
    wrapped = mteb.evaluate(with_layer_dynamics(tiny_st), [deep_retrieval_task()], cache=None, **RUN)
    assert len(calls) == 2 * per_run  # the ordinary run's, none for the 5 layers
    row, plain_row = wrapped.task_results[0].scores["test"][0], plain.scores["test"][0]
    naucs = {key for key in plain_row if key.startswith("nauc_")}
    assert naucs
    assert [row[key] for key in sorted(naucs)] == pytest.approx(
        [plain_row[key] for key in sorted(naucs)], nan_ok=True
    )
    assert retrieval_metrics.evaluate_abstention is counting  # restored


def test_main_score_only_is_scoped_and_keeps_an_nauc_main_score():
    from mteb._evaluators import retrieval_metrics

    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    results = {"q1": {"d1": 0.9, "d2": 0.5, "d3": 0.1}, "q2": {"d1": 0.8, "d2": 0.7, "d3": 0.2}}
    full = retrieval_metrics.calculate_retrieval_scores(results, qrels, [1, 3])
    assert full.naucs
    task = deep_retrieval_task()
    with main_score_only(task) as skipped:  # canary: mteb still looks the function up by name
        assert skipped
        cut = retrieval_metrics.calculate_retrieval_scores(results, qrels, [1, 3])
    assert cut.naucs == {} and cut.naucs_mrr == {} and cut.ndcg == full.ndcg
    with pytest.raises(KeyError), main_score_only(task):
        raise KeyError("boom")
    assert retrieval_metrics.calculate_retrieval_scores(results, qrels, [1, 3]).naucs == full.naucs
    task.metadata = task.metadata.model_copy(update={"main_score": "nauc_ndcg_at_10_max"})
    with main_score_only(task) as skipped:
        assert not skipped
        assert retrieval_metrics.calculate_retrieval_scores(results, qrels, [1, 3]).naucs == full.naucs


def test_each_dataloader_is_read_once_for_all_layers(tiny_st, monkeypatch):
    from mteb_lrd.adapter import layer_scoring

    reads = []

    def counting(inputs):
        reads.append(id(inputs))
        return read_texts(inputs)

    monkeypatch.setattr(layer_scoring, "read_texts", counting)
    result = mteb.evaluate(with_layer_dynamics(tiny_st), [sts_task()], cache=None, **RUN)
    assert len(result.task_results[0].scores["test"][0]["per_layer"]["scores"]) == 5
    assert len(reads) == len(set(reads)) == 2  # sentence1 and sentence2, not once per layer


def test_texts_read_once_only_remembers_sequential_loaders():
    from torch.utils.data import DataLoader

    rows = [{"text": t} for t in ["a", "b", "c", "d"]]
    texts = texts_read_once()
    loader = DataLoader(rows, batch_size=2)
    assert texts(loader) == ["a", "b", "c", "d"] and texts(loader) is texts(loader)
    shuffled = DataLoader(rows, batch_size=2, shuffle=True)
    assert texts(shuffled) is not texts(shuffled)  # re-read: another order each pass
    batches = [{"text": ["a", "b"]}, {"text": ["c"]}]
    assert texts(batches) == ["a", "b", "c"] and texts(batches) is not texts(batches)
