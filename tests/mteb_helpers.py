"""In-memory MTEB tasks for the integration tests (built with mteb_lrd.tasks.local_tasks.make_task)."""

from __future__ import annotations

from mteb.models import ModelMeta
from mteb.models.abs_encoder import AbsEncoder

from mteb_lrd.extraction.extractor import extract_layer_states
from mteb_lrd.tasks.local_tasks import make_task
from tests.tiny_models import TEXTS

__all__ = ["LayerEncoder", "classification_task", "pair_task", "retrieval_task", "sts_task"]


class LayerEncoder(AbsEncoder):
    """An independent encoder: the vectors of one layer, from a separate extraction of every text."""

    def __init__(self, model, layer: int) -> None:
        self.model, self.layer = model, layer
        self.mteb_model_meta = ModelMeta.create_empty(overwrites={"name": "test/layer", "revision": "1"})

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
        texts = [t for batch in inputs for t in batch["text"]]
        return extract_layer_states(self.model, texts, show_progress_bar=False).states[self.layer]


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
