"""Building an MTEB task class of any supported family from a loader of rows."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from mteb_lrd.tasks.local_tasks.labelled import classification_splits, clustering_split
from mteb_lrd.tasks.local_tasks.pairs import bitext_split, pair_split, sts_split
from mteb_lrd.tasks.local_tasks.retrieval import retrieval_split
from mteb_lrd.tasks.local_tasks.validation import LocalTaskError, Rows

__all__ = ["MAIN_SCORES", "TASK_TYPES", "TaskSettings", "check_type", "convert_subset", "make_task"]

TASK_TYPES: tuple[str, ...] = (
    "STS",
    "PairClassification",
    "Classification",
    "Clustering",
    "Retrieval",
    "Reranking",
    "BitextMining",
)
MAIN_SCORES: dict[str, str] = {
    "STS": "cosine_spearman",
    "PairClassification": "max_ap",
    "Classification": "accuracy",
    "Clustering": "v_measure",
    "Retrieval": "ndcg_at_10",
    "Reranking": "map_at_1000",
    "BitextMining": "f1",
}
_DOCUMENT_TYPES = ("Retrieval", "Reranking")
_CLUSTER_SAMPLE_CAP = 16_384  # mteb's max_documents_per_cluster


def check_type(task_type: str) -> None:
    """Raise when ``task_type`` is not one of :data:`TASK_TYPES`."""
    if task_type not in TASK_TYPES:
        raise ValueError(f"task_type must be one of {TASK_TYPES}; got {task_type!r}")


def _metadata(
    name: str, task_type: str, eval_splits: list[str], languages: Any, revision: str, description: str
) -> Any:
    from mteb.abstasks.task_metadata import TaskMetadata

    fields: dict[str, Any] = {"type": task_type}  # checked against mteb's literal by TaskMetadata itself
    return TaskMetadata(
        **fields,
        name=name,
        description=description,
        reference=None,
        dataset={"path": f"local/{name}", "revision": revision},
        category="t2t",
        modalities=["text"],
        eval_splits=eval_splits,
        eval_langs=languages,
        main_score=MAIN_SCORES[task_type],
        date=None,
        domains=None,
        task_subtypes=None,
        license=None,
        annotations_creators=None,
        dialect=None,
        sample_creation=None,
        bibtex_citation=None,
    )


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
    if task_type == "Clustering":
        from mteb.abstasks.clustering import AbsTaskClustering

        return AbsTaskClustering
    if task_type == "BitextMining":
        from mteb.abstasks.text.bitext_mining import AbsTaskBitextMining

        return AbsTaskBitextMining
    from mteb.abstasks.retrieval import AbsTaskRetrieval

    return AbsTaskRetrieval


def _located(splits: Mapping[str, Any], where: str, document_family: bool) -> dict[str, Any]:
    if not isinstance(splits, Mapping):
        raise LocalTaskError(f"{where}: expected {{split: rows}}, got {type(splits).__name__}")
    if document_family:
        located = {}
        for split, parts in splits.items():
            if not isinstance(parts, Mapping):
                raise LocalTaskError(
                    f"{where}/{split}: expected {{'corpus': ..., 'queries': ..., 'qrels': ...}}"
                )
            located[split] = {part: Rows.of(rows, f"{where}/{split}/{part}") for part, rows in parts.items()}
        return located
    return {split: Rows.of(rows, f"{where}/{split}") for split, rows in splits.items()}


def convert_subset(
    task_type: str, splits: Mapping[str, Any], where: str, score_range: tuple[float, float]
) -> Any:
    """One subset's ``{split: rows}`` as mteb expects it for ``task_type`` (every row checked).

    Raises:
        LocalTaskError: naming the first bad row's file and line (or ``<where>/<split> row <i>``).
    """
    from datasets import DatasetDict

    located = _located(splits, where, task_type in _DOCUMENT_TYPES)
    if task_type in _DOCUMENT_TYPES:
        return {
            split: retrieval_split(parts, reranking=task_type == "Reranking")
            for split, parts in located.items()
        }
    if task_type == "Classification":
        return DatasetDict(classification_splits(located))
    convert: Callable[[Rows], Any] = {
        "STS": lambda rows: sts_split(rows, score_range),
        "PairClassification": pair_split,
        "Clustering": clustering_split,
        "BitextMining": bitext_split,
    }[task_type]
    return DatasetDict({split: convert(rows) for split, rows in located.items()})


@dataclass(frozen=True)
class TaskSettings:
    """The settings of a local task besides its type, name and data.

    Attributes:
        eval_splits: the splits to evaluate.
        languages: ``["eng-Latn"]`` for one subset, or ``{subset: [lang, ...]}`` for several.
        revision: dataset revision recorded with the results (e.g. a content hash).
        description: one line for the task metadata.
        score_range: ``(min, max)`` of STS gold scores (scores outside it are an error).
        n_experiments / samples_per_label: classification settings (MTEB defaults 10 / 8).

    Raises:
        ValueError: for no split or a score range that is not ``(low, high)`` with ``low < high``.
    """

    eval_splits: Sequence[str] = ("test",)
    languages: Sequence[str] | Mapping[str, Sequence[str]] = ("eng-Latn",)
    revision: str = "local"
    description: str = "A local task built by mteb-lrd."
    score_range: tuple[float, float] = (0.0, 5.0)
    n_experiments: int | None = None
    samples_per_label: int | None = None

    def __post_init__(self) -> None:
        if not self.eval_splits:
            raise ValueError("eval_splits must name at least one split")
        if not self.score_range[0] < self.score_range[1]:
            raise ValueError(f"score_range must be (low, high) with low < high; got {self.score_range}")


def make_task(
    task_type: str,
    name: str,
    load: Callable[[], Mapping[str, Mapping[str, Any]]],
    settings: TaskSettings | None = None,
    **keywords: Any,
) -> type:
    """Build an MTEB task class whose data come from ``load()``.

    Args:
        task_type: one of :data:`TASK_TYPES`.
        name: the task name (results file ``<name>.json``); must not clash with an MTEB task name
            when registered.
        load: zero-argument callable returning ``{subset: {split: rows}}`` (``rows`` a list of
            dicts or :class:`~mteb_lrd.tasks.local_tasks.validation.Rows`; for Retrieval /
            Reranking a dict with ``corpus``, ``queries``, ``qrels`` (and ``top_ranked``) row lists).
            Called once, on the task's ``load_data``; every row is checked then.
        settings: splits, languages, revision, description, score range, classification settings
            (:class:`TaskSettings`); or give its fields as keywords (``eval_splits=["dev"]``).

    Returns:
        A subclass of the matching ``AbsTask*``; instantiate it with no arguments.

    Raises:
        ValueError: on an unknown task type or bad settings.
        TypeError: for a keyword that is not a :class:`TaskSettings` field.
    """
    check_type(task_type)
    settings = TaskSettings(**keywords) if settings is None else replace(settings, **keywords)
    eval_splits, languages, score_range = settings.eval_splits, settings.languages, settings.score_range
    revision, description = settings.revision, settings.description
    n_experiments, samples_per_label = settings.n_experiments, settings.samples_per_label
    if task_type == "Classification" and "train" in eval_splits:
        raise ValueError("classification trains on the 'train' split; it cannot also be an eval split")
    langs = dict(languages) if isinstance(languages, Mapping) else list(languages)
    metadata = _metadata(name, task_type, list(eval_splits), langs, revision, description)

    def load_data(self: Any, num_proc: int | None = None, **kwargs: Any) -> None:
        if self.data_loaded:
            return
        raw = load()
        self.dataset = {
            subset: convert_subset(task_type, splits, f"{name}/{subset}", score_range)
            for subset, splits in raw.items()
        }
        if task_type == "Clustering":  # bootstrap samples as large as the data (mteb's cap otherwise)
            largest = max(len(split) for subset in self.dataset.values() for split in subset.values())
            self.max_documents_per_cluster = min(_CLUSTER_SAMPLE_CAP, largest)
        self.data_loaded = True

    attributes: dict[str, Any] = {"metadata": metadata, "load_data": load_data, "__module__": __name__}
    if task_type == "STS":
        attributes["min_score"], attributes["max_score"] = score_range
    if task_type == "Clustering":
        attributes["max_fraction_of_documents_to_embed"] = None  # local tasks are small: embed them all
    if n_experiments is not None:
        attributes["n_experiments"] = int(n_experiments)
    if samples_per_label is not None:
        attributes["samples_per_label"] = int(samples_per_label)
    return type(name.replace("-", "_").replace(".", "_"), (_base_class(task_type),), attributes)
