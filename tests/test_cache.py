"""The on-disk cache: atomic, integrity-checked, bound to its key and rows, never silently wrong."""

from __future__ import annotations

import logging
import os
import shutil
import zipfile

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoModelForCausalLM

from mteb_lrd.extraction.cache import ArrayCache
from mteb_lrd.extraction.extractor import LayerExtractor
from mteb_lrd.extraction.identity import weights_digest
from mteb_lrd.io import atomic_write_text, content_key
from tests.tiny_models import load_tiny_tokenizer

LOGGER = "mteb_lrd.extraction.cache"


def test_round_trip_and_missing(tmp_path):
    cache = ArrayCache(tmp_path)
    arrays = {"a": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.array([1, 2, 3])}
    path = cache.save("abc123", arrays)
    assert path.exists() and path.parent.name == "ab"
    loaded = cache.load("abc123")
    assert set(loaded) == {"a", "b"}
    np.testing.assert_array_equal(loaded["a"], arrays["a"])
    np.testing.assert_array_equal(loaded["b"], arrays["b"])
    assert cache.load("abc123", rows=3) is not None  # rows default to the first array's length
    assert cache.load("other") is None
    assert not list(tmp_path.rglob("*.tmp"))


def _swap_member(path, member, data):
    with zipfile.ZipFile(path) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    members[member] = data
    with zipfile.ZipFile(path, "w") as out:
        for name, blob in members.items():
            out.writestr(name, blob)


def test_tampered_entry_is_reported_removed_and_missing(tmp_path, caplog):
    cache = ArrayCache(tmp_path)
    cache.save("key1", {"a": np.zeros(100, dtype=np.float32)})
    other = ArrayCache(tmp_path / "x")
    other.save("key1", {"a": np.ones(100, dtype=np.float32)})
    # A valid npz with the wrong content for its digest: swap the array but keep the old digest.
    with zipfile.ZipFile(other.path("key1")) as bad:
        data = bad.read("a.npy")
    _swap_member(cache.path("key1"), "a.npy", data)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert cache.load("key1") is None
    assert "corrupt" in caplog.text and "digest" in caplog.text
    assert not cache.path("key1").exists()


def test_entry_copied_under_another_key_is_detected(tmp_path, caplog):
    cache = ArrayCache(tmp_path)
    cache.save("keyA", {"a": np.arange(5.0)})
    cache.path("keyB").parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(cache.path("keyA"), cache.path("keyB"))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert cache.load("keyB") is None
    assert str(cache.path("keyB")) in caplog.text and "another key" in caplog.text
    assert not cache.path("keyB").exists()
    assert cache.load("keyA") is not None  # the original is untouched


def test_entry_with_other_row_count_is_stale(tmp_path, caplog):
    cache = ArrayCache(tmp_path)
    cache.save("k", {"states": np.zeros((3, 4, 2))}, rows=4)
    assert cache.load("k", rows=4) is not None
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert cache.load("k", rows=5) is None
    assert "holds 4 rows, expected 5" in caplog.text
    # the row count is bound into the digest: editing the stored count is detected
    cache.save("k", {"states": np.zeros((3, 4, 2))}, rows=4)
    buffer_path = tmp_path / "rows.npy"
    np.save(buffer_path, np.array(5, dtype=np.int64))
    _swap_member(cache.path("k"), "__rows__.npy", buffer_path.read_bytes())
    assert cache.load("k", rows=5) is None


def test_entry_of_an_older_format_is_recomputed(tmp_path, caplog):
    cache = ArrayCache(tmp_path)
    cache.path("old").parent.mkdir(parents=True)
    with cache.path("old").open("wb") as handle:  # the layout before the key was bound
        np.savez(handle, a=np.zeros(2), __sha256__=np.array("0" * 64))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert cache.load("old") is None
    assert "another mteb-lrd version" in caplog.text


@pytest.mark.parametrize("blob", [b"", b"not a zip", b"PK\x03\x04 torn"])
def test_garbage_file_is_missing(tmp_path, blob):
    cache = ArrayCache(tmp_path)
    cache.path("key2").parent.mkdir(parents=True)
    cache.path("key2").write_bytes(blob)
    assert cache.load("key2") is None
    assert not cache.path("key2").exists()


def test_unreadable_valid_entry_is_kept_and_named(tmp_path, monkeypatch):
    cache = ArrayCache(tmp_path)
    path = cache.save("keep", {"a": np.arange(3.0)})
    before = path.read_bytes()

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(np, "load", denied)
    with pytest.raises(PermissionError, match="cannot read cache entry .*keep.npz.*Permission denied"):
        cache.load("keep")
    assert path.read_bytes() == before  # never deleted
    monkeypatch.undo()
    np.testing.assert_array_equal(cache.load("keep")["a"], np.arange(3.0))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_entry_by_mode_is_kept(tmp_path):
    cache = ArrayCache(tmp_path)
    path = cache.save("keep", {"a": np.arange(3.0)})
    path.chmod(0)
    try:
        with pytest.raises(PermissionError, match="keep.npz"):
            cache.load("keep")
        assert path.exists()
    finally:
        path.chmod(0o644)


def test_folder_in_place_of_an_entry(tmp_path):
    cache = ArrayCache(tmp_path)
    cache.path("dir1").mkdir(parents=True)
    with pytest.raises(IsADirectoryError, match=r"dir1\.npz is a folder"):
        cache.load("dir1")
    with pytest.raises(IsADirectoryError, match=r"dir1\.npz: a folder is in its place"):
        cache.save("dir1", {"a": np.zeros(1)})
    assert cache.path("dir1").is_dir()


def test_cache_root_that_is_a_file(tmp_path):
    root = tmp_path / "cache"
    root.write_text("I am a file")
    with pytest.raises(NotADirectoryError, match=f"{root} is a file, not a folder"):
        ArrayCache(root).save("abc", {"a": np.zeros(1)})
    assert ArrayCache(root).load("abc") is None
    assert root.read_text() == "I am a file"


@pytest.mark.parametrize("key", ["", "../x", "a/b", "a.b", " k"])
def test_bad_keys(tmp_path, key):
    with pytest.raises(ValueError, match="cache keys"):
        ArrayCache(tmp_path).path(key)


@pytest.mark.parametrize("name", ["__sha256__", "__rows__", "__format__"])
def test_reserved_name(tmp_path, name):
    with pytest.raises(ValueError, match="reserved"):
        ArrayCache(tmp_path).save("k", {name: np.zeros(1)})


def test_content_key_is_stable_and_order_free():
    assert content_key({"a": 1, "b": [1, 2]}) == content_key({"b": [1, 2], "a": 1})
    assert content_key({"a": 1}) != content_key({"a": 2})


def test_atomic_write_replaces_whole_file(tmp_path):
    target = tmp_path / "sub" / "f.json"
    atomic_write_text(target, "one")
    atomic_write_text(target, "two")
    assert target.read_text() == "two"
    assert [p.name for p in target.parent.iterdir()] == ["f.json"]


# -- the model identity ------------------------------------------------------------------------


def test_weights_digest_sees_every_element_of_every_tensor(tiny_model_dir):
    model = AutoModel.from_pretrained(str(tiny_model_dir("bert")))
    base = weights_digest(model)
    assert weights_digest(model) == base
    seen = set()
    with torch.no_grad():
        for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
            flat = tensor.view(-1)
            index = flat.numel() - 1  # the last element: beyond any prefix sample
            old = flat[index].item()
            flat[index] = old + 1
            changed = weights_digest(model)
            flat[index] = old
            assert changed != base, name
            seen.add(changed)
    assert weights_digest(model) == base
    assert len(seen) == len([*model.named_parameters(), *model.named_buffers()])


def test_weight_changed_in_place_misses_the_cache(tiny_model_dir, texts, tmp_path):
    path = tiny_model_dir("bert")
    tokenizer = load_tiny_tokenizer(path)
    model = AutoModel.from_pretrained(str(path))
    kwargs = dict(batch_size=4, shard_size=8, cache_dir=str(tmp_path), show_progress_bar=False)
    first = LayerExtractor(model, tokenizer, **kwargs)
    before = first.extract(texts)
    old = first.identity
    params = list(model.parameters())
    # a parameter the old identity never looked at (it sampled the first, middle and last ones)
    name, victim = next(
        (n, p) for n, p in model.named_parameters()
        if "layer.1." in n and p.dim() == 2
        and all(p is not q for q in (params[0], params[len(params) // 2], params[-1]))
    )  # fmt: skip
    with torch.no_grad():
        victim.view(-1)[-1] += 0.5
    again = LayerExtractor(model, tokenizer, **kwargs)
    assert again.identity != old, name
    assert first.identity == again.identity  # the extractor that digested it before sees the edit too
    after = again.extract(texts)
    fresh = LayerExtractor(model, tokenizer, **{**kwargs, "cache_dir": None}).extract(texts)
    np.testing.assert_array_equal(after.states, fresh.states)
    np.testing.assert_array_equal(first.extract(texts).states, fresh.states)  # not its stale shards
    assert not np.array_equal(after.states[2:], before.states[2:])  # layer 1 onwards really changed
    assert len(list(tmp_path.rglob("*.npz"))) == 4  # two shards per identity


@pytest.mark.parametrize("change", ["pad token", "padding side", "vocabulary"])
def test_another_tokenizer_misses_the_cache(tiny_model_dir, texts, tmp_path, change):
    """The same weights with a tokenizer that gives other ids (or pads elsewhere) are another model."""
    path = tiny_model_dir("llama")
    model = AutoModelForCausalLM.from_pretrained(str(path))
    kwargs = dict(batch_size=4, shard_size=8, cache_dir=str(tmp_path), show_progress_bar=False,
                  pooling="last", last_token="reference")  # fmt: skip
    tokenizer = load_tiny_tokenizer(path)
    first = LayerExtractor(model, tokenizer, **kwargs)
    before = first.extract(texts)
    identity = first.identity
    other = load_tiny_tokenizer(path)
    if change == "pad token":
        other.pad_token = other.eos_token
    elif change == "padding side":
        other.padding_side = "right"
    else:
        other.add_tokens(["zzzq"])
    again = LayerExtractor(model, other, **kwargs)
    assert again.identity != identity
    fresh = LayerExtractor(model, other, **{**kwargs, "cache_dir": None}).extract(texts)
    np.testing.assert_array_equal(again.extract(texts).states, fresh.states)
    assert first.identity == identity  # its own tokenizer did not change (the extraction restores it)
    np.testing.assert_array_equal(first.extract(texts).states, before.states)


def test_shard_copied_within_the_extraction_cache_is_rebuilt(tiny_model_dir, texts, tmp_path, caplog):
    path = tiny_model_dir("bert")
    kwargs = dict(batch_size=4, shard_size=8, cache_dir=str(tmp_path), show_progress_bar=False)
    first = LayerExtractor(str(path), load_tiny_tokenizer(path), **kwargs).extract(texts)
    shard0, shard1 = sorted(tmp_path.rglob("*.npz"), key=lambda p: p.stem.rsplit("-", 1)[1])
    shutil.copy(shard0, shard1)  # same shape, wrong texts: only the key binding can tell
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        again = LayerExtractor(str(path), load_tiny_tokenizer(path), **kwargs).extract(texts)
    assert str(shard1) in caplog.text
    np.testing.assert_array_equal(again.states, first.states)


def test_dysem_store_keeps_an_unreadable_shard(tmp_path, monkeypatch):
    from mteb_lrd.dysem.representation_store import RepresentationStore

    RepresentationStore(tmp_path).put(["k"], np.ones((1, 3)))
    (shard,) = tmp_path.glob("shard-*.npz")
    before = shard.read_bytes()

    def denied(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(np, "load", denied)
    with pytest.raises(PermissionError, match=f"cannot read cache shard {shard}"):
        RepresentationStore(tmp_path).get(["k"])
    assert shard.read_bytes() == before
    monkeypatch.undo()
    np.testing.assert_array_equal(RepresentationStore(tmp_path).get(["k"])["k"], np.ones(3))
