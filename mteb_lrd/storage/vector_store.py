"""Pooled per-layer vectors of the texts a task encoded, keyed by ``(prompt, text)``.

The vectors stay in RAM while they fit in a memory budget; chunks added above it go to a
disk-backed file, memory-mapped for reading (one mapping of the whole file). That file is an
anonymous temporary file (``O_TMPFILE`` / unlinked at creation) in the spill folder: it has no
name, so nothing is left behind whatever happens to the process (exception, ``kill -9``), and
its space is freed when the store is cleared or garbage-collected. Reads go one layer at a time
and copy only the requested rows of that layer; the
pages of each spilled chunk are dropped from the process's resident set as soon as it is read
(``MADV_DONTNEED``), so a read holds at most one chunk's pages beside its output and reading every
layer of a spilled store does not grow the RSS.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
import mmap
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

__all__ = ["STORE_DTYPES", "TextKey", "VectorStore", "check_store_options", "release_freed_memory"]

TextKey = tuple[str, str]
"""``(prompt, text)``: the same text under two prompts is two different inputs."""

STORE_DTYPES: tuple[str, ...] = ("float32", "float16")
"""Dtypes the vectors may be kept in (reads always return float32)."""

_MB = 1024 * 1024


def check_store_options(memory_budget_mb: object, store_dtype: object) -> None:
    """Validate the store options.

    Raises:
        ValueError: for a budget that is not a number ``>= 0`` (``math.inf``: never spill) or a dtype
            not in :data:`STORE_DTYPES`.
    """
    budget = memory_budget_mb
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or math.isnan(budget) or budget < 0:
        raise ValueError(
            f"memory_budget_mb must be a number >= 0 (megabytes of per-layer vectors kept in RAM; "
            f"math.inf: never spill to disk); got {budget!r}"
        )
    if not isinstance(store_dtype, str) or store_dtype not in STORE_DTYPES:
        raise ValueError(f"store_dtype must be one of {STORE_DTYPES}; got {store_dtype!r}")


class VectorStore:
    """Rows appended per extraction shard, read back per layer or for all layers by key.

    A key seen before keeps its first row; rows of keys already stored are not kept again.

    Args:
        memory_budget_mb: megabytes of vectors kept in RAM; chunks above it go to disk (``0``: every
            chunk on disk, ``math.inf``: never).
        dtype: ``"float32"`` (reads equal what was added) or ``"float16"`` (half the bytes).
        spill_dir: folder of the temporary file (default: the system temporary folder).

    Raises:
        ValueError: for invalid options (see :func:`check_store_options`).
    """

    def __init__(
        self,
        memory_budget_mb: float = 1024,
        dtype: str = "float32",
        spill_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        check_store_options(memory_budget_mb, dtype)
        self.memory_budget_mb = memory_budget_mb
        self.dtype = np.dtype(dtype)
        self.spill_dir = Path(spill_dir) if spill_dir is not None else None
        # (L+1, n, d) arrays in RAM, or (byte offset, shape) of chunks in the file
        self._chunks: list[np.ndarray | tuple[int, tuple[int, int, int]]] = []
        self._shape: tuple[int, int, int] | None = None
        self._map: mmap.mmap | None = None
        self._starts: list[int] = []  # global row index of each chunk's first row
        self._rows = 0
        self._where: dict[TextKey, int] = {}
        self._file: IO[bytes] | None = None
        self.bytes_in_memory = 0
        self.bytes_on_disk = 0
        self.peak_bytes_on_disk = 0
        """The most bytes the spill file held since the store was made (kept across :meth:`clear`)."""
        self.spilled = False
        """Whether some chunk of the current contents went to disk (kept until :meth:`clear`)."""

    # -- shape ------------------------------------------------------------------------------
    @property
    def num_states(self) -> int:
        """``L + 1`` of the stored vectors (0 when empty)."""
        return self._shape[0] if self._shape is not None else 0

    @property
    def dim(self) -> int:
        """``d`` of the stored vectors (0 when empty)."""
        return self._shape[2] if self._shape is not None else 0

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: object) -> bool:
        return key in self._where

    def describe(self) -> dict[str, Any]:
        """Where the vectors of the current contents live, for result files."""
        kind = "memory" if not self.spilled else ("disk" if self.bytes_in_memory == 0 else "memory+disk")
        budget = self.memory_budget_mb
        return {
            "kind": kind,
            "dtype": self.dtype.name,
            "memory_budget_mb": None if math.isinf(budget) else budget,
            "mb_in_memory": round(self.bytes_in_memory / _MB, 3),
            "mb_on_disk": round(self.bytes_on_disk / _MB, 3),
        }

    # -- writing ----------------------------------------------------------------------------
    def add(self, keys: Sequence[TextKey], states: np.ndarray) -> None:
        """Keep ``states`` ``(L+1, n, d)`` for those ``keys`` not stored yet.

        Raises:
            ValueError: when the row count or the layer shape does not match.
            OSError: naming the spill folder when the chunk cannot be written to disk.
        """
        if states.ndim != 3 or states.shape[1] != len(keys):
            raise ValueError(f"states must be (L+1, {len(keys)}, d); got {states.shape}")
        if self._shape is not None and states.shape[::2] != self._shape[::2]:
            raise ValueError(
                f"states have (L+1, d) = {states.shape[::2]}; the store holds {self._shape[::2]}"
            )
        new: dict[TextKey, int] = {}
        for row, key in enumerate(keys):
            if key not in self._where and key not in new:
                new[key] = row
        if not new:
            return
        rows = np.fromiter(new.values(), dtype=np.int64, count=len(new))
        chunk = states if rows.size == len(keys) else states[:, rows]
        chunk = np.ascontiguousarray(chunk, dtype=self.dtype)
        if not self.spilled and self.bytes_in_memory + chunk.nbytes <= self.memory_budget_mb * _MB:
            self.bytes_in_memory += chunk.nbytes
            self._chunks.append(chunk)
        else:
            self.spilled = True
            self._chunks.append((self._spill(chunk), chunk.shape))
        if self._shape is None:
            self._shape = (int(states.shape[0]), 0, int(states.shape[2]))
        self._starts.append(self._rows)
        self._where.update((key, self._rows + i) for i, key in enumerate(new))
        self._rows += rows.size

    def _spill(self, chunk: np.ndarray) -> int:
        """Append ``chunk`` to the temporary file; returns its byte offset there."""
        try:
            if self._file is None:
                if self.spill_dir is not None:
                    self.spill_dir.mkdir(parents=True, exist_ok=True)
                self._file = tempfile.TemporaryFile(dir=self.spill_dir, prefix="mteb-lrd-vectors-")
            handle = self._file
            offset = handle.seek(0, os.SEEK_END)
            pad = -offset % 64  # aligned rows
            if pad:
                handle.write(b"\0" * pad)
                offset += pad
            handle.write(chunk.data)
            handle.flush()
        except OSError as err:
            where = self.spill_dir or tempfile.gettempdir()
            raise OSError(
                err.errno,
                f"mteb-lrd: cannot spill per-layer vectors to {where} ({err.strerror or err}); free disk "
                "space there, pass another spill_dir / --cache-dir, or raise memory_budget_mb",
            ) from err
        self.bytes_on_disk += chunk.nbytes
        self.peak_bytes_on_disk = max(self.peak_bytes_on_disk, self.bytes_on_disk)
        self._unmap()  # the file grew: map it again at the next read
        return offset

    def _mapping(self) -> mmap.mmap:
        if self._map is None:
            assert self._file is not None
            self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        return self._map

    def _unmap(self) -> None:
        if self._map is not None:
            try:
                self._map.close()  # reads keep no views of it, so nothing holds the mapping
            except BufferError:  # a view still held by a traceback: the mapping goes with it
                pass
            self._map = None

    # -- reading ----------------------------------------------------------------------------
    def _locate(self, keys: Sequence[TextKey]) -> np.ndarray:
        where = self._where
        try:
            return np.fromiter((where[key] for key in keys), dtype=np.int64, count=len(keys))
        except KeyError:
            missing = [key for key in keys if key not in where]
            raise KeyError(
                f"{len(missing)} texts were never encoded by the wrapper, e.g. {missing[0]!r}"
            ) from None

    def _read(self, layer: int, rows: np.ndarray, out: np.ndarray) -> None:
        """``out[i] = vector of global row rows[i] at layer``, one step per chunk touched."""
        order = np.argsort(rows, kind="stable")
        ordered = rows[order]
        bounds = np.searchsorted(ordered, [*self._starts, self._rows])
        for index, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            if lo == hi:
                continue
            chunk = self._chunks[index]
            if isinstance(chunk, np.ndarray):
                out[order[lo:hi]] = chunk[layer, ordered[lo:hi] - self._starts[index]]
                continue
            offset, shape = chunk
            view = np.frombuffer(self._mapping(), self.dtype, math.prod(shape), offset).reshape(shape)
            out[order[lo:hi]] = view[layer, ordered[lo:hi] - self._starts[index]]
            del view  # no view may outlive the read: the mapping is closed when the file grows
            self._drop_pages(offset, math.prod(shape) * self.dtype.itemsize)

    def _drop_pages(self, offset: int, length: int) -> None:
        """Drop one spilled chunk's pages from the resident set once read (the data stay in the
        file), so a read holds at most one chunk's pages beside its output."""
        if self._map is None or not hasattr(mmap, "MADV_DONTNEED"):
            return
        start = offset - offset % mmap.PAGESIZE
        self._map.madvise(mmap.MADV_DONTNEED, start, min(offset + length, len(self._map)) - start)

    def layer(self, layer: int, keys: Sequence[TextKey]) -> np.ndarray:
        """``(len(keys), d)`` float32 vectors of hidden state ``layer`` for keys added before.

        Raises:
            KeyError: naming a key that was never encoded. IndexError: for a layer out of range.
        """
        if not 0 <= layer < self.num_states:
            raise IndexError(f"layer must be in 0..{self.num_states - 1}; got {layer}")
        out = np.empty((len(keys), self.dim), dtype=np.float32)
        self._read(layer, self._locate(keys), out)
        return out

    def gather(self, keys: Sequence[TextKey]) -> np.ndarray:
        """``(L+1, len(keys), d)`` float32 vectors of every layer for keys added before, read layer
        by layer into one array (no per-layer temporaries).

        Raises:
            KeyError: naming a key that was never encoded.
        """
        rows = self._locate(keys)
        out = np.empty((self.num_states, len(keys), self.dim), dtype=np.float32)
        for layer in range(self.num_states):
            self._read(layer, rows, out[layer])
        return out

    def clear(self) -> None:
        """Forget every vector and free the temporary file."""
        self._chunks.clear()
        self._starts.clear()
        self._where.clear()
        self._rows = 0
        self._shape = None
        self._unmap()
        if self._file is not None:
            self._file.close()
            self._file = None
        self.bytes_in_memory = self.bytes_on_disk = 0
        self.spilled = False


@functools.cache
def _malloc_trim() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # musl and other C libraries without it
        return None


def release_freed_memory() -> None:
    """Hand memory freed by this process back to the OS (glibc ``malloc_trim``; no-op elsewhere).

    glibc keeps the arrays a task's extraction freed in its heap, so the next stage (LRD, per-layer
    scoring) would start from a resident set ~100 MB above what is live (measured on MiniLM with
    SICK-R's 9,927 pairs: 891 → 768 MB); the freed pages stay ours otherwise. Dask's workers do the
    same for the same reason.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
