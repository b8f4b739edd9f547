"""Where a study's cells are recorded: one JSON record per (model, task) under
``records/<model>/<task>.json``, written atomically, and the scratch folder a cell keeps until its
record is written (so that a cell interrupted after hours resumes where it stopped)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mteb_lrd.io import atomic_write_json, read_json

__all__ = ["load_records", "read_record", "record_path", "scratch_path", "write_record"]


def record_path(out_dir: str | Path, model: str, task: str) -> Path:
    """Where a cell's record lives: ``records/<model>/<task>.json``."""
    return Path(out_dir) / "records" / model.replace("/", "__") / f"{task}.json"


def scratch_path(out_dir: str | Path, model: str, task: str) -> Path:
    """Where a cell keeps what it computed until its record is written (``records/<model>/<task>.scratch``):
    extraction shards and finished pruned variants, so that a cell interrupted after hours resumes
    where it stopped."""
    return record_path(out_dir, model, task).with_suffix(".scratch")


def write_record(path: Path, payload: dict[str, Any]) -> None:
    """Write a JSON record atomically; NaN becomes ``null``."""
    atomic_write_json(path, payload)


def read_record(path: Path) -> dict[str, Any] | None:
    """A record written by :func:`write_record`, or ``None`` when absent.

    Raises:
        ValueError: naming the file when it is not valid JSON.
    """
    return read_json(path) if path.is_file() else None


def load_records(out_dir: str | Path) -> list[dict[str, Any]]:
    """Every finished cell record of a study folder (``records/<model>/<task>.json``; the
    ``.partial.json`` progress files that prune studies of earlier versions left are skipped)."""
    paths = sorted(Path(out_dir).glob("records/*/*.json"))
    return [read_json(p) for p in paths if not p.name.endswith(".partial.json")]
