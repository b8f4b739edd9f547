"""Variant-aware tables of a results folder: the leaderboard (one row per model or pruned variant,
never averaged together) and the per-task table (one row per variant and task, with provenance).

Rows are grouped by model (groups ordered by the base model's mean score, best first); inside a
group the base model comes first, then its variants, best mean first. Layers are numbered as in
the base model (0 = embeddings), also for pruned variants.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mteb_lrd.io import to_jsonable
from mteb_lrd.report.comparison import comparable_lrd, mean_over, shared_tasks
from mteb_lrd.report.result_files import ModelVariant, TaskRecord, read_results

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "LRD_COLUMNS",
    "TASK_COLUMNS",
    "Table",
    "best_layer",
    "format_cell",
    "leaderboard",
    "order_variants",
    "results_table",
    "task_table",
    "to_markdown",
    "variant_description",
]

# Model-level LRD scores shown in the tables, d0L first (the paper's strongest selection score).
LRD_COLUMNS: dict[str, str] = {
    "frenet_d0L": "d0L [rad]",
    "nrs_mean_jaccard": "NRS mean J",
    "gfmi_mean_auc": "GFMI mean AUC",
}


@dataclass(frozen=True)
class Table:
    """A table: ``columns`` names and ``rows`` of cells (``None`` = missing).

    Attributes:
        columns: column names.
        rows: one list of cells per row, in display order.
        tasks: the task columns of a leaderboard, in order (``[]`` for other tables).
        groups: the model each row belongs to (rows of a group are adjacent).
        shared: the tasks every row has, over which model-level columns are computed.
        notes: what a reader must know to compare the rows (left-out columns, partial coverage).
    """

    columns: list[str]
    rows: list[list[Any]]
    tasks: list[str]
    groups: list[str]
    shared: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def records(self) -> list[dict[str, Any]]:
        """The rows as ``{column: value}`` dicts."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]

    def to_csv(self) -> str:
        """CSV text: a header line, then one line per row; missing cells are empty, floats unrounded."""
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(self.columns)
        writer.writerows([["" if cell is None else cell for cell in row] for row in self.rows])
        return buffer.getvalue()

    def to_json(self) -> str:
        """JSON text: a list of ``{column: value}`` objects (missing and non-finite values ``null``)."""
        return json.dumps(to_jsonable(self.records()), indent=1, ensure_ascii=False) + "\n"


def variant_description(variant: ModelVariant) -> str:
    """``base``, or what the experiment changed (``removed [2, 3] of 6, rule=gfmi``)."""
    kwargs = variant.experiment_kwargs or {}
    if not kwargs:
        return "base" if variant.experiment is None else variant.experiment
    parts = []
    if "removed_blocks" in kwargs:
        parts.append(f"removed {kwargs['removed_blocks']} of {kwargs.get('num_blocks', '?')}")
    parts.extend(f"{key}={kwargs[key]}" for key in ("rule", "budget") if key in kwargs)
    parts.extend(
        f"{k}={v}" for k, v in kwargs.items() if k not in ("removed_blocks", "num_blocks", "rule", "budget")
    )
    return ", ".join(parts)


def best_layer(variant: ModelVariant, records: Sequence[TaskRecord]) -> tuple[int, float] | tuple[None, None]:
    """The layer with the best per-layer main score and that score (0–1), layers in base numbering.

    With several records the per-layer scores are averaged over them first (each task weighs the
    same). Ties go to the shallower layer. ``(None, None)`` when a record has no per-layer scores,
    the records scored different hidden states, or all are missing.
    """
    curves = [record.per_layer_scores() for record in records]
    layers = [variant.scored_layers(record) for record in records]
    if not curves or any(c is None for c in curves) or any(x is None for x in layers):
        return None, None
    if len({tuple(x.tolist()) for x in layers if x is not None}) != 1:  # every task scored the same states
        return None, None
    mean = np.mean(np.array(curves, dtype=float), axis=0)
    if not np.isfinite(mean).any():
        return None, None
    index = int(np.nanargmax(mean))
    return int(layers[0][index]), float(mean[index])  # type: ignore[index]  # checked above


def order_variants(variants: Sequence[ModelVariant], tasks: Sequence[str]) -> list[ModelVariant]:
    """Group by model (groups by the base's mean score over the tasks of ``tasks`` that every listed
    variant has, best first; a group without a base by its best variant), base first inside a
    group, then variants by that mean, best first. Missing means sort last; names break ties;
    variants with none of ``tasks`` are left out."""
    groups: dict[str, list[ModelVariant]] = {}
    for variant in variants:
        if any(t in variant.tasks for t in tasks):  # a variant with none of the tasks has no row
            groups.setdefault(variant.model, []).append(variant)
    shared = shared_tasks([v for group in groups.values() for v in group], tasks)

    def mean(v: ModelVariant) -> float | None:
        return mean_over([v.tasks[t].main_score for t in shared])

    def within(v: ModelVariant) -> tuple[bool, bool, float, str, str]:
        score = mean(v)
        return (v.experiment is not None, score is None, -(score or 0.0), v.revision, v.experiment or "")

    def group_key(model: str) -> tuple[bool, float, str]:
        score = mean(min(groups[model], key=within))
        return (score is None, -(score or 0.0), model)

    return [v for model in sorted(groups, key=group_key) for v in sorted(groups[model], key=within)]


def _task_names(variants: Sequence[ModelVariant], tasks: Sequence[str] | None) -> list[str]:
    seen = sorted({t for v in variants for t in v.tasks})
    if tasks is None:
        return seen
    missing = [t for t in tasks if t not in seen]
    if missing:
        raise ValueError(f"no results for task(s) {', '.join(missing)}; the results hold: {', '.join(seen)}")
    return list(tasks)


def _undefined_notes(variants: Sequence[ModelVariant], shared: Sequence[str]) -> list[str]:
    """One note per row whose layer dynamics have undefined states: which, why, and that its LRD
    scores start at the first informative state (a score with no such state is left empty)."""
    notes = []
    for variant in variants:
        found: dict[str, str] = {}
        for task in shared:
            found.update(variant.tasks[task].undefined_states())
        if found:
            states = "; ".join(f"{state} undefined: {why}" for state, why in found.items())
            notes.append(
                f"{variant.model} ({variant_description(variant)}): {states}. Scores that read those "
                "states are undefined, and its LRD summaries start at the first informative state."
            )
    return notes


def leaderboard(
    variants: Sequence[ModelVariant],
    tasks: Sequence[str] | None = None,
    lrd_columns: dict[str, str] | None = None,
) -> Table:
    """The leaderboard: one row per model or variant, model-level columns over the shared tasks.

    Args:
        variants: from :func:`mteb_lrd.report.result_files.read_results`.
        tasks: task columns, in order; default: every task seen, sorted.
        lrd_columns: ``{summary key: column title}``; default :data:`LRD_COLUMNS`.

    Returns:
        Columns ``Model``, ``Variant``, ``Revision``, one per task (main score × 100; ``None`` where
        the row lacks the task), ``Tasks`` (how many of the task columns the row has), then the
        model-level columns, all computed over the tasks every row has (``Table.shared``): ``Mean``,
        ``Best layer`` / ``Best-layer score`` (the layer whose per-layer main score averaged over
        those tasks is highest, in base-model numbering, and that score × 100) and the LRD scores
        averaged over them. An LRD column that is not comparable across the rows
        (:func:`~mteb_lrd.report.comparison.comparable_lrd`) is ``None`` everywhere; ``Table.notes``
        says why.

    Raises:
        ValueError: when a requested task has no results.
    """
    lrd_columns = LRD_COLUMNS if lrd_columns is None else lrd_columns
    task_names = _task_names(variants, tasks)
    ordered = order_variants(variants, task_names)
    shared = shared_tasks(ordered, task_names)
    usable = {key: comparable_lrd(ordered, key, shared) for key in lrd_columns}
    rows: list[list[Any]] = []
    for variant in ordered:
        scores = [variant.tasks[t].main_score * 100 if t in variant.tasks else None for t in task_names]
        records = [variant.tasks[t] for t in shared]
        mean = mean_over([record.main_score * 100 for record in records])
        layer, layer_score = best_layer(variant, records) if records else (None, None)
        lrd = [
            mean_over([record.lrd_summary().get(key) for record in records])
            if usable[key].comparable
            else None
            for key in lrd_columns
        ]
        rows.append(
            [
                variant.model,
                variant_description(variant),
                variant.revision,
                *scores,
                sum(t in variant.tasks for t in task_names),
                mean,
                layer,
                None if layer_score is None else layer_score * 100,
                *lrd,
            ]
        )
    columns = ["Model", "Variant", "Revision", *task_names, "Tasks", "Mean", "Best layer", "Best-layer score"]
    notes = (
        _shared_notes(task_names, shared)
        + _undefined_notes(ordered, shared)
        + [
            f"{lrd_columns[key]}: not shown, {usable[key].reason}; compare it per task in tasks.csv."
            for key in lrd_columns
            if shared and not usable[key].comparable
        ]
    )
    return Table(
        [*columns, *lrd_columns.values()], rows, task_names, [str(row[0]) for row in rows], shared, notes
    )


def _shared_notes(tasks: Sequence[str], shared: Sequence[str]) -> list[str]:
    if not shared:
        return [
            "No task is shared by every row: Mean, Best layer and the LRD columns are left empty. "
            "Compare the task columns, or choose tasks every row has."
        ]
    if len(shared) == len(tasks):
        return []
    return [
        f"Mean, Best layer and the LRD columns are over the {len(shared)} of {len(tasks)} tasks every row "
        f"has ({', '.join(shared)}); the other task columns are shown but averaged nowhere."
    ]


TASK_COLUMNS = [
    "model",
    "variant",
    "revision",
    "experiment",
    "task",
    "shared_task",
    "split",
    "subsets",
    "main_score",
    "best_layer",
    "best_layer_score",
    "num_layers",
    *LRD_COLUMNS,
    "n_texts",
    "n_used_frenet",
    "n_used_nrs",
    "n_used_gfmi",
    "mteb_version",
    "date",
    "dataset_revision",
    "file",
]


def _iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def task_table(variants: Sequence[ModelVariant], tasks: Sequence[str] | None = None) -> Table:
    """One row per (variant, task), scores as in the result files (0–1), with provenance.

    Columns: :data:`TASK_COLUMNS` — ``shared_task`` whether every variant of the table has the
    task (only those enter a model-level comparison), ``best_layer`` in base-model numbering,
    ``num_layers`` the variant's own transformer blocks, ``n_used_*`` the texts each LRD metric used
    (smallest over subsets; NRS and GFMI values compare only at equal counts), ``mteb_version`` /
    ``date`` / ``dataset_revision`` as recorded in the file.
    """
    task_names = _task_names(variants, tasks)
    ordered = order_variants(variants, task_names)
    shared = set(shared_tasks(ordered, task_names))
    rows: list[list[Any]] = []
    for variant in ordered:
        for task in task_names:
            record = variant.tasks.get(task)
            if record is None:
                continue
            curve = record.per_layer_scores()
            layer, score = best_layer(variant, [record])
            summary = record.lrd_summary()
            n_used = record.n_used()
            n_texts = [d["n_texts"] for d in record.layer_dynamics if isinstance(d.get("n_texts"), int)]
            rows.append(
                [
                    variant.model,
                    variant_description(variant),
                    variant.revision,
                    variant.experiment,
                    task,
                    task in shared,
                    record.split,
                    len(record.subsets),
                    record.main_score,
                    layer,
                    score,
                    None if curve is None else curve.size - 1,
                    *(summary.get(k) for k in LRD_COLUMNS),
                    min(n_texts) if n_texts else None,
                    n_used.get("frenet"),
                    n_used.get("nrs"),
                    n_used.get("gfmi"),
                    record.mteb_version,
                    _iso(record.date),
                    record.dataset_revision,
                    str(record.path) if record.path else None,
                ]
            )
    return Table(list(TASK_COLUMNS), rows, [], [str(row[0]) for row in rows])


def results_table(folder: str | Path, tasks: Sequence[str] | None = None) -> pd.DataFrame:
    """A variant-aware replacement for mteb's ``BenchmarkResults.to_dataframe``.

    mteb's ``to_dataframe`` keys rows by model name, so a base model and its pruned variants are
    averaged into one number. Here every (model, revision, experiment) keeps its own rows.

    Args:
        folder: an mteb results folder (``ResultCache`` folder or its ``results/``).
        tasks: tasks to include; default all.

    Returns:
        A ``pandas.DataFrame`` with one row per (variant, task) and the columns of
        :func:`task_table` (``main_score`` as in the files, 0–1). Unreadable files are warned about
        (named) and left out.

    Raises:
        ValueError: when the folder does not exist or a requested task has no results.
    """
    import pandas as pd

    table = task_table(read_results(folder).variants, tasks)
    return pd.DataFrame(table.rows, columns=table.columns)


def format_cell(value: Any) -> str:
    """A cell as shown in Markdown / HTML: ``–`` for missing, 2 decimals (4 below 1)."""
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.2f}" if abs(value) >= 1 or value == 0 else f"{value:.4f}"
    return str(value)


def to_markdown(table: Table, columns: Sequence[str] | None = None) -> str:
    """The table (optionally only ``columns``) as GitHub Markdown; text columns left-aligned."""
    names = list(columns) if columns is not None else table.columns
    index = [table.columns.index(c) for c in names]
    numeric = [all(isinstance(row[i], (int, float)) or row[i] is None for row in table.rows) for i in index]
    lines = [
        "| " + " | ".join(names) + " |",
        "|" + "|".join("---:" if n else "---" for n in numeric) + "|",
    ]
    lines.extend(
        "| " + " | ".join(format_cell(row[i]).replace("|", "\\|") for i in index) + " |" for row in table.rows
    )
    return "\n".join(lines) + "\n"
