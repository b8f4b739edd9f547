"""(model, task[, pruned variant]) units fanned out over Ray, each unit one Ray task.

A :class:`Unit` is one model on one task, optionally with transformer blocks removed first (a
pruned variant, stored by mteb as an experiment of the base model). :func:`run_units` runs every
unit as its own Ray task with its own resources (``num_gpus`` / ``num_cpus``), on a local Ray it
starts or on the cluster at ``address``. Each unit writes only its own ``<Task>.json`` in the
results folder's mteb layout (:class:`~mteb_lrd.runners.atomic_cache.AtomicResultCache`:
atomic, lock-serialised with the unit's model siblings), then a small ledger entry
``<results>/mteb-lrd-units/<key>.json`` naming the file. A re-run skips a unit whose ledger entry
names a result file that is readable and has the layer keys in every row (any rows, for a task
type without layer keys); a unit whose worker dies
is retried by Ray (``max_retries``) and resumes from the extraction shards its first attempt saved
(:func:`unit_cache_dir`, removed once the unit's result is written); a unit that raises is reported
and the others go on.

The model folders and local task folders must be readable at the same path on every node, and the
results folder must be shared by all nodes (e.g. NFS), as for any multi-node mteb run. Relative
paths are the driver's: they are made absolute before the units leave it.
"""

from __future__ import annotations

import os
import shutil
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from mteb_lrd.adapter.layer_choice import DEFAULT_LAYER_CHOICE
from mteb_lrd.adapter.options import SUPPORTED_TASK_TYPES, row_is_complete
from mteb_lrd.extraction.options import scoring_settings
from mteb_lrd.extraction.templates import template_label
from mteb_lrd.io import atomic_write_json, content_key, folder_bytes, read_json
from mteb_lrd.progress import Progress
from mteb_lrd.runners.run_config import UnitConfig

__all__ = ["LEDGER_FOLDER", "EXTRACTION_CACHE_FOLDER", "RayResources", "Unit", "UnitConfig", "UnitOutcome",
           "is_finished", "ray_init_kwargs", "run_unit", "run_units", "unit_cache_dir", "units_for"]  # fmt: skip

LEDGER_FOLDER = "mteb-lrd-units"
"""Folder of ledger entries in the results folder (beside mteb's ``results/``; mteb never reads it)."""

EXTRACTION_CACHE_FOLDER = "mteb-lrd-cache"
"""Folder of temporary extraction caches in the results folder: ``mteb-lrd run`` keeps a model's
shards in ``<model>/`` until the model's tasks are done, a Ray unit in ``units/<key>/`` until its
result is written (so a retried unit runs forward passes only for the missing shards)."""


@dataclass(frozen=True)
class Unit:
    """One model on one task.

    Attributes:
        model: ``default``, a panel name, or a model folder (the same path on every node).
        task: a task name (``demo``, ``LocalSTSBenchmark``, an MTEB name) or ``FOLDER=TYPE`` for a
            local task folder.
        blocks: transformer blocks to remove first (a pruned variant); empty for the model itself.
    """

    model: str
    task: str
    blocks: tuple[int, ...] = ()

    @property
    def key(self) -> str:
        """Stable identity of the unit (folders resolved to absolute paths, task names to the one
        name of the task: ``STS12`` and ``LocalSTS12`` write one result file)."""
        from mteb_lrd.tasks.task_names import canonical_task_name

        model = str(Path(self.model).resolve()) if Path(self.model).is_dir() else self.model
        task, sep, kind = self.task.rpartition("=")
        task = (
            f"{Path(task).resolve()}={kind}"
            if sep and Path(task).is_dir()
            else canonical_task_name(self.task)
        )
        return content_key({"model": model, "task": task, "blocks": list(self.blocks)})[:24]

    def __str__(self) -> str:
        pruned = f" without blocks {list(self.blocks)}" if self.blocks else ""
        return f"{self.model}{pruned} × {self.task}"


@dataclass(frozen=True)
class UnitOutcome:
    """What became of one unit: ``status`` is ``done``, ``skipped`` or ``failed``."""

    unit: Unit
    status: str
    path: str | None = None
    main_score: float | None = None
    seconds: float = 0.0
    error: str | None = None
    disk_mb: dict[str, float] | None = None
    """Disk the unit used: ``{"spill_peak": MB, "cache": MB}`` (the cache measured at the unit's end)."""

    def line(self) -> str:
        """One progress line."""
        score = f"main={self.main_score:.4f}" if self.main_score is not None else ""
        where = self.error if self.status == "failed" else self.path
        disk = (
            f"  disk: spill peak {self.disk_mb['spill_peak']:.1f} MB, cache {self.disk_mb['cache']:.1f} MB"
            if self.disk_mb
            else ""
        )
        return f"[{self.status}] {self.unit}  {score}  {self.seconds:.1f}s  {where}{disk}"


def units_for(models: Sequence[str], tasks: Sequence[str],
              variants: Sequence[tuple[int, ...]] = ((),)) -> list[Unit]:  # fmt: skip
    """Every (model, task, variant) combination, models outermost."""
    return [Unit(m, t, tuple(v)) for m in models for v in variants for t in tasks]


def _ledger(config: UnitConfig, unit: Unit) -> Path:
    # A run stored elsewhere (another experiment of the model: a template, settings that change the
    # embeddings; another name or revision) has its own entry, so neither skips the other.
    template = config.options.get("template")
    suffix = f"-template_{template_label(template)}" if template else ""
    elsewhere = {**scoring_settings(config.options), "name": config.name, "revision": config.revision}
    if any(value is not None for value in elsewhere.values()):
        suffix += f"-{content_key(elsewhere)[:12]}"
    return Path(config.results) / LEDGER_FOLDER / f"{unit.key}{suffix}.json"


def is_finished(unit: Unit, config: UnitConfig) -> bool:
    """Whether ``unit`` has a readable result file with ``config``'s layer keys in every row (and
    per-layer scores of every hidden state its layer choice names)."""
    try:
        entry = read_json(_ledger(config, unit))
        data = read_json(entry["path"])
        rows = [row for split_rows in data["scores"].values() for row in split_rows]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False
    if entry.get("task_type", SUPPORTED_TASK_TYPES[0]) not in SUPPORTED_TASK_TYPES:
        return bool(rows)  # a task type without layer keys: its ordinary scores are the whole result
    choice = config.options.get("per_layer_layers", DEFAULT_LAYER_CHOICE)
    return bool(rows) and all(row_is_complete(row, config.wanted_keys, choice) for row in rows)


def unit_cache_dir(unit: Unit, config: UnitConfig) -> Path:
    """Where ``unit`` keeps its extraction shards while it runs (see :data:`EXTRACTION_CACHE_FOLDER`)."""
    return Path(config.results) / EXTRACTION_CACHE_FOLDER / "units" / unit.key


def _tasks(spec: str) -> list[Any]:
    from mteb_lrd.tasks.task_names import resolve_tasks

    folder, sep, kind = spec.rpartition("=")
    return resolve_tasks([], [spec]) if sep and folder else resolve_tasks([spec], [])


def run_unit(unit: Unit, config: UnitConfig) -> UnitOutcome:
    """Run one unit in this process (what each Ray task does); writes its result and ledger entry.

    Raises:
        ValueError: for an unknown model or task (the message says what is allowed).
    """
    from mteb_lrd.runners.model_evaluation import evaluate_model

    start = time.perf_counter()
    cache_dir = config.options.get("cache_dir") if config.cache else None
    temporary = config.cache and cache_dir is None  # a cache_dir the user gave is kept
    if temporary:
        cache_dir = str(unit_cache_dir(unit, config))
    tasks = _tasks(unit.task)
    evaluated = evaluate_model(unit.model, tasks, config, cache_dir, blocks=unit.blocks)
    wrapped, cache = evaluated.wrapped, evaluated.cache
    task_result = evaluated.task_results[0]
    path = (
        cache.written[-1]
        if cache.written
        else cache.get_task_result_path(task_result.task_name, wrapped.mteb_model_meta)
    )
    rows = [row for split_rows in task_result.scores.values() for row in split_rows]
    main = sum(row["main_score"] for row in rows) / len(rows) if rows else None
    entry = {
        "unit": asdict(unit),
        "path": str(path),
        "main_score": main,
        "task_type": str(tasks[0].metadata.type),
    }
    atomic_write_json(_ledger(config, unit), entry)
    disk = {
        "spill_peak": round(wrapped.peak_spill_bytes / 2**20, 3),
        "cache": round(folder_bytes(cache_dir) / 2**20, 3) if cache_dir else 0.0,
    }
    if temporary and cache_dir is not None:  # the result is written: the vectors are not needed to resume
        shutil.rmtree(cache_dir, ignore_errors=True)
    return UnitOutcome(unit, "done", str(path), main, time.perf_counter() - start, disk_mb=disk)


def _guarded(
    runner: Callable[[Unit, UnitConfig], UnitOutcome], unit: Unit, config: UnitConfig
) -> UnitOutcome:
    start = time.perf_counter()
    try:
        return runner(unit, config)
    except Exception as err:  # noqa: BLE001 - reported per unit; the other units go on
        traceback.print_exc()
        return UnitOutcome(
            unit, "failed", seconds=time.perf_counter() - start, error=f"{type(err).__name__}: {err}"
        )


def ray_init_kwargs(address: str | None = None, num_cpus: int | None = None) -> dict[str, Any]:
    """``ray.init`` arguments: join ``address``, or start a local Ray whose workers import this
    ``mteb_lrd`` (its folder goes first on the workers' ``PYTHONPATH``)."""
    if address is not None:
        return {"address": address}
    root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    return {
        "num_cpus": num_cpus,
        "include_dashboard": False,
        "runtime_env": {"env_vars": {"PYTHONPATH": path}},
    }


@dataclass(frozen=True)
class RayResources:
    """Where and with what the Ray tasks of a run execute.

    Attributes:
        address: a Ray cluster to join (``auto``, ``ray://host:10001``, ``host:6379``); ``None``
            starts a local Ray with ``num_cpus`` CPUs (or uses the one this process already started).
        gpus_per_unit / cpus_per_unit: Ray resources of each unit's task (fractions allowed).
        max_retries: re-runs of a unit whose worker process dies (Ray's task retries).

    Raises:
        ValueError: for negative resources or retries.
    """

    address: str | None = None
    num_cpus: int | None = None
    gpus_per_unit: float = 0
    cpus_per_unit: float = 1
    max_retries: int = 2

    def __post_init__(self) -> None:
        if self.gpus_per_unit < 0 or self.cpus_per_unit < 0 or self.max_retries < 0:
            raise ValueError(f"resources and retries must be >= 0; got gpus_per_unit={self.gpus_per_unit}, "
                             f"cpus_per_unit={self.cpus_per_unit}, max_retries={self.max_retries}")  # fmt: skip


def run_units(
    units: Sequence[Unit],
    config: UnitConfig,
    resources: RayResources | None = None,
    *,
    runner: Callable[[Unit, UnitConfig], UnitOutcome] = run_unit,
    progress: bool = True,
) -> list[UnitOutcome]:
    """Run ``units`` as Ray tasks; finished ones are skipped, each is retried if its worker dies.

    Args:
        units: the units (duplicates are run once).
        config: results folder and options shared by every unit.
        resources: the cluster and each unit's resources (default: a local Ray, 1 CPU per unit).
        runner: what a Ray task runs for a unit (default :func:`run_unit`).
        progress: print one line per finished unit and an overall bar (on stderr).

    Returns:
        One outcome per distinct unit, in input order.

    Raises:
        ImportError: when Ray is not installed (``pip install "mteb-lrd[ray]"``).
    """
    resources = RayResources() if resources is None else resources
    try:
        import ray
    except ImportError as err:
        raise ImportError('the Ray executor needs Ray: pip install "mteb-lrd[ray]"') from err

    units = list(dict.fromkeys(units))
    config = _for_workers(config)
    keys = [unit.key for unit in units]
    if len(set(keys)) != len(keys):
        raise ValueError("two units name the same model folder, task and blocks")
    outcomes: dict[Unit, UnitOutcome] = {}
    todo = []
    for unit in units:
        if not config.overwrite and is_finished(unit, config):
            outcomes[unit] = UnitOutcome(unit, "skipped", str(read_json(_ledger(config, unit))["path"]))
        else:
            todo.append(unit)
    bar: Progress[Any] = Progress(total=len(units), desc="units", unit="unit", show=progress)
    for outcome in outcomes.values():
        _report(bar, outcome, progress)
    if todo:
        started = not ray.is_initialized()
        if started:
            ray.init(**ray_init_kwargs(resources.address, resources.num_cpus))
        try:
            remote = ray.remote(_guarded).options(num_cpus=resources.cpus_per_unit,
                                                  num_gpus=resources.gpus_per_unit,
                                                  max_retries=resources.max_retries, name="mteb-lrd-unit")  # fmt: skip
            pending = {remote.remote(runner, _unit_for_workers(unit), config): unit for unit in todo}
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                unit = pending.pop(ready[0])
                try:
                    outcome = replace(ray.get(ready[0]), unit=unit)  # the unit as the caller named it
                except ray.exceptions.RayError as err:  # the worker died more than max_retries times
                    outcome = UnitOutcome(unit, "failed", error=f"{type(err).__name__}: {str(err)[:300]}")
                outcomes[unit] = outcome
                _report(bar, outcome, progress)
        finally:
            if started:
                ray.shutdown()
    bar.close()
    return [outcomes[unit] for unit in units]


def _absolute(path: str) -> str:
    """``path`` made absolute when it names something here: a worker's working folder is not the
    driver's, so a relative folder would name another folder, or none, there."""
    return str(Path(path).resolve()) if Path(path).exists() else path


def _unit_for_workers(unit: Unit) -> Unit:
    """``unit`` with its model folder and local task folder absolute (its key is unchanged)."""
    folder, sep, kind = unit.task.rpartition("=")
    task = f"{_absolute(folder)}={kind}" if sep and folder else unit.task
    return Unit(_absolute(unit.model), task, unit.blocks)


def _for_workers(config: UnitConfig) -> UnitConfig:
    """``config`` with its results folder and extraction cache folder absolute (the driver's)."""
    options = dict(config.options)
    if options.get("cache_dir") is not None:
        options["cache_dir"] = str(Path(options["cache_dir"]).resolve())
    return replace(config, results=str(Path(config.results).resolve()), options=options)


def _report(bar: Progress[Any], outcome: UnitOutcome, progress: bool) -> None:
    if progress:
        bar.write(outcome.line())
    bar.update(1)
