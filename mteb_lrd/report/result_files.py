"""Reading an mteb results folder, experiment variants included, without averaging variants.

mteb stores ``<root>/results/<org__name>/<revision>/<Task>.json`` and, for a model with
``experiment_kwargs`` (a pruned model), ``.../<revision>/experiments/<experiment>/<Task>.json``.
``BenchmarkResults.to_dataframe`` keys by model name and so averages variants together; here every
(model, revision, experiment) folder is its own :class:`ModelVariant`.

A file that cannot be read or is not a usable mteb result (torn JSON, no scores, a subset without a
finite ``main_score``) is never dropped silently: it is listed in :attr:`ResultsFolder.unreadable`
with the reason, and :func:`read_results` warns naming it, because leaving it out changes the
model's mean.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "ModelVariant",
    "ResultsFolder",
    "TaskRecord",
    "UnreadableResult",
    "entry_states",
    "load_variants",
    "read_results",
    "results_root",
]

_PREFERRED_SPLITS = ("test", "dev", "validation")
# JSON files mteb keeps next to task results that are not task results.
_NOT_RESULTS = frozenset({"model_meta.json"})


@dataclass(frozen=True)
class UnreadableResult:
    """A ``.json`` file under the results folder that was left out, and why."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass
class TaskRecord:
    """One task of one model variant.

    Attributes:
        task: task name.
        split: the split summarised (``test``, else ``dev``, ``validation``, else the first one).
        main_score: mean ``main_score`` over the split's subsets.
        subsets: the split's score rows as written by mteb (``layer_dynamics`` / ``per_layer``
            included when the wrapper ran).
        path: the result file.
        mteb_version: the mteb version that wrote it (``None`` when not recorded).
        date: evaluation time as a Unix timestamp (``None`` when not recorded).
        dataset_revision: the task data's revision.
    """

    task: str
    split: str
    main_score: float
    subsets: list[dict[str, Any]]
    path: Path | None = None
    mteb_version: str | None = None
    date: float | None = None
    dataset_revision: str | None = None

    @property
    def layer_dynamics(self) -> list[dict[str, Any]]:
        """The ``layer_dynamics`` entries (one per subset that has one)."""
        return [row["layer_dynamics"] for row in self.subsets if isinstance(row.get("layer_dynamics"), dict)]

    @property
    def per_layer(self) -> list[dict[str, Any]]:
        """The ``per_layer`` entries (one per subset that has one)."""
        return [row["per_layer"] for row in self.subsets if isinstance(row.get("per_layer"), dict)]

    def per_layer_scores(self) -> np.ndarray | None:
        """Per-layer main score averaged over subsets (index = hidden state of *this* model).

        ``None`` unless every subset has a ``per_layer`` entry of the same length; a layer whose
        score is missing (``null``) in some subset is NaN.
        """
        entries = self.per_layer
        if not entries or len(entries) != len(self.subsets):
            return None
        rows = [[np.nan if s is None else float(s) for s in entry.get("scores") or []] for entry in entries]
        if not rows[0] or any(len(row) != len(rows[0]) for row in rows):
            return None
        return np.mean(np.array(rows, dtype=float), axis=0)

    def per_layer_states(self) -> tuple[np.ndarray, int] | None:
        """The hidden state (this model's numbering) of each of :meth:`per_layer_scores`, and the
        model's number of states: each entry's ``layers`` and ``num_states`` (a choice of layers
        scores only some states; an entry without them scored every state). ``None`` when there
        are no per-layer scores or the subsets scored different states."""
        if self.per_layer_scores() is None:
            return None
        found = {(tuple(states.tolist()), num) for states, num in map(entry_states, self.per_layer)}
        if len(found) != 1:
            return None
        states, num = found.pop()
        return np.array(states, dtype=int), num

    def n_used(self) -> dict[str, int]:
        """Texts each LRD metric used: the smallest over subsets (``{}`` without layer dynamics)."""
        counts: dict[str, int] = {}
        for dynamics in self.layer_dynamics:
            for metric, count in (dynamics.get("n_used") or {}).items():
                if isinstance(count, int):
                    counts[metric] = min(count, counts.get(metric, count))
        return counts

    def undefined_states(self) -> dict[str, str]:
        """The hidden states whose LRD scores are undefined, and why (``{"h_0": "one vector for all
        texts"}``), over subsets and metric families; empty when every state informs."""
        found: dict[str, str] = {}
        for dynamics in self.layer_dynamics:
            for reasons in (dynamics.get("undefined") or {}).values():
                for state, why in reasons.items():
                    found.setdefault(str(state), str(why))
        return dict(sorted(found.items(), key=lambda item: int(item[0].removeprefix("h_"))))

    def lrd_summary(self) -> dict[str, float]:
        """Model-level LRD scores of this task, averaged over subsets (``None`` values skipped)."""
        values: dict[str, list[float]] = {}
        for dynamics in self.layer_dynamics:
            for key, value in (dynamics.get("summary") or {}).items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
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

    @property
    def removed_blocks(self) -> list[int]:
        """Blocks removed from the base model (base numbering; ``[]`` for anything but a pruned model)."""
        blocks = (self.experiment_kwargs or {}).get("removed_blocks") or []
        return sorted(int(b) for b in blocks) if isinstance(blocks, list) else []

    def original_layers(self, num_states: int) -> np.ndarray:
        """Hidden-state index in the *base* model of each of this variant's ``num_states`` states.

        Block ``b`` produces hidden state ``h_{b+1}``; after removing blocks, the variant's ``h'_0``
        is the base's ``h_0`` and its ``h'_j`` is the output of its ``j``-th kept block ``b``, i.e.
        the base's ``h_{b+1}``. Without removed blocks this is ``0 .. num_states - 1``.
        """
        removed = set(self.removed_blocks)
        if not removed:
            return np.arange(num_states)
        kept = [b for b in range(num_states - 1 + len(removed)) if b not in removed]
        return np.array([0, *(b + 1 for b in kept[: num_states - 1])])

    def scored_layers(self, record: TaskRecord) -> np.ndarray | None:
        """The base model's hidden-state index of each of ``record``'s per-layer scores."""
        found = record.per_layer_states()
        if found is None:
            return None
        states, num_states = found
        return self.original_layers(num_states)[states]

    def base_num_blocks(self, num_states: int) -> int:
        """Blocks of the base model, given this variant's number of hidden states."""
        recorded = (self.experiment_kwargs or {}).get("num_blocks")
        if isinstance(recorded, int) and not isinstance(recorded, bool):
            return recorded
        return num_states - 1 + len(self.removed_blocks)


def entry_states(entry: Mapping[str, Any]) -> tuple[np.ndarray, int]:
    """The hidden state (the model's own numbering) of each score of one ``per_layer`` entry and the
    model's number of states (every state, in order, for an entry that names none)."""
    scores = entry.get("scores") or []
    layers = entry.get("layers")
    named = isinstance(layers, list) and len(layers) == len(scores)
    states = np.array(layers if named else range(len(scores)), dtype=int)
    num = entry.get("num_states")
    return states, int(num) if isinstance(num, int) and named else len(scores)


@dataclass
class ResultsFolder:
    """Everything read from one results folder.

    Attributes:
        root: the folder holding ``<org__name>/`` model folders.
        variants: one per (model, revision, experiment) folder with at least one usable task file,
            sorted by model, revision, experiment.
        unreadable: files left out, with the reason.
        files_read: task result files read successfully.
    """

    root: Path
    variants: list[ModelVariant]
    unreadable: list[UnreadableResult]
    files_read: int


def results_root(folder: str | Path) -> Path:
    """The folder holding ``<org__name>/`` model folders: ``folder/results`` when it exists."""
    folder = Path(folder).expanduser()
    return folder / "results" if (folder / "results").is_dir() else folder


def _load_json(path: Path) -> Any:
    """Parsed JSON; raises ``ValueError`` with a short reason for any unreadable file."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})") from err
    except UnicodeDecodeError as err:
        raise ValueError(f"not UTF-8 text ({err.reason})") from err
    except OSError as err:
        raise ValueError(f"cannot be read ({err.strerror or err})") from err


def _task_record(data: Any, path: Path) -> TaskRecord:
    """The record of one task file; raises ``ValueError`` saying what is wrong with it."""
    if not isinstance(data, dict):
        raise ValueError(f"not an mteb task result (a JSON {type(data).__name__}, expected an object)")
    if not isinstance(data.get("task_name"), str) or not isinstance(data.get("scores"), dict):
        raise ValueError("not an mteb task result (no 'task_name' / 'scores')")
    scores = data["scores"]
    split = next((s for s in _PREFERRED_SPLITS if s in scores), next(iter(scores), None))
    if split is None:
        raise ValueError("no split in 'scores'")
    rows = scores[split]
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"split {split!r} has no subsets")
    for row in rows:
        value = row.get("main_score") if isinstance(row, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            subset = row.get("hf_subset", "?") if isinstance(row, dict) else "?"
            raise ValueError(f"subset {subset!r} of split {split!r} has no finite main_score ({value!r})")
    date = data.get("date")
    return TaskRecord(
        task=data["task_name"],
        split=split,
        main_score=float(np.mean([row["main_score"] for row in rows])),
        subsets=rows,
        path=path,
        mteb_version=data.get("mteb_version") if isinstance(data.get("mteb_version"), str) else None,
        date=float(date) if isinstance(date, (int, float)) and not isinstance(date, bool) else None,
        dataset_revision=data.get("dataset_revision"),
    )


def _variant(root: Path, folder: Path, unreadable: list[UnreadableResult]) -> ModelVariant:
    parts = folder.relative_to(root).parts
    meta: dict[str, Any] = {}
    meta_path = folder / "model_meta.json"
    if meta_path.exists():
        try:
            loaded = _load_json(meta_path)
            meta = loaded if isinstance(loaded, dict) else {}
        except ValueError as err:
            unreadable.append(UnreadableResult(meta_path, f"{err}; model name taken from the folder"))
    kwargs = meta.get("experiment_kwargs")
    return ModelVariant(
        model=meta.get("name") or parts[0].replace("__", "/"),
        revision=meta.get("revision") or parts[1],
        experiment=parts[3] if len(parts) >= 4 and parts[2] == "experiments" else None,
        experiment_kwargs=kwargs if isinstance(kwargs, dict) and kwargs else None,
        folder=folder,
    )


def read_results(folder: str | Path, *, warn: bool = True) -> ResultsFolder:
    """Every model variant under an mteb results folder, and every file that had to be left out.

    Args:
        folder: a ``ResultCache`` folder (holding ``results/``) or the ``results/`` folder itself.
        warn: issue one ``UserWarning`` naming each unreadable file.

    Returns:
        A :class:`ResultsFolder`.

    Raises:
        ValueError: when ``folder`` does not exist or is not a folder.
    """
    root = results_root(folder)
    if not root.is_dir():
        raise ValueError(f"results folder {folder} does not exist (or is not a folder)")
    variants: dict[Path, ModelVariant] = {}
    unreadable: list[UnreadableResult] = []
    files_read = 0
    found: dict[tuple[Path, str], list[TaskRecord]] = {}
    for path in sorted(root.rglob("*.json")):
        if path.name in _NOT_RESULTS:
            continue
        parts = path.parent.relative_to(root).parts
        try:
            if not (len(parts) == 2 or (len(parts) == 4 and parts[2] == "experiments")):
                raise ValueError(
                    "not in the <org__model>/<revision>/[experiments/<name>/] layout of an mteb results folder"
                )
            record = _task_record(_load_json(path), path)
        except ValueError as err:
            unreadable.append(UnreadableResult(path, str(err)))
            continue
        found.setdefault((path.parent, record.task), []).append(record)
    for (folder_path, task), records in found.items():
        # two files of one task in one folder: keep mteb's own name (<Task>.json), name the other
        records.sort(key=lambda r: r.path is None or r.path.stem != task)
        kept, *extra = records
        unreadable.extend(
            UnreadableResult(r.path, f"a second result of task {task!r} (kept: {kept.path})")
            for r in extra
            if r.path is not None
        )
        variant = variants.get(folder_path)
        if variant is None:
            variant = variants[folder_path] = _variant(root, folder_path, unreadable)
        variant.tasks[task] = kept
        files_read += 1
    unreadable.sort(key=lambda u: str(u.path))
    if warn and unreadable:
        warnings.warn(
            f"{len(unreadable)} result file(s) under {root} left out of the results (their scores are NOT "
            "in any mean):\n  " + "\n  ".join(str(u) for u in unreadable),
            UserWarning,
            stacklevel=2,
        )
    ordered = sorted(variants.values(), key=lambda v: (v.model, v.revision, v.experiment or ""))
    return ResultsFolder(root, ordered, unreadable, files_read)


def load_variants(folder: str | Path) -> list[ModelVariant]:
    """The model variants of :func:`read_results` (warning about unreadable files)."""
    return read_results(folder).variants
