"""The per-layer vector store: RAM up to a budget, a memory-mapped anonymous file above it."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mteb_lrd.adapter.options import LayerDynamicsOptions
from mteb_lrd.storage.vector_store import VectorStore


def _chunks(seed: int = 0) -> list[tuple[np.ndarray, list[tuple[str, str]]]]:
    """Five encode shards over 40 texts with repeats inside and across shards, two prompts."""
    rng = np.random.default_rng(seed)
    out = []
    for i, n in enumerate([10, 3, 17, 1, 9]):
        keys = [("q" if j % 5 == 0 else "", f"t{(i * 7 + j) % 40}") for j in range(n)]
        out.append((rng.standard_normal((5, n, 8)).astype(np.float32), keys))
    return out


def _reference(chunks) -> dict[tuple[str, str], np.ndarray]:
    """First vector seen per key (the straightforward dictionary the store must behave like)."""
    ref: dict[tuple[str, str], np.ndarray] = {}
    for states, keys in chunks:
        for j, key in enumerate(keys):
            ref.setdefault(key, states[:, j])
    return ref


def _fill(store: VectorStore, chunks) -> VectorStore:
    for states, keys in chunks:
        store.add(keys, states)
    return store


def open_paths_under(folder: Path) -> list[str]:
    """Open file descriptors of this process that point into ``folder`` (Linux)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(folder)):
            found.append(target)
    return found


@pytest.mark.parametrize("budget", [0, 0.002, math.inf])
def test_reads_equal_a_dictionary_of_first_vectors(budget, tmp_path):
    chunks = _chunks()
    ref = _reference(chunks)
    store = _fill(VectorStore(budget, "float32", tmp_path), chunks)
    assert len(store) == len(ref) and store.num_states == 5 and store.dim == 8
    keys = list(ref)[::-1] + list(ref)[:4]  # any order, repeats allowed
    expected = np.stack([ref[key] for key in keys], axis=1)
    assert np.array_equal(store.gather(keys), expected)
    for layer in range(5):
        assert np.array_equal(store.layer(layer, keys), expected[layer])
    stored_bytes = len(ref) * 5 * 8 * 4  # duplicates are not kept twice
    info = store.describe()
    assert info["dtype"] == "float32"
    if budget == 0:
        assert info["kind"] == "disk" and store.bytes_on_disk == stored_bytes and store.bytes_in_memory == 0
    elif budget == math.inf:
        assert info["kind"] == "memory" and store.bytes_in_memory == stored_bytes
        assert info["memory_budget_mb"] is None
    else:  # the first shard fits, the later ones spill
        assert info["kind"] == "memory+disk"
        assert 0 < store.bytes_in_memory <= budget * 1024 * 1024
        assert store.bytes_in_memory + store.bytes_on_disk == stored_bytes
    assert list(tmp_path.iterdir()) == []  # the spill file has no name
    store.clear()
    assert len(store) == 0 and store.describe()["kind"] == "memory"


def test_float16_store_rounds_to_half_precision(tmp_path):
    chunks = _chunks(1)
    ref = _reference(chunks)
    store = _fill(VectorStore(0, "float16", tmp_path), chunks)
    keys = list(ref)
    got = store.gather(keys)
    assert got.dtype == np.float32
    expected = np.stack([ref[key] for key in keys], axis=1)
    assert np.array_equal(got, expected.astype(np.float16).astype(np.float32))
    assert store.bytes_on_disk == len(ref) * 5 * 8 * 2


def test_validity_flags_and_errors(tmp_path):
    from mteb_lrd.extraction.kept_states import KeptStates

    states = np.ones((3, 4, 2), dtype=np.float32)
    states[1, 1] = np.nan
    states[2, 2] = 0.0
    store = VectorStore(0, "float32", tmp_path)
    keys = [("", f"t{i}") for i in range(4)]
    store.add(keys, states)
    # usability is judged where the wrapper keeps the vectors: every state of every text of a shard
    kept = KeptStates((2,), np.zeros(4, dtype=bool)).reduce(
        {"states": states, "embeddings": states[-1]}, np.arange(4)
    )
    assert kept["valid"][::-1].tolist() == [True, False, False, True]
    with pytest.raises(KeyError, match="never encoded"):
        store.layer(0, [("", "unseen")])
    with pytest.raises(IndexError, match="0..2"):
        store.layer(3, keys)
    with pytest.raises(ValueError, match=r"\(L\+1, 2, d\)"):
        store.add(keys[:2], states)
    with pytest.raises(ValueError, match="the store holds"):
        store.add([("", "x")], np.ones((4, 1, 2), dtype=np.float32))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fd")
def test_clear_closes_the_spill_file(tmp_path):
    store = _fill(VectorStore(0, "float32", tmp_path), _chunks())
    assert open_paths_under(tmp_path)  # the anonymous file (and its mapping once read)
    store.gather([("", "t1")])
    assert 1 <= len(open_paths_under(tmp_path)) <= 2  # one mapping, not one per shard
    store.clear()
    assert open_paths_under(tmp_path) == [] and list(tmp_path.iterdir()) == []


def test_unwritable_spill_folder_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    store = VectorStore(0, "float32", blocker / "spill")
    with pytest.raises(OSError, match=r"cannot spill per-layer vectors to .*a-file/spill"):
        store.add([("", "t")], np.ones((2, 1, 3), dtype=np.float32))


_BAD_BUDGETS = st.one_of(
    st.floats(max_value=-1e-9) | st.just(float("nan")),
    st.integers(max_value=-1),
    st.booleans(),
    st.text(max_size=5),
    st.none(),
)
_BAD_DTYPES = st.one_of(
    st.text(max_size=8).filter(lambda s: s not in ("float32", "float16")),
    st.sampled_from(["float64", "bfloat16", "int8", "FLOAT32"]),
    st.none(),
    st.integers(),
)


@settings(max_examples=40, deadline=None)
@given(_BAD_BUDGETS)
def test_bad_budget_is_a_clear_error(budget):
    with pytest.raises(ValueError, match="memory_budget_mb must be a number >= 0"):
        VectorStore(budget)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="memory_budget_mb"):
        LayerDynamicsOptions.from_kwargs({"memory_budget_mb": budget})


@settings(max_examples=40, deadline=None)
@given(_BAD_DTYPES)
def test_bad_store_dtype_is_a_clear_error(dtype):
    with pytest.raises(ValueError, match=r"store_dtype must be one of \('float32', 'float16'\)"):
        LayerDynamicsOptions.from_kwargs({"store_dtype": dtype})


@settings(max_examples=30, deadline=None)
@given(st.one_of(st.integers(max_value=0), st.booleans(), st.floats(), st.text(max_size=3)))
def test_bad_shard_size_is_a_clear_error(size):
    with pytest.raises(ValueError, match="shard_size must be a positive integer or None"):
        LayerDynamicsOptions.from_kwargs({"shard_size": size})


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=6),
    st.floats(min_value=0, max_value=0.003),
    st.sampled_from(["float32", "float16"]),
)
def test_any_budget_reads_back_what_was_added(sizes, budget, dtype):
    rng = np.random.default_rng(len(sizes))
    chunks = []
    for i, n in enumerate(sizes):
        keys = [("", f"t{(3 * i + j) % 11}") for j in range(n)]
        chunks.append((rng.standard_normal((3, n, 4)).astype(np.float32), keys))
    ref = _reference(chunks)
    store = _fill(VectorStore(budget, dtype), chunks)
    keys = sorted(ref)
    expected = np.stack([ref[key] for key in keys], axis=1).astype(dtype).astype(np.float32)
    assert np.array_equal(store.gather(keys), expected)
    assert store.bytes_in_memory <= budget * 1024 * 1024
    store.clear()
