"""The package's one way to touch files: atomic writes, JSON lines, content keys.

Every file mteb-lrd writes (cache shards, records, reports, figures, model sidecars) goes through
:func:`atomic_write_bytes`: the data land in a temporary file in the target folder, are flushed to
disk, and replace the target in one ``os.replace``. A reader sees the old file or the new one,
never a torn one, and a killed writer leaves at most a hidden ``.<name>.<random>.tmp`` behind.
The temporary file is created with mode ``0o666`` filtered by the process umask, so the result has
the permissions of any other file the user creates (``0644`` under umask 022, like mteb's own
result files), not ``mkstemp``'s ``0600``.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mteb_lrd.jsonable import to_jsonable

__all__ = [
    "folder_bytes",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "content_key",
    "path_error",
    "read_json",
    "read_jsonl",
    "read_jsonl_numbered",
    "temporary_folder",
    "texts_digest",
    "to_jsonable",
]


def path_error(err: OSError, message: str) -> OSError:
    """An ``OSError`` of the same kind (same errno) whose message is ``message`` (it should name the path).

    ``str()`` of the result is ``[Errno N] message``; its ``strerror`` is ``message``, which is what
    the command line prints.
    """
    if err.errno is None:
        return OSError(message)
    return OSError(err.errno, message)


def _ensure_folder(folder: Path) -> None:
    """Create ``folder`` and its parents; a clear error when a file is in the way or it is not writable."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as err:
        blocker = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), folder)
        raise NotADirectoryError(
            errno.ENOTDIR, f"cannot create the folder {folder}: {blocker} is a file, not a folder"
        ) from err
    except OSError as err:
        raise path_error(err, f"cannot create the folder {folder}: {err.strerror or err}") from err


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file in the same folder + ``os.replace``).

    Args:
        path: the target file; missing parent folders are created.
        data: the bytes to write.

    Returns:
        The target path.

    Raises:
        OSError: when the folder cannot be created or written, or a folder is where the file should
            be; the message names the path (the target is left as it was).
    """
    path = Path(path)
    _ensure_folder(path.parent)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, f"cannot write {path}: a folder is in its place")
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        # os.open applies the umask to 0o666, as open() does for an ordinary new file.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as err:
        raise path_error(err, f"cannot write {path}: {err.strerror or err} (in {path.parent})") from err
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise path_error(err, f"cannot write {path}: {err.strerror or err}") from err
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def temporary_folder(parent: str | os.PathLike[str], prefix: str) -> Path:
    """A new, uniquely named folder in ``parent`` for building a result that is renamed into place.

    Unlike ``tempfile.mkdtemp`` (mode ``0700``) the folder gets ``0777`` filtered by the umask, so
    the finished folder, once renamed, is as readable as any other folder the user creates.

    Args:
        parent: where to create it (created when missing); use the target's own folder so the final
            ``os.replace`` is a rename on one file system.
        prefix: start of the folder name, e.g. ``".model.partial-"``.

    Returns:
        The new, empty folder.
    """
    parent = Path(parent)
    _ensure_folder(parent)
    folder = parent / f"{prefix}{uuid.uuid4().hex[:12]}"
    try:
        folder.mkdir(mode=0o777)
    except OSError as err:
        raise path_error(err, f"cannot create a folder in {parent}: {err.strerror or err}") from err
    return folder


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """UTF-8 text version of :func:`atomic_write_bytes`."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], payload: Any, *, indent: int | None = 1) -> Path:
    """Write ``payload`` as JSON atomically; arrays become lists and NaN / Inf become ``null``."""
    return atomic_write_text(path, json.dumps(to_jsonable(payload), indent=indent, ensure_ascii=False) + "\n")


def read_json(path: str | os.PathLike[str]) -> Any:
    """Parse one JSON file.

    Raises:
        ValueError: naming the file and the position when it is not valid JSON (a torn or hand-edited
            file), instead of a bare ``JSONDecodeError``.
        OSError: when it cannot be read.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{err.lineno}:{err.colno}: not valid JSON ({err.msg})") from err


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Rows of a JSON-lines file (blank lines skipped); every row must be a JSON object.

    Raises:
        ValueError: ``<file>:<line>: ...`` for a line that is not a JSON object.
        OSError: when the file cannot be read.
    """
    return [row for _, row in read_jsonl_numbered(path)]


def read_jsonl_numbered(path: str | os.PathLike[str]) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, row)`` for every row of a JSON-lines file (blank lines skipped; lines count from 1).

    Raises:
        ValueError: ``<file>:<line>: ...`` for a line that is not a JSON object (or not UTF-8).
        OSError: when the file cannot be read.
    """
    path = Path(path)
    rows = []
    with path.open(encoding="utf-8") as handle:
        number = 0
        try:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as err:
                    raise ValueError(f"{path}:{number}: not a JSON object ({err.msg})") from err
                if not isinstance(row, dict):
                    raise ValueError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
                rows.append((number, row))
        except UnicodeDecodeError as err:
            raise ValueError(f"{path}:{number + 1}: not UTF-8 text ({err.reason})") from err
    return rows


def content_key(payload: Mapping[str, Any]) -> str:
    """A stable SHA-256 hex key of a JSON-serialisable mapping (keys sorted)."""
    blob = json.dumps(payload, sort_keys=True, default=str, ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()


def texts_digest(texts: Sequence[str]) -> str:
    """SHA-256 of a list of texts (order matters; no two lists of texts share a digest by concatenation)."""
    h = hashlib.sha256()
    for text in texts:
        h.update(hashlib.sha256(text.encode("utf-8")).digest())
    return h.hexdigest()


def folder_bytes(folder: str | os.PathLike[str]) -> int:
    """Bytes of the files under ``folder`` (0 when it does not exist)."""
    root = Path(folder)
    return sum(path.stat().st_size for path in root.rglob("*") if path.is_file()) if root.is_dir() else 0
