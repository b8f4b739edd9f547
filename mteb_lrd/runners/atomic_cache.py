"""An ``mteb.ResultCache`` whose files are never torn, also with many writers on one folder.

``mteb.ResultCache.save_to_cache`` opens ``<Task>.json`` for writing and dumps into it, then
rewrites ``model_meta.json`` and merges ``run_settings.jsonl`` (read, merge, rewrite) in the model's
revision folder. A worker killed mid-write leaves a torn ``<Task>.json`` that stops every later run
with a JSON error naming no file, and two units of one model finishing together can lose each
other's ``run_settings.jsonl`` entries. :class:`AtomicResultCache` keeps mteb's own serialisation
and layout byte for byte: mteb writes into a private staging folder (with a copy of the current
``run_settings.jsonl``, so mteb's own merge runs), then each file replaces its target through
:func:`mteb_lrd.io.atomic_write_bytes`, all under an exclusive lock on the revision folder. A torn
``<Task>.json`` left by an older writer is moved aside (kept, named in a warning) and the task re-run.
No private mteb name is used.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mteb

from mteb_lrd.io import atomic_write_bytes

__all__ = ["AtomicResultCache", "LOCK_NAME"]

logger = logging.getLogger(__name__)

LOCK_NAME = ".mteb-lrd.lock"
"""Lock file in a revision folder, only where the folder itself cannot be locked; ``*.json``
look-ups of mteb never see it."""

_SIDE_FILES = ("model_meta.json", "run_settings.jsonl")

try:  # POSIX; elsewhere writes stay atomic but units of one model are not serialised
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive lock on ``folder``: on the folder itself (nothing is left behind), or, where the
    file system cannot lock a folder (NFS emulates ``flock`` with write locks), on a
    :data:`LOCK_NAME` file in it, which then stays (removing it would let two writers in)."""
    folder.mkdir(parents=True, exist_ok=True)
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        os.close(fd)
        fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


class AtomicResultCache(mteb.ResultCache):
    """``mteb.ResultCache`` with atomic, lock-serialised writes and a clear answer to torn files.

    Attributes:
        written: every ``<Task>.json`` this instance wrote, in order.
    """

    def __init__(self, cache_path: Path | str | None = None) -> None:
        super().__init__(cache_path)
        self.written: list[Path] = []

    def save_to_cache(self, task_result: Any, model_name: Any, model_revision: str | None = None,
                      **kwargs: Any) -> None:  # fmt: skip
        """Save like ``mteb.ResultCache.save_to_cache`` (same files, same bytes), atomically."""
        target = self.get_task_result_path(task_result.task_name, model_name, model_revision)
        folder = target.parent
        with _locked(folder), tempfile.TemporaryDirectory(prefix="mteb-lrd-staging-") as tmp:
            staging = mteb.ResultCache(tmp)
            staged = staging.get_task_result_path(task_result.task_name, model_name, model_revision)
            staged.parent.mkdir(parents=True, exist_ok=True)
            for name in _SIDE_FILES[1:]:  # mteb merges new run settings into the current file
                if (folder / name).is_file():
                    shutil.copyfile(folder / name, staged.parent / name)
            staging.save_to_cache(task_result, model_name, model_revision, **kwargs)
            for name in (target.name, *_SIDE_FILES):
                source = staged.parent / name
                if source.is_file():
                    atomic_write_bytes(folder / name, source.read_bytes())
        self.written.append(target)

    def load_task_result(self, task_name: str, model_name: Any, *args: Any, **kwargs: Any) -> Any:
        """Load like ``mteb.ResultCache.load_task_result``; a torn or unreadable ``<Task>.json`` is
        moved aside to ``<Task>.json.torn-<time>`` with a warning naming it, and counts as missing."""
        try:
            return super().load_task_result(task_name, model_name, *args, **kwargs)
        except (ValueError, TypeError, KeyError) as err:  # JSONDecodeError and pydantic errors included
            path = self.get_task_result_path(task_name, model_name, *args[:1], **_path_kwargs(kwargs))
            if not path.is_file():
                raise
            aside = path.with_name(f"{path.name}.torn-{time.strftime('%Y%m%dT%H%M%S')}")
            os.replace(path, aside)
            message = (
                f"mteb-lrd: {path} could not be read ({type(err).__name__}: {str(err)[:200]}); "
                f"moved to {aside.name} and the task is run again"
            )
            logger.warning(message)
            warnings.warn(message, stacklevel=2)
            return None


def _path_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    keep = ("model_revision", "experiment_name")
    return {key: value for key, value in kwargs.items() if key in keep}
