"""The on-disk cache: atomic, integrity-checked, never silently wrong."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from mteb_lrd.extraction.cache import ArrayCache
from mteb_lrd.io import atomic_write_text, content_key


def test_round_trip_and_missing(tmp_path):
    cache = ArrayCache(tmp_path)
    arrays = {"a": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.array([1, 2, 3])}
    path = cache.save("abc123", arrays)
    assert path.exists() and path.parent.name == "ab"
    loaded = cache.load("abc123")
    assert set(loaded) == {"a", "b"}
    np.testing.assert_array_equal(loaded["a"], arrays["a"])
    assert cache.load("other") is None
    assert not list(tmp_path.rglob("*.tmp"))


def test_tampered_entry_is_reported_removed_and_missing(tmp_path, caplog):
    cache = ArrayCache(tmp_path)
    cache.save("key1", {"a": np.zeros(100, dtype=np.float32)})
    other = ArrayCache(tmp_path / "x")
    other.save("key1", {"a": np.ones(100, dtype=np.float32)})
    # A valid npz with the wrong content for its digest: swap the array but keep the old digest.
    import zipfile

    with zipfile.ZipFile(cache.path("key1")) as good, zipfile.ZipFile(other.path("key1")) as bad:
        digest, data = good.read("__sha256__.npy"), bad.read("a.npy")
    with zipfile.ZipFile(cache.path("key1"), "w") as out:
        out.writestr("a.npy", data)
        out.writestr("__sha256__.npy", digest)
    with caplog.at_level(logging.WARNING, logger="mteb_lrd.extraction.cache"):
        assert cache.load("key1") is None
    assert "corrupt" in caplog.text and "digest" in caplog.text
    assert not cache.path("key1").exists()


def test_garbage_file_is_missing(tmp_path):
    cache = ArrayCache(tmp_path)
    cache.path("key2").parent.mkdir(parents=True)
    cache.path("key2").write_bytes(b"not a zip")
    assert cache.load("key2") is None


@pytest.mark.parametrize("key", ["", "../x", "a/b", "a.b", " k"])
def test_bad_keys(tmp_path, key):
    with pytest.raises(ValueError, match="cache keys"):
        ArrayCache(tmp_path).path(key)


def test_reserved_name(tmp_path):
    with pytest.raises(ValueError, match="reserved"):
        ArrayCache(tmp_path).save("k", {"__sha256__": np.zeros(1)})


def test_content_key_is_stable_and_order_free():
    assert content_key({"a": 1, "b": [1, 2]}) == content_key({"b": [1, 2], "a": 1})
    assert content_key({"a": 1}) != content_key({"a": 2})


def test_atomic_write_replaces_whole_file(tmp_path):
    target = tmp_path / "sub" / "f.json"
    atomic_write_text(target, "one")
    atomic_write_text(target, "two")
    assert target.read_text() == "two"
    assert [p.name for p in target.parent.iterdir()] == ["f.json"]
