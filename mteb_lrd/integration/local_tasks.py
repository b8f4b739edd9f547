"""MTEB tasks without the Hugging Face Hub: local JSON-lines folders and the shared STS data.

A task is a class (mteb's registry maps names to classes and instantiates them without
arguments), built here from a folder of ``<split>.jsonl`` files or from in-memory rows:

=====================  ===========================================  ============================
task type              files                                        fields per line
=====================  ===========================================  ============================
``STS``                ``<split>.jsonl``                            sentence1, sentence2, score
``PairClassification`` ``<split>.jsonl``                            sentence1, sentence2, label
``Classification``     ``train.jsonl`` + ``<split>.jsonl``          text, label
``Retrieval``          ``corpus.jsonl``, ``queries.jsonl``,         id, text (, title);
                       ``qrels/<split>.jsonl``                      query_id, corpus_id, score
=====================  ===========================================  ============================

The shared STS sets and the bundled demo are in :mod:`mteb_lrd.integration.shared_tasks`; registered
tasks (:func:`~mteb_lrd.integration.shared_tasks.register_tasks`) work with ``mteb.get_task(name)``,
the ``mteb run`` CLI and leaderboard tables.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mteb_lrd.io import read_jsonl

__all__ = ["TASK_TYPES", "content_hash", "local_task", "make_task"]

TASK_TYPES = ("STS", "PairClassification", "Classification", "Retrieval")
_MAIN_SCORES = {
    "STS": "cosine_spearman",
    "PairClassification": "max_ap",
    "Classification": "accuracy",
    "Retrieval": "ndcg_at_10",
}


def _require(rows: Sequence[Mapping], fields: Iterable[str], where: str) -> None:
    if not rows:
        raise ValueError(f"{where}: no rows")
    missing = [f for f in fields if f not in rows[0]]
    if missing:
        raise ValueError(f"{where}: rows lack the fields {missing}; found {sorted(rows[0])}")


def _metadata(
    name: str, task_type: str, eval_splits: list[str], languages: Any, revision: str, description: str
):
    from mteb.abstasks.task_metadata import TaskMetadata

    return TaskMetadata(
        name=name,
        description=description,
        reference=None,
        dataset={"path": f"local/{name}", "revision": revision},
        type=task_type,
        category="t2t",
        modalities=["text"],
        eval_splits=eval_splits,
        eval_langs=languages,
        main_score=_MAIN_SCORES[task_type],
        date=None,
        domains=None,
        task_subtypes=None,
        license=None,
        annotations_creators=None,
        dialect=None,
        sample_creation=None,
        bibtex_citation=None,
    )


def _sts_split(rows: list[dict], where: str):
    from datasets import Dataset

    _require(rows, ("sentence1", "sentence2", "score"), where)
    return Dataset.from_dict(
        {
            "sentence1": [r["sentence1"] for r in rows],
            "sentence2": [r["sentence2"] for r in rows],
            "score": [float(r["score"]) for r in rows],
        }
    )


def _pair_split(rows: list[dict], where: str):
    from datasets import Dataset

    key = "labels" if rows and "labels" in rows[0] else "label"
    _require(rows, ("sentence1", "sentence2", key), where)
    return Dataset.from_dict(
        {
            "sentence1": [r["sentence1"] for r in rows],
            "sentence2": [r["sentence2"] for r in rows],
            "labels": [int(r[key]) for r in rows],
        }
    )


def _classification_split(rows: list[dict], where: str):
    from datasets import Dataset

    _require(rows, ("text", "label"), where)
    return Dataset.from_dict({"text": [r["text"] for r in rows], "label": [r["label"] for r in rows]})


def _retrieval_split(data: Mapping[str, list[dict]], where: str):
    from datasets import Dataset

    corpus, queries, qrels = data["corpus"], data["queries"], data["qrels"]
    _require(corpus, ("id", "text"), f"{where} corpus")
    _require(queries, ("id", "text"), f"{where} queries")
    qkey = "query_id" if qrels and "query_id" in qrels[0] else "query-id"
    ckey = "corpus_id" if qrels and "corpus_id" in qrels[0] else "corpus-id"
    _require(qrels, (qkey, ckey), f"{where} qrels")
    relevant: dict[str, dict[str, int]] = {}
    for row in qrels:
        relevant.setdefault(str(row[qkey]), {})[str(row[ckey])] = int(row.get("score", 1))
    return {
        "corpus": Dataset.from_dict(
            {
                "id": [str(r["id"]) for r in corpus],
                "text": [r["text"] for r in corpus],
                "title": [r.get("title", "") for r in corpus],
            }
        ),
        "queries": Dataset.from_dict(
            {"id": [str(r["id"]) for r in queries], "text": [r["text"] for r in queries]}
        ),
        "relevant_docs": relevant,
        "top_ranked": None,
    }


def _base_class(task_type: str) -> type:
    if task_type == "STS":
        from mteb.abstasks.sts import AbsTaskSTS

        return AbsTaskSTS
    if task_type == "PairClassification":
        from mteb.abstasks.pair_classification import AbsTaskPairClassification

        return AbsTaskPairClassification
    if task_type == "Classification":
        from mteb.abstasks.classification import AbsTaskClassification

        return AbsTaskClassification
    from mteb.abstasks.retrieval import AbsTaskRetrieval

    return AbsTaskRetrieval


def _check_type(task_type: str) -> None:
    if task_type not in TASK_TYPES:
        raise ValueError(f"task_type must be one of {TASK_TYPES}; got {task_type!r}")


def make_task(
    task_type: str,
    name: str,
    load: Any,
    *,
    eval_splits: Sequence[str] = ("test",),
    languages: Sequence[str] | Mapping[str, Sequence[str]] = ("eng-Latn",),
    revision: str = "local",
    description: str = "A local task built by mteb-lrd.",
    score_range: tuple[float, float] = (0.0, 5.0),
    n_experiments: int | None = None,
    samples_per_label: int | None = None,
) -> type:
    """Build an MTEB task class whose data come from ``load()``.

    Args:
        task_type: one of :data:`TASK_TYPES`.
        name: the task name (results file ``<name>.json``); must not clash with an MTEB task name
            when registered.
        load: zero-argument callable returning ``{subset: {split: rows}}`` (``rows`` a list of
            dicts; for retrieval a dict with ``corpus``, ``queries``, ``qrels`` lists). Called once,
            on the task's ``load_data``.
        eval_splits: the splits to evaluate.
        languages: ``["eng-Latn"]`` for one subset, or ``{subset: [lang, ...]}`` for several.
        revision: dataset revision recorded with the results (e.g. a content hash).
        description: one line for the task metadata.
        score_range: ``(min, max)`` of STS gold scores.
        n_experiments / samples_per_label: classification settings (MTEB defaults 10 / 8).

    Returns:
        A subclass of the matching ``AbsTask*``; instantiate it with no arguments.

    Raises:
        ValueError: on an unknown task type or bad settings.
    """
    _check_type(task_type)
    if not eval_splits:
        raise ValueError("eval_splits must name at least one split")
    if task_type == "Classification" and "train" in eval_splits:
        raise ValueError("classification trains on the 'train' split; it cannot also be an eval split")
    langs = dict(languages) if isinstance(languages, Mapping) else list(languages)
    metadata = _metadata(name, task_type, list(eval_splits), langs, revision, description)
    converters = {
        "STS": _sts_split,
        "PairClassification": _pair_split,
        "Classification": _classification_split,
        "Retrieval": _retrieval_split,
    }
    convert = converters[task_type]

    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        if self.data_loaded:
            return
        from datasets import DatasetDict

        raw = load()
        dataset: dict[str, Any] = {}
        for subset, splits in raw.items():
            converted = {split: convert(rows, f"{name}/{subset}/{split}") for split, rows in splits.items()}
            dataset[subset] = converted if task_type == "Retrieval" else DatasetDict(converted)
        self.dataset = dataset
        self.data_loaded = True

    attributes: dict[str, Any] = {"metadata": metadata, "load_data": load_data, "__module__": __name__}
    if task_type == "STS":
        attributes["min_score"], attributes["max_score"] = score_range
    if n_experiments is not None:
        attributes["n_experiments"] = int(n_experiments)
    if samples_per_label is not None:
        attributes["samples_per_label"] = int(samples_per_label)
    return type(name.replace("-", "_").replace(".", "_"), (_base_class(task_type),), attributes)


def content_hash(paths: Iterable[Path]) -> str:
    """12 hex digits of the files' names and bytes: the dataset revision recorded with results."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def local_task(
    folder: str | Path,
    task_type: str,
    *,
    name: str | None = None,
    eval_splits: Sequence[str] | None = None,
    languages: Sequence[str] = ("eng-Latn",),
    **options: Any,
) -> type:
    """Turn a local folder of JSON lines into an MTEB task class (see the module docstring).

    Args:
        folder: the data folder.
        task_type: ``STS``, ``PairClassification``, ``Classification`` or ``Retrieval``.
        name: the task name; default: the folder name.
        eval_splits: default: every ``<split>.jsonl`` (retrieval: every ``qrels/<split>.jsonl``),
            except ``train``.
        languages: the task's languages, e.g. ``["eng-Latn"]``.
        **options: passed to :func:`make_task` (``score_range``, ``n_experiments``, ...).

    Returns:
        The task class; ``local_task(...)()`` is the task.

    Raises:
        ValueError: for an unknown type, a missing folder or file.
    """
    _check_type(task_type)
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"task folder {folder} does not exist")
    split_dir = folder / "qrels" if task_type == "Retrieval" else folder
    found = sorted(p.stem for p in split_dir.glob("*.jsonl") if p.stem not in ("corpus", "queries"))
    splits = list(eval_splits) if eval_splits is not None else [s for s in found if s != "train"]
    needed = {split_dir / f"{s}.jsonl" for s in splits}
    if task_type == "Classification":
        needed.add(folder / "train.jsonl")
    if task_type == "Retrieval":
        needed |= {folder / "corpus.jsonl", folder / "queries.jsonl"}
    missing = sorted(str(p) for p in needed if not p.is_file())
    if not splits or missing:
        raise ValueError(f"{folder}: missing files {missing or ['<split>.jsonl']} for a {task_type} task")

    def load() -> dict:
        if task_type == "Retrieval":
            corpus, queries = read_jsonl(folder / "corpus.jsonl"), read_jsonl(folder / "queries.jsonl")
            return {
                "default": {
                    s: {"corpus": corpus, "queries": queries, "qrels": read_jsonl(split_dir / f"{s}.jsonl")}
                    for s in splits
                }
            }
        wanted = splits + (["train"] if task_type == "Classification" else [])
        return {"default": {s: read_jsonl(folder / f"{s}.jsonl") for s in wanted}}

    return make_task(
        task_type,
        name or folder.name,
        load,
        eval_splits=splits,
        languages=languages,
        revision=content_hash(needed),
        description=f"Local {task_type} task from {folder.name}.",
        **options,
    )
