"""The DySem comparison: tasks from the shared STS data, label-free language order, a dev-split
grid, and DySem against its baselines through ``mteb.evaluate`` — the paper's table.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mteb_lrd.dysem.consensus import rank_languages, rank_languages_by_labels
from mteb_lrd.dysem.languages import STSB_MULTI_LANGUAGES, normalize_language
from mteb_lrd.dysem.model import DySemModel
from mteb_lrd.dysem.tasks import DIMENSIONS_KEY, model_similarity_task
from mteb_lrd.io import atomic_write_json, read_jsonl
from mteb_lrd.metrics.statistics import PAIRED_RESAMPLES, PAIRED_SEED, paired_spearman_difference

__all__ = [
    "STS_TASKS",
    "LabelledPairs",
    "load_pairs",
    "load_test_set",
    "row_range",
    "sts_task",
    "task_language",
    "order_languages",
    "evaluate_models",
    "paired_comparisons",
    "predictions_folder",
    "read_similarities",
    "format_table",
    "format_comparisons",
    "write_json_atomic",
]

# task name -> file under the shared STS folder; "STSBenchmark-<lang>" are the translations.
STS_TASKS: dict[str, str] = {
    "STS12": "STS12/test.jsonl",
    "STS13": "STS13/test.jsonl",
    "STS14": "STS14/test.jsonl",
    "STS15": "STS15/test.jsonl",
    "STS16": "STS16/test.jsonl",
    "STSBenchmark": "STSBenchmark-multi/en/test.jsonl",
    "SICK-R": "SICK-R/test.jsonl",
    **{f"STSBenchmark-{code}": f"STSBenchmark-multi/{code}/test.jsonl" for code in STSB_MULTI_LANGUAGES[1:]},
}


@dataclass
class LabelledPairs:
    """Sentence pairs with gold scores (one split of one STS set, possibly sub-sampled)."""

    sentence1: list[str]
    sentence2: list[str]
    scores: list[float]
    source: str = ""
    indices: list[int] = field(default_factory=list)
    available: int = 0
    """Rows of the source file (more than ``len(scores)`` for a sub-sample)."""

    def rows(self) -> list[dict[str, Any]]:
        """The pairs as MTEB STS rows."""
        return [
            {"sentence1": a, "sentence2": b, "score": s}
            for a, b, s in zip(self.sentence1, self.sentence2, self.scores, strict=True)
        ]

    @property
    def sampled(self) -> bool:
        """Whether these are fewer pairs than the source file holds."""
        return len(self.scores) < self.available

    def chunk(self, rows: tuple[int, int]) -> LabelledPairs:
        """The ``rows`` ``(start, stop)`` slice (checked and clipped by :func:`row_range`)."""
        start, stop = row_range(rows, len(self.scores))
        return LabelledPairs(self.sentence1[start:stop], self.sentence2[start:stop], self.scores[start:stop],
                             source=self.source, indices=self.indices[start:stop],
                             available=self.available)  # fmt: skip


def row_range(rows: tuple[int, int], total: int) -> tuple[int, int]:
    """``rows`` (start, stop) checked against ``total`` pairs, ``stop`` clipped to ``total``.

    Raises:
        ValueError: a negative start, a stop not above the start, or a start past the last pair.
    """
    start, stop = (int(x) for x in rows)
    if start < 0 or stop <= start:
        raise ValueError(f"rows must be START:STOP with 0 <= START < STOP, got {start}:{stop}")
    if start >= total:
        raise ValueError(f"rows {start}:{stop} start past the last of {total} pairs")
    return start, min(stop, total)


def load_pairs(
    path: str | os.PathLike[str],
    max_pairs: int | None = None,
    seed: int = 42,
    rows: tuple[int, int] | None = None,
) -> LabelledPairs:
    """Read an STS JSON-lines file; keep ``max_pairs`` rows drawn with ``RandomState(seed)``, sorted,
    then of those the ``rows`` ``(start, stop)`` slice (a chunk of the set; see :func:`row_range`)."""
    records = read_jsonl(path)
    indices = list(range(len(records)))
    if max_pairs is not None and max_pairs < len(records):
        if max_pairs < 2:
            raise ValueError(f"max_pairs must be at least 2, got {max_pairs}")
        indices = sorted(np.random.RandomState(seed).choice(len(records), max_pairs, replace=False).tolist())
    picked = [records[i] for i in indices]
    pairs = LabelledPairs(
        [r["sentence1"] for r in picked],
        [r["sentence2"] for r in picked],
        [float(r["score"]) for r in picked],
        source=str(path),
        indices=indices,
        available=len(records),
    )
    return pairs if rows is None else pairs.chunk(rows)


def load_test_set(
    name: str, sts_dir: str | os.PathLike[str], max_pairs: int | None = None, seed: int = 42
) -> LabelledPairs:
    """The test pairs of ``name`` of :data:`STS_TASKS` in the shared STS folder (see :func:`load_pairs`).

    Raises:
        ValueError: an unknown task. FileNotFoundError: its file is missing.
    """
    if name not in STS_TASKS:
        raise ValueError(f"unknown STS task {name!r}; available: {', '.join(STS_TASKS)}")
    path = Path(sts_dir) / STS_TASKS[name]
    if not path.is_file():
        raise FileNotFoundError(f"STS data for {name} not found at {path}")
    return load_pairs(path, max_pairs, seed)


def task_language(name: str) -> str:
    """Source language of a task of :data:`STS_TASKS` (``STSBenchmark-de`` -> ``de``)."""
    return normalize_language(name.rsplit("-", 1)[1]) if name.startswith("STSBenchmark-") else "en"


def sts_task(
    name: str,
    test_set: LabelledPairs,
    seed: int = 42,
    rows: tuple[int, int] | None = None,
) -> tuple[type, int]:
    """An MTEB STS task class for ``test_set``, the test pairs of ``name`` of :data:`STS_TASKS`
    (:func:`load_test_set`, drawn with ``seed``), only its ``rows`` slice when given.

    Returns:
        ``(task class, number of pairs)``; the task is named ``DySem<name>`` plus
        ``-sample<n>`` when sub-sampled and ``-rows<start>-<stop>`` for a slice, so its results
        never pass for the full set's.
    """
    from mteb_lrd.dysem.languages import LANGUAGES
    from mteb_lrd.tasks.local_tasks import make_task

    task_name = f"DySem{name}" + (f"-sample{len(test_set.scores)}" if test_set.sampled else "")
    pairs = test_set
    if rows is not None:
        start, stop = row_range(rows, len(test_set.scores))
        task_name += f"-rows{start}-{stop}"
        pairs = test_set.chunk(rows)
    low = 1.0 if name == "SICK-R" else 0.0
    records = pairs.rows()
    task = make_task(
        "STS",
        task_name,
        lambda: {"default": {"test": records}},
        languages=[LANGUAGES[task_language(name)].mteb],
        revision=f"seed{seed}-n{len(records)}",
        description=f"{name} from the shared STS data ({len(records)} pairs).",
        score_range=(low, 5.0),
    )
    return task, len(records)


def order_languages(
    model: DySemModel,
    texts: Sequence[str],
    *,
    method: str = "agreement",
    pairs: LabelledPairs | None = None,
) -> list[str]:
    """Order ``model.languages`` (all of them) for DySem.

    Args:
        model: a DySem model whose ``languages`` are the candidates (translations available).
        texts: English calibration texts (no labels are needed for the default methods).
        method: ``"agreement"`` (cosine with the source text's vector), ``"consensus"`` (with the
            other languages') or ``"labels"`` (the reference: dense-cosine Spearman on ``pairs``;
            warns about label use).
        pairs: labelled pairs, for ``method="labels"`` only.
    """
    if method == "labels":
        if pairs is None:
            raise ValueError('language order "labels" needs labelled pairs')
        _, stack_1 = model.representations(pairs.sentence1)
        _, stack_2 = model.representations(pairs.sentence2)
        return rank_languages_by_labels(stack_1, stack_2, pairs.scores, model.languages)
    if method not in ("agreement", "consensus"):
        raise ValueError(f'language order must be "agreement", "consensus" or "labels", got {method!r}')
    source, stack = model.representations(texts)
    return rank_languages(
        stack, model.languages, source=source, method="source" if method == "agreement" else "consensus"
    )


def predictions_folder(predictions_dir: str | os.PathLike[str], label: str) -> Path:
    """Where mteb writes the per-pair predictions of the model ``label`` (a file-safe name)."""
    return Path(predictions_dir) / (re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "model")


def read_similarities(predictions_dir: str | os.PathLike[str], label: str, task: Any) -> np.ndarray:
    """The per-pair similarities mteb saved for the model ``label`` on ``task`` (test split).

    Raises:
        FileNotFoundError: when ``evaluate_models`` did not write them.
    """
    path = predictions_folder(predictions_dir, label) / task.prediction_file_name
    with path.open(encoding="utf-8") as fh:
        saved = json.load(fh)
    return np.asarray(saved["default"]["test"]["similarity_scores"], dtype=np.float64)


def paired_comparisons(
    predictions_dir: str | os.PathLike[str],
    reference: str,
    others: Sequence[str],
    tasks: Mapping[str, tuple[type, Sequence[float]]],
    *,
    n_resamples: int = PAIRED_RESAMPLES,
    seed: int = PAIRED_SEED,
) -> dict[str, dict[str, dict[str, float | int]]]:
    """Spearman of ``reference`` minus each of ``others`` on the same pairs, with a paired bootstrap.

    Args:
        predictions_dir: the folder given to :func:`evaluate_models`.
        reference: the model compared (DySem); others: the models it is compared with.
        tasks: ``{task label: (task class, gold scores in the task's order)}``.

    Returns:
        ``{task: {other: PairedDifference.to_dict()}}`` (x 1, not x 100), for the models that ran.
    """
    out: dict[str, dict[str, dict[str, float | int]]] = {}
    for task_label, (task_cls, gold) in tasks.items():
        task = task_cls()
        try:
            ours = read_similarities(predictions_dir, reference, task)
        except FileNotFoundError:
            continue
        out[task_label] = {}
        for other in others:
            try:
                theirs = read_similarities(predictions_dir, other, task)
            except FileNotFoundError:
                continue
            result = paired_spearman_difference(ours, theirs, gold, n_resamples=n_resamples, seed=seed)
            out[task_label][other] = result.to_dict()
    return out


def evaluate_models(
    models: Mapping[str, Callable[[str], Any]],
    tasks: Mapping[str, type],
    results_dir: str | os.PathLike[str] | None,
    batch_size: int = 32,
    predictions_dir: str | os.PathLike[str] | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """Run ``mteb.evaluate`` for every (model, task); main score = the model's own similarity.

    Args:
        models: ``{label: factory}``; ``factory(task label)`` gives the MTEB encoder for that
            task, or ``None`` when the model cannot run it (e.g. no translations).
        tasks: ``{task label: task class}``.
        results_dir: MTEB result cache folder (results stored like any model's); ``None``: none.
        batch_size: texts per forward pass (MTEB's ``encode_kwargs["batch_size"]``).
        predictions_dir: where mteb also writes each model's per-pair similarities (see
            :func:`predictions_folder`), for :func:`paired_comparisons`; ``None``: not written.

    Returns:
        ``{model label: {task label: {"spearman": x100, "mean_dimensions": #Dim}}}``.
    """
    import mteb

    cache = mteb.ResultCache(str(results_dir)) if results_dir is not None else None
    table: dict[str, dict[str, dict[str, float]]] = {}
    for label, model in models.items():
        table[label] = {}
        for task_label, task_cls in tasks.items():
            encoder = model(task_label)
            if encoder is None:
                continue
            task = model_similarity_task(task_cls())
            folder = None if predictions_dir is None else predictions_folder(predictions_dir, label)
            if folder is not None:  # mteb merges into an existing file: never into a torn one
                (folder / task.prediction_file_name).unlink(missing_ok=True)
            result = mteb.evaluate(
                encoder,
                [task],
                cache=cache,
                overwrite_strategy="always",
                prediction_folder=folder,
                encode_kwargs={"batch_size": batch_size},
                co2_tracker=False,
                show_progress_bar=False,
            )
            scores = result.task_results[0].scores["test"][0]
            table[label][task_label] = {
                "spearman": 100 * float(scores["main_score"]),
                "mean_dimensions": float(scores.get(DIMENSIONS_KEY, float("nan"))),
            }
    return table


def format_table(table: Mapping[str, Mapping[str, Mapping[str, float]]], tasks: Sequence[str]) -> str:
    """A markdown table like the paper's: Spearman x 100 per task, the average and #Dim per model.

    The average and #Dim are taken over the tasks every row has, so the rows compare like with
    like; a note names those tasks when some row lacks one.
    """
    header = "| model | " + " | ".join(tasks) + " | avg | #Dim |"
    lines = [header, "|" + "---|" * (len(tasks) + 3)]
    shared = [t for t in tasks if all(t in per_task for per_task in table.values())]
    for label, per_task in table.items():
        cells = [f"{per_task[t]['spearman']:.2f}" if t in per_task else "–" for t in tasks]
        done = [per_task[t] for t in shared]
        avg = f"{np.mean([c['spearman'] for c in done]):.2f}" if done else "–"
        dims = f"{np.mean([c['mean_dimensions'] for c in done]):.0f}" if done else "–"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {avg} | {dims} |")
    if len(shared) < len(tasks):
        lines.append("\n– : not run (for DySem with L > 1: no translations of that task's texts)")
        over = ", ".join(shared) if shared else "none: no task has every row"
        lines.append(f"avg, #Dim: over the tasks every row has ({over})")
    return "\n".join(lines)


def format_comparisons(
    reference: str, comparisons: Mapping[str, Mapping[str, Mapping[str, float | int]]]
) -> str:
    """A markdown table of :func:`paired_comparisons`: Δ Spearman x 100 with its 95% interval and p."""
    lines = [
        f"Paired bootstrap over test pairs: {reference} minus each model (Spearman x 100)",
        "",
        "| task | model | Δ | 95% CI | p | pairs |",
        "|---|---|---|---|---|---|",
    ]
    for task, rows in comparisons.items():
        for other, r in rows.items():
            floor = 1 / max(int(r["n_resamples"]), 1)  # no resample on the far side of zero
            p = f"≤ {floor:.2g}" if float(r["p"]) <= floor else f"{float(r['p']):.3g}"
            lines.append(
                f"| {task} | {other} | {100 * float(r['delta']):+.2f} | "
                f"[{100 * float(r['ci_low']):+.2f}, {100 * float(r['ci_high']):+.2f}] | {p} | {r['n']} |"
            )
    return "\n".join(lines)


def write_json_atomic(path: str | os.PathLike[str], payload: Any) -> None:
    """Write JSON to ``path`` atomically through :mod:`mteb_lrd.io` (NaN written as null)."""
    atomic_write_json(path, payload, indent=2)
