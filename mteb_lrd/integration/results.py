"""Reading an mteb results folder, experiment variants included, without averaging variants.

mteb stores ``<root>/results/<org__name>/<revision>/<Task>.json`` and, for a model with
``experiment_kwargs`` (a pruned model), ``.../<revision>/experiments/<experiment>/<Task>.json``.
``BenchmarkResults.to_dataframe`` keys by model name and so averages or overwrites variants; here
every (model, revision, experiment) is its own :class:`ModelVariant`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ModelVariant", "TaskRecord", "load_variants", "results_root"]

_PREFERRED_SPLITS = ("test", "dev", "validation")


@dataclass
class TaskRecord:
    """One task of one model variant.

    Attributes:
        task: task name. split: the split summarised (``test`` when present).
        main_score: mean ``main_score`` over the split's subsets.
        subsets: the split's score rows as written by mteb (``layer_dynamics`` / ``per_layer``
            included when the wrapper ran).
    """

    task: str
    split: str
    main_score: float
    subsets: list[dict[str, Any]]

    @property
    def layer_dynamics(self) -> list[dict[str, Any]]:
        """The ``layer_dynamics`` entries (one per subset that has one)."""
        return [row["layer_dynamics"] for row in self.subsets if isinstance(row.get("layer_dynamics"), dict)]

    @property
    def per_layer(self) -> list[dict[str, Any]]:
        """The ``per_layer`` entries (one per subset that has one)."""
        return [row["per_layer"] for row in self.subsets if isinstance(row.get("per_layer"), dict)]

    def lrd_summary(self) -> dict[str, float]:
        """Model-level LRD scores of this task, averaged over subsets (``None`` values skipped)."""
        values: dict[str, list[float]] = {}
        for dynamics in self.layer_dynamics:
            for key, value in (dynamics.get("summary") or {}).items():
                if isinstance(value, (int, float)):
                    values.setdefault(key, []).append(float(value))
        return {key: float(np.mean(v)) for key, v in values.items()}


@dataclass
class ModelVariant:
    """A model, or one experiment variant of it (e.g. a pruned model), and its task results."""

    model: str
    revision: str
    experiment: str | None
    experiment_kwargs: dict[str, Any] | None
    folder: Path
    tasks: dict[str, TaskRecord] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``model`` or ``model [experiment]``: unique per variant."""
        return self.model if self.experiment is None else f"{self.model} [{self.experiment}]"

    def lrd_summary(self) -> dict[str, float]:
        """Model-level LRD scores averaged over tasks (each task weighs the same)."""
        values: dict[str, list[float]] = {}
        for record in self.tasks.values():
            for key, value in record.lrd_summary().items():
                values.setdefault(key, []).append(value)
        return {key: float(np.mean(v)) for key, v in values.items()}


def results_root(folder: str | Path) -> Path:
    """The folder holding ``<org__name>/`` model folders: ``folder/results`` when it exists."""
    folder = Path(folder)
    return folder / "results" if (folder / "results").is_dir() else folder


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def _task_record(data: dict[str, Any]) -> TaskRecord | None:
    scores = data.get("scores") or {}
    split = next((s for s in _PREFERRED_SPLITS if s in scores), next(iter(scores), None))
    if split is None:
        return None
    rows = [row for row in scores[split] if isinstance(row.get("main_score"), (int, float))]
    if not rows:
        return None
    main = float(np.mean([row["main_score"] for row in rows]))
    return TaskRecord(str(data.get("task_name")), split, main, rows)


def load_variants(folder: str | Path) -> list[ModelVariant]:
    """Every model variant under an mteb results folder, in a stable order.

    Args:
        folder: a ``ResultCache`` folder (holding ``results/``) or the ``results/`` folder itself.

    Returns:
        One :class:`ModelVariant` per (model, revision, experiment) folder that has task files.

    Raises:
        ValueError: when ``folder`` does not exist.
    """
    root = results_root(folder)
    if not root.is_dir():
        raise ValueError(f"results folder {folder} does not exist")
    variants: dict[Path, ModelVariant] = {}
    for path in sorted(root.rglob("*.json")):
        if path.name == "model_meta.json":
            continue
        data = _read_json(path)
        if not data or "scores" not in data or "task_name" not in data:
            continue
        parts = path.parent.relative_to(root).parts
        if len(parts) < 2:
            continue
        experiment = parts[3] if len(parts) >= 4 and parts[2] == "experiments" else None
        variant = variants.get(path.parent)
        if variant is None:
            meta = _read_json(path.parent / "model_meta.json") or {}
            variant = ModelVariant(
                model=meta.get("name") or parts[0].replace("__", "/"),
                revision=meta.get("revision") or parts[1],
                experiment=experiment,
                experiment_kwargs=meta.get("experiment_kwargs"),
                folder=path.parent,
            )
            variants[path.parent] = variant
        record = _task_record(data)
        if record is not None:
            variant.tasks[record.task] = record
    return sorted(
        (v for v in variants.values() if v.tasks), key=lambda v: (v.model, v.revision, v.experiment or "")
    )
