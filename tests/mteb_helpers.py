"""In-memory MTEB tasks for the integration tests (built with mteb_lrd.integration.local_tasks.make_task)."""

from __future__ import annotations

from mteb_lrd.integration.local_tasks import make_task
from tests.tiny_models import TEXTS

__all__ = ["classification_task", "pair_task", "retrieval_task", "sts_task"]


def sts_task(texts: list[str] = TEXTS, name: str = "TinySTS"):
    """16 STS pairs over the tiny vocabulary (scores vary so Spearman is defined)."""
    pairs = [
        {"sentence1": texts[i], "sentence2": texts[(i * 5 + 3) % len(texts)], "score": float((i * 7) % 6)}
        for i in range(len(texts))
    ]
    return make_task("STS", name, lambda: {"default": {"test": pairs}})()


def classification_task(texts: list[str] = TEXTS, name: str = "TinyClassification"):
    rows = [{"text": t, "label": i % 2} for i, t in enumerate(texts)]
    return make_task(
        "Classification",
        name,
        lambda: {"default": {"train": rows, "test": rows[::-1]}},
        n_experiments=2,
        samples_per_label=4,
    )()


def pair_task(texts: list[str] = TEXTS, name: str = "TinyPairs"):
    rows = [
        {"sentence1": texts[i], "sentence2": texts[(i + 1) % len(texts)], "label": i % 2}
        for i in range(len(texts))
    ]
    return make_task("PairClassification", name, lambda: {"default": {"test": rows}})()


def retrieval_task(texts: list[str] = TEXTS, name: str = "TinyRetrieval"):
    corpus = [{"id": f"d{i}", "text": t} for i, t in enumerate(texts)]
    queries = [{"id": f"q{i}", "text": texts[i].split()[-1]} for i in range(0, len(texts), 2)]
    qrels = [{"query_id": f"q{i}", "corpus_id": f"d{i}", "score": 1} for i in range(0, len(texts), 2)]
    return make_task(
        "Retrieval",
        name,
        lambda: {"default": {"test": {"corpus": corpus, "queries": queries, "qrels": qrels}}},
    )()
