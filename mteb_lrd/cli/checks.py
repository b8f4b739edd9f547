"""What every command checks before computing, and how any error becomes one line.

Before a command loads a model, :func:`preflight` checks that every folder or file it will write
(``--results``, ``--output``, ``--out``, ``--cache-dir``, ...) can be written, that a model given as
a path exists, and, offline, that every MTEB task asked for is available without the Hub. After
that, :func:`error_line` turns any error into one line that names the path or the thing at fault.
"""

from __future__ import annotations

import argparse
import errno
import os
from collections.abc import Iterator
from pathlib import Path

from mteb_lrd.extraction.loading import model_location

__all__ = ["HUB_HINT", "check_writable", "error_line", "preflight"]

# argparse destinations that are written to, by command (other commands: all of these)
_WRITTEN = ("results", "output", "out", "cache_dir", "data_dir", "output_dir")
_READ_ONLY = {"report": ("results",)}  # report reads --results
_FILE_SUFFIXES = (".json", ".jsonl", ".md", ".html", ".csv", ".png", ".txt")

HUB_HINT = (
    "this needs the Hugging Face Hub, which is unreachable here (offline mode or no network): connect "
    "and unset HF_HUB_OFFLINE, or use a local task (--local-task FOLDER=TYPE, demo, LocalSTSBenchmark, ...) "
    "and a local model folder"
)


def _offline() -> bool:
    return any(
        os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
        for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _blocking_ancestor(path: Path) -> Path:
    """The nearest existing folder-or-file at or above ``path``."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(path.anchor or ".")


def check_writable(path: str | os.PathLike[str], what: str, *, is_file: bool = False) -> None:
    """Raise an ``OSError`` naming ``path`` when it cannot be written (nothing is created).

    Args:
        path: a folder to create or fill, or (``is_file``) a file to create or replace.
        what: the option it came from, e.g. ``"--results"``, for the message.
        is_file: whether ``path`` is a file.
    """
    path = Path(path).expanduser()
    if path.exists():
        if is_file and path.is_dir():
            raise IsADirectoryError(errno.EISDIR, f"{what} {path} is a folder; give a file name")
        if not is_file and not path.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, f"{what} {path} is a file, not a folder")
        folder = path.parent if is_file else path
        if not os.access(folder, os.W_OK | os.X_OK) or (is_file and not os.access(path, os.W_OK)):
            raise PermissionError(errno.EACCES, f"{what} {path} is not writable (permission denied)")
        return
    ancestor = _blocking_ancestor(path.parent)
    if not ancestor.is_dir():
        raise NotADirectoryError(
            errno.ENOTDIR, f"{what} {path} cannot be created: {ancestor} is a file, not a folder"
        )
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, f"{what} {path} cannot be created: {ancestor} is not writable")


def _values(value: object) -> Iterator[str]:
    if value is None:
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _values(item)
    else:
        yield from (part for part in str(value).split(",") if part.strip())


def model_specs(args: argparse.Namespace) -> list[str]:
    """The models a command names (``--model`` / ``--models``), one per name."""
    return [*_values(getattr(args, "model", None)), *_values(getattr(args, "models", None))]


def _check_models(args: argparse.Namespace) -> None:
    for spec in _values(getattr(args, "model", None)):
        model_location(spec, "--model")


def _hub_cached(repo_id: str) -> bool:
    """Whether a Hub dataset is in the local Hugging Face caches (then offline runs can use it)."""
    try:
        from huggingface_hub import constants
    except ImportError:  # pragma: no cover - a declared dependency
        return False
    if (Path(constants.HF_HUB_CACHE) / f"datasets--{repo_id.replace('/', '--')}").is_dir():
        return True
    from datasets import config as datasets_config

    return (Path(datasets_config.HF_DATASETS_CACHE) / repo_id.replace("/", "___")).is_dir()


def _check_hub_tasks(args: argparse.Namespace) -> None:
    names = [*_values(getattr(args, "task", None)), *_values(getattr(args, "tasks", None))]
    if not names or not _offline():
        return
    import mteb

    from mteb_lrd.tasks.task_names import canonical_task_name

    for name in names:
        if canonical_task_name(name.strip()).startswith("Local"):
            continue  # a local task (the shared STS sets, the bundled sample) under any of its names
        try:
            task = mteb.get_task(name.strip())
        except Exception:  # noqa: BLE001 - not an mteb task name: the command reports it
            continue
        path = str(task.metadata.dataset.get("path", ""))
        if path and not path.startswith("local/") and not _hub_cached(path):
            raise ConnectionError(f"task {name.strip()!r} reads the dataset {path} from the Hub: {HUB_HINT}")


def preflight(args: argparse.Namespace) -> None:
    """Checks that need no model: output folders writable, model paths present, Hub tasks available.

    Raises:
        OSError: naming the path or task at fault.
    """
    skip = _READ_ONLY.get(str(getattr(args, "command", "")), ())
    for dest in _WRITTEN:
        if dest in skip:
            continue
        value = getattr(args, dest, None)
        if value is None or value == "":
            continue
        option = "--" + dest.replace("_", "-")
        check_writable(value, option, is_file=Path(str(value)).suffix.lower() in _FILE_SUFFIXES)
    _check_models(args)
    _check_hub_tasks(args)


def _is_hub_error(err: BaseException) -> bool:
    names = {cls.__name__ for cls in type(err).__mro__}
    text = str(err)
    return bool(
        names & {"OfflineModeIsEnabled", "LocalEntryNotFoundError", "HfHubHTTPError"}
        or (isinstance(err, ConnectionError) and ("Hub" in text or "huggingface" in text.lower()))
        or "Couldn't reach" in text
        or "huggingface.co" in text
    )


def error_line(err: BaseException) -> str:
    """One line saying what went wrong, naming the file / folder / key at fault."""
    if isinstance(err, KeyError):
        message = str(err.args[0]) if err.args else "a required key is missing"
        if len(err.args) == 1 and not isinstance(err.args[0], str):
            message = f"missing key {err.args[0]!r}"
        elif message and " " not in message:
            message = f"unknown or missing key {message!r}"
    elif isinstance(err, OSError):
        message = err.strerror or str(err)
        filename = err.filename
        if filename is not None and str(filename) not in message:
            message = f"{filename}: {message}"
        if err.filename2 is not None and str(err.filename2) not in message:
            message = f"{message} (and {err.filename2})"
        if _is_hub_error(err) and HUB_HINT not in message:
            message = f"{message}: {HUB_HINT}"
    else:
        message = str(err) or type(err).__name__
        if "Repo id must" in message or "repo_id" in message:
            message = f"{message} (a model path that does not exist is read as a Hub id: check the path)"
    return " ".join(message.split())
