"""A folder of JSON-lines files as an MTEB task: which files are splits, and reading them."""

from __future__ import annotations

import hashlib
import logging
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from mteb_lrd.tasks.local_tasks.builder import check_type, make_task
from mteb_lrd.tasks.local_tasks.validation import Rows

__all__ = ["SPLIT_NAMES", "content_hash", "local_task"]

logger = logging.getLogger(__name__)

SPLIT_NAMES: tuple[str, ...] = ("train", "dev", "validation", "test")
"""File stems taken as splits when ``eval_splits`` is not given (other ``*.jsonl`` files are named in a warning)."""

_DOCUMENT_FILES = ("corpus", "queries")


def content_hash(paths: Iterable[Path]) -> str:
    """12 hex digits of the files' names and bytes: the dataset revision recorded with results."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _split_folder(folder: Path, task_type: str) -> Path:
    return folder / "qrels" if task_type in ("Retrieval", "Reranking") else folder


def _choose_splits(folder: Path, task_type: str, eval_splits: Sequence[str] | None) -> list[str]:
    split_dir = _split_folder(folder, task_type)
    stems = sorted(p.stem for p in split_dir.glob("*.jsonl"))
    if task_type in ("Retrieval", "Reranking"):
        stray = sorted(p.name for p in folder.glob("*.jsonl") if p.stem not in _DOCUMENT_FILES)
    else:
        stray = [
            f"{s}.jsonl"
            for s in stems
            if s not in SPLIT_NAMES and (eval_splits is None or s not in eval_splits)
        ]
    if eval_splits is not None:
        splits = list(eval_splits)
    else:
        splits = [s for s in stems if s in SPLIT_NAMES and s != "train"]
        if task_type in ("Retrieval", "Reranking"):
            stray += [f"qrels/{s}.jsonl" for s in stems if s not in SPLIT_NAMES]
    if stray:
        message = (
            f"{folder}: ignoring {', '.join(stray)}: not a split of a {task_type} task (split files are "
            f"named {', '.join(SPLIT_NAMES)}; pass eval_splits=[...] to evaluate other names)"
        )
        logger.warning(message)
        warnings.warn(message, stacklevel=3)
    return splits


def local_task(
    folder: str | Path,
    task_type: str,
    *,
    name: str | None = None,
    eval_splits: Sequence[str] | None = None,
    languages: Sequence[str] = ("eng-Latn",),
    **options: Any,
) -> type:
    """Turn a local folder of JSON lines into an MTEB task class (formats: :mod:`mteb_lrd.tasks.local_tasks`).

    Args:
        folder: the data folder (``~`` is expanded).
        task_type: one of :data:`~mteb_lrd.tasks.local_tasks.TASK_TYPES`.
        name: the task name; default: the folder name.
        eval_splits: default: the files named ``dev``, ``validation`` or ``test`` (``.jsonl``; for
            Retrieval / Reranking under ``qrels/``). Other ``*.jsonl`` files are named in a warning
            and ignored, unless listed here.
        languages: the task's languages, e.g. ``["eng-Latn"]``.
        **options: passed to :func:`~mteb_lrd.tasks.local_tasks.make_task` (``score_range``,
            ``n_experiments``, ...).

    Returns:
        The task class; ``local_task(...)()`` is the task. Rows are read and checked (every row,
        errors naming ``<file>:<line>``) when the task loads its data.

    Raises:
        ValueError: for an unknown type, a missing folder or file.
    """
    check_type(task_type)
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise ValueError(
            f"task folder {folder} does not exist" if not folder.exists() else f"{folder} is not a folder"
        )
    split_dir = _split_folder(folder, task_type)
    splits = _choose_splits(folder, task_type, eval_splits)
    needed = {split_dir / f"{s}.jsonl" for s in splits}
    if task_type == "Classification":
        needed.add(folder / "train.jsonl")
    if task_type in ("Retrieval", "Reranking"):
        needed |= {folder / "corpus.jsonl", folder / "queries.jsonl"}
    if task_type == "Reranking":
        needed |= {folder / "top_ranked" / f"{s}.jsonl" for s in splits}
    missing = sorted(str(p) for p in needed if not p.is_file())
    if not splits or missing:
        wanted = missing or [f"{split_dir}/<split>.jsonl with <split> one of {', '.join(SPLIT_NAMES[1:])}"]
        raise ValueError(f"{folder}: missing files {wanted} for a {task_type} task")

    def load() -> dict[str, Any]:
        if task_type in ("Retrieval", "Reranking"):
            corpus, queries = Rows.read(folder / "corpus.jsonl"), Rows.read(folder / "queries.jsonl")
            per_split = {}
            for s in splits:
                parts = {"corpus": corpus, "queries": queries, "qrels": Rows.read(split_dir / f"{s}.jsonl")}
                if task_type == "Reranking":
                    parts["top_ranked"] = Rows.read(folder / "top_ranked" / f"{s}.jsonl")
                per_split[s] = parts
            return {"default": per_split}
        wanted = splits + (["train"] if task_type == "Classification" else [])
        return {"default": {s: Rows.read(folder / f"{s}.jsonl") for s in wanted}}

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
