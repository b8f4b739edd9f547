"""mteb_lrd.io and every writer that uses it: atomic, and with the umask's permissions (like mteb's files)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import numpy as np
import pytest

from mteb_lrd.dysem.evaluation import write_json_atomic
from mteb_lrd.dysem.representation_store import RepresentationStore
from mteb_lrd.extraction.cache import ArrayCache
from mteb_lrd.io import atomic_write_bytes, atomic_write_json, atomic_write_text, temporary_folder

PACKAGE = Path(__file__).resolve().parents[1] / "mteb_lrd"


@pytest.fixture(params=[0o022, 0o027, 0o002])
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_writes_keep_the_umask(tmp_path, umask):
    written = [
        atomic_write_bytes(tmp_path / "a.bin", b"x"),
        atomic_write_text(tmp_path / "sub" / "b.txt", "y"),
        atomic_write_json(tmp_path / "c.json", {"v": 1}),
    ]
    for path in written:
        assert _mode(path) == 0o666 & ~umask, path
    # the folders created on the way follow the umask too
    assert _mode(tmp_path / "sub") == 0o777 & ~umask


def test_overwriting_a_file_gives_the_umask_mode(tmp_path, umask):
    target = tmp_path / "f.json"
    target.write_text("old")
    target.chmod(0o600)
    atomic_write_text(target, "new")
    assert target.read_text() == "new" and _mode(target) == 0o666 & ~umask


def test_temporary_folder_keeps_the_umask(tmp_path, umask):
    first, second = temporary_folder(tmp_path, ".m.partial-"), temporary_folder(tmp_path, ".m.partial-")
    assert first != second and first.name.startswith(".m.partial-")
    assert _mode(first) == 0o777 & ~umask and not list(first.iterdir())


def test_plugin_writers_keep_the_umask(tmp_path, umask):
    shard = ArrayCache(tmp_path / "cache").save("abc", {"a": np.zeros(3)})
    store = RepresentationStore(tmp_path / "store")
    store.put(["k1"], np.ones((1, 2)))
    write_json_atomic(tmp_path / "dysem.json", {"spearman": float("nan")})
    files = [shard, *(tmp_path / "store").glob("*.npz"), tmp_path / "dysem.json"]
    assert len(files) == 3
    for path in files:
        assert _mode(path) == 0o666 & ~umask, path
    assert not list(tmp_path.rglob("*.tmp")) and not list(tmp_path.rglob(".tmp-*"))


# Writes that bypass mteb_lrd.io: mkstemp / mkdtemp (0600 / 0700), non-atomic write_text / json.dump.
_BYPASS = re.compile(
    r"mkstemp|mkdtemp|NamedTemporaryFile|\.write_text\(|\.write_bytes\(|json\.dump\(|np\.save\("
)


def test_no_module_writes_files_around_io():
    offenders = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "io.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _BYPASS.search(line)
    ]
    assert not offenders, "write through mteb_lrd.io instead:\n" + "\n".join(offenders)
