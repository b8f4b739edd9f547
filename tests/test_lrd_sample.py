"""Keeping every hidden state of the sampled texts alone: same rows, same numbers, bounded memory."""

from __future__ import annotations

import mteb
import numpy as np
import pytest

from mteb_lrd import with_layer_dynamics
from mteb_lrd.adapter import expected_texts as expected_module
from mteb_lrd.adapter.background_dynamics import BackgroundDynamics
from mteb_lrd.extraction.extractor import extract_layer_states
from mteb_lrd.metrics.params import MetricParams
from mteb_lrd.parameters import Caps
from mteb_lrd.pipeline import layer_dynamics
from mteb_lrd.storage.lrd_sample import LRDSample
from mteb_lrd.storage.vector_store import VectorStore
from tests.mteb_helpers import retrieval_task, sts_task
from tests.tiny_models import WORDS

RUN = {"co2_tracker": False, "show_progress_bar": False}
CAPS = {"frenet_cap": 6, "nrs_cap": 8, "gfmi_cap": 10}


def _texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, 5)) + f" {i % 7}" for i in range(n)]


def _states(n: int, num_states: int = 4, d: int = 8, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((num_states, n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=2, keepdims=True)


def _feed(sample: LRDSample, keys, states, calls: int = 3) -> None:
    """``encode`` calls of ``keys`` in ``calls`` pieces, shards in reversed (length-like) order."""
    for piece in np.array_split(np.arange(len(keys)), calls):
        piece_keys = [keys[i] for i in piece]
        keep = sample.admit(piece_keys)
        order = piece[::-1]
        usable = np.isfinite(states[:, order]).all(axis=(0, 2))
        kept = [keys[i] for i, k in zip(order, keep[::-1], strict=True) if k]
        rows = order[keep[::-1]]
        sample.record([keys[i] for i in order], usable, kept, states[:, rows])


def _lrd_of(sample: LRDSample):
    draw, result = sample.measure(MetricParams(), None)
    assert not draw.missing and result is not None
    return result.summary()


def test_a_right_expectation_keeps_exactly_the_drawn_rows_and_gives_identical_numbers():
    n, caps = 300, Caps(20, 25, 40)
    keys = [("", f"t{i}") for i in range(n)] + [("", "t3"), ("", "t7")]  # repeats keep first appearance
    states = _states(n + 2)
    states[:, n:] = states[:, [3, 7]]
    sample = LRDSample(caps, 42, VectorStore())
    sample.plan(n)
    _feed(sample, keys, states)
    draw = sample.draw()
    union = np.unique(np.concatenate(list(caps.rows(n, 42).values())))
    assert draw.missing == [] and draw.n_texts == n
    assert len(sample.store) == union.size < n  # every state of the drawn rows only
    assert _lrd_of(sample) == layer_dynamics(states[:, :n], caps, 42).summary()


def test_unusable_rows_redraw_and_only_the_new_sampled_texts_are_missing():
    n, caps = 200, Caps(20, 20, 30)
    keys = [("p", f"t{i}") for i in range(n)]
    states = _states(n, seed=1)
    states[2, [5, 50, 120]] = np.nan  # unusable at one state
    sample = LRDSample(caps, 42, VectorStore())
    sample.plan(n)
    _feed(sample, keys, states)
    draw = sample.draw()
    usable = np.setdiff1d(np.arange(n), [5, 50, 120])
    assert draw.keys == [keys[i] for i in usable] and draw.n_texts == n
    assert draw.missing and all(key not in sample.store for key in draw.missing)
    sample.store.add(draw.missing, states[:, [int(k[1][1:]) for k in draw.missing]])
    assert _lrd_of(sample) == layer_dynamics(states[:, usable], caps, 42).summary()


def test_without_an_expectation_the_first_texts_up_to_the_largest_cap_are_kept():
    caps = Caps(5, 5, 12)
    sample = LRDSample(caps, 42, VectorStore())
    sample.plan(None)
    keys = [("", f"t{i}") for i in range(10)]
    states = _states(10)
    _feed(sample, keys, states)
    assert sample.draw().missing == [] and len(sample.store) == 10  # N <= 12: exact, nothing again
    more = [("", f"u{i}") for i in range(30)]
    _feed(sample, more, _states(30, seed=3))
    assert len(sample.store) == 12


def _dynamics_row(model, task, **kwargs):
    result = mteb.evaluate(model, [task], cache=None, encode_kwargs={"batch_size": 8, **kwargs}, **RUN)
    return result.task_results[0].scores["test"][0]["layer_dynamics"]


def _reference(tiny_st, texts, caps: Caps):
    """Every state of every distinct text, extracted apart, then the capped draw over all of them."""
    unique = list(dict.fromkeys(texts))
    states = extract_layer_states(tiny_st, unique, show_progress_bar=False).states
    return layer_dynamics(states, caps, 42).summary()


def _assert_same(summary, reference):
    assert set(summary) == set(reference)
    for key, value in reference.items():
        assert summary[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key


@pytest.mark.parametrize("wrong", [False, True])
def test_wrapper_numbers_equal_keeping_every_state_of_every_text(tiny_st, monkeypatch, wrong):
    texts = _texts(48)
    task = sts_task(texts)
    pairs_texts = texts + [texts[(i * 5 + 3) % len(texts)] for i in range(len(texts))]  # column by column
    if wrong:  # an expectation off by 5: the sampled texts not kept are encoded again
        real = expected_module.expected_texts
        monkeypatch.setattr(expected_module, "expected_texts", lambda *a: real(*a) + 5)
    wrapped = with_layer_dynamics(tiny_st, per_layer=False, **CAPS)
    row = _dynamics_row(wrapped, task)
    caps = Caps(CAPS["frenet_cap"], CAPS["nrs_cap"], CAPS["gfmi_cap"])
    _assert_same(row["summary"], _reference(tiny_st, pairs_texts, caps))
    assert row["sample"]["expected_texts"] == 48 + 5 * wrong
    assert (row["sample"]["n_reencoded"] > 0) == wrong
    assert row["sample"]["background"] is not wrong  # measured while mteb scored, when all texts were in


def test_retrieval_samples_the_distinct_corpus_documents(tiny_st):
    texts = _texts(40, seed=2)
    texts[7], texts[30] = texts[3], texts[12]  # duplicate documents count once
    wrapped = with_layer_dynamics(tiny_st, per_layer=False, **CAPS)
    row = _dynamics_row(wrapped, retrieval_task(texts))
    assert row["sample"] == {"expected_texts": 38, "n_reencoded": 0, "background": True}
    caps = Caps(CAPS["frenet_cap"], CAPS["nrs_cap"], CAPS["gfmi_cap"])
    _assert_same(row["summary"], _reference(tiny_st, texts, caps))


def test_extra_memory_and_disk_do_not_grow_with_the_task(tiny_st, tmp_path):
    """per_layer=False: the wrapper keeps every state of at most the caps' rows, spill and cache alike."""
    kept = {}
    for n in (40, 160):
        wrapped = with_layer_dynamics(
            tiny_st, per_layer=False, memory_budget_mb=0, spill_dir=str(tmp_path / "spill"),
            cache_dir=tmp_path / f"cache{n}", **CAPS,
        )  # fmt: skip
        clear = wrapped.clear

        def record(n=n, wrapped=wrapped, clear=clear):
            if len(wrapped.sample.store):
                kept[n] = (
                    len(wrapped.sample.store),
                    wrapped.sample.store.peak_bytes_on_disk,
                    len(wrapped.store),
                )
            clear()

        wrapped.clear = record
        _dynamics_row(wrapped, sts_task(_texts(n, seed=n)))
        cache = sum(
            np.load(f)["full"].nbytes + np.load(f)["layers"].nbytes
            for f in (tmp_path / f"cache{n}").rglob("*.npz")
        )
        kept[n] = (*kept[n], cache)
    per_text = 5 * 32 * 4  # (L+1) x d x float32 of the tiny model
    for n, (rows, disk, per_layer_rows, cache) in kept.items():
        assert per_layer_rows == 0
        assert rows <= sum(CAPS.values()) and disk == rows * per_text == cache, n
    assert all(CAPS["gfmi_cap"] <= rows <= sum(CAPS.values()) for rows, *_ in kept.values())


def test_memory_plan_shares_the_budget():
    from mteb_lrd.storage.memory_plan import MemoryPlan

    seven_b = MemoryPlan.of(1024, Caps(), 33, 4096)
    # one layer at a time: the largest read is a small task's shared search (2 x 128 MB)
    assert seven_b.lrd_working_mb == 256 and seven_b.stores_mb == 768
    wide = MemoryPlan.of(1024, Caps(gfmi=20000), 33, 4096)  # GFMI's sample of one state, twice
    assert wide.lrd_working_mb == pytest.approx(2 * 20000 * 4096 * 4 / 2**20)
    assert wide.stores_mb == pytest.approx(1024 - wide.lrd_working_mb)
    assert seven_b.read_rows == 256 * 2**20 // (4096 * 4)  # a quarter of the budget per read
    minilm = MemoryPlan.of(1024, Caps(), 7, 384)
    assert minilm.stores_mb == 768 and minilm.read_rows == 256 * 2**20 // (384 * 4)
    assert MemoryPlan.of(1024, Caps(gfmi=None), 7, 384).stores_mb == 512
    assert MemoryPlan.of(0, Caps(), 7, 384).stores_mb == 0
    assert MemoryPlan.of(float("inf"), Caps(), 7, 384).stores_mb == float("inf")


def test_per_layer_retrieval_reads_the_corpus_in_planned_chunks_with_equal_scores(tiny_st, monkeypatch):
    import dataclasses

    from mteb_lrd.adapter.wrapper import LayerView

    texts = _texts(20, seed=5)
    plain = with_layer_dynamics(tiny_st, layer_dynamics=False)
    whole = mteb.evaluate(plain, [retrieval_task(texts)], cache=None, **RUN).task_results[0]
    sizes = []
    encode = LayerView.encode

    def counting(self, inputs, **kwargs):
        out = encode(self, inputs, **kwargs)
        sizes.append((str(kwargs.get("prompt_type")), len(out)))
        return out

    monkeypatch.setattr(LayerView, "encode", counting)
    chunked = with_layer_dynamics(tiny_st, layer_dynamics=False)
    chunked.memory = dataclasses.replace(chunked.memory, read_rows=6)
    cut = mteb.evaluate(chunked, [retrieval_task(texts)], cache=None, **RUN).task_results[0]
    documents = [n for kind, n in sizes if "document" in kind]
    assert documents and max(documents) == 6 and sum(documents) == 20 * len(chunked.layers)
    assert cut.scores["test"][0]["per_layer"]["scores"] == whole.scores["test"][0]["per_layer"]["scores"]


def test_per_layer_retrieval_on_the_score_device_gives_equal_scores(tiny_st, monkeypatch):
    """The accelerator path (torch tensors handed to mteb's search), exercised with the CPU device."""
    import torch

    from mteb_lrd.adapter.wrapper import LayerView

    kinds = set()
    encode = LayerView.encode

    def spying(self, inputs, **kwargs):
        out = encode(self, inputs, **kwargs)
        kinds.add(type(out).__name__)
        return out

    monkeypatch.setattr(LayerView, "encode", spying)

    texts = _texts(20, seed=6)
    numpy_run = with_layer_dynamics(tiny_st, layer_dynamics=False)
    expected = mteb.evaluate(numpy_run, [retrieval_task(texts)], cache=None, **RUN).task_results[0]
    tensor_run = with_layer_dynamics(tiny_st, layer_dynamics=False)
    tensor_run.score_device = torch.device("cpu")
    assert kinds == {"ndarray"}
    got = mteb.evaluate(tensor_run, [retrieval_task(texts)], cache=None, **RUN).task_results[0]
    assert kinds == {"ndarray", "Tensor"}
    before, after = expected.scores["test"][0]["per_layer"], got.scores["test"][0]["per_layer"]
    assert before["scored_on"] == "cpu" and after["scored_on"] == "cpu"
    assert after["scores"] == pytest.approx(before["scores"], abs=1e-6)
    assert got.scores["test"][0]["main_score"] == expected.scores["test"][0]["main_score"]


def _two_column_task(first: list[str], second: list[str]):
    from mteb_lrd.tasks.local_tasks import make_task

    pairs = [
        {"sentence1": a, "sentence2": b, "score": float(i % 5)}
        for i, (a, b) in enumerate(zip(first, second, strict=True))
    ]
    return make_task("STS", "TwoColumns", lambda: {"default": {"test": pairs}})()


@pytest.mark.parametrize("expected", ["right", "first column only"])
def test_a_background_measurement_is_dropped_when_more_texts_arrive(tiny_st, monkeypatch, expected):
    """An expectation that is too small starts the worker after the first column; the second
    column's new texts make that measurement stale, and the foreground one gives the same numbers."""
    first, second = _texts(24, seed=7), _texts(24, seed=8)
    if expected != "right":
        monkeypatch.setattr(expected_module, "expected_texts", lambda *a: 24)
    started = []
    original_start = BackgroundDynamics.start
    monkeypatch.setattr(
        BackgroundDynamics, "start", lambda self, *a: started.append(1) or original_start(self, *a)
    )
    wrapped = with_layer_dynamics(tiny_st, per_layer=False, **CAPS)
    row = _dynamics_row(wrapped, _two_column_task(first, second), batch_size=4)
    foreground = with_layer_dynamics(tiny_st, per_layer=False, background_lrd=False, **CAPS)
    reference = _dynamics_row(foreground, _two_column_task(first, second), batch_size=4)
    assert started == [1]  # started once in both cases
    assert row["sample"]["background"] is (expected == "right")
    assert reference["sample"]["background"] is False
    assert row["summary"] == reference["summary"] and row["n_texts"] == 48
    assert not wrapped.background.pending  # waited for and cleared with the subset


def test_expected_documents_join_titles_as_mteb_does():
    from datasets import Dataset
    from mteb._create_dataloaders import _corpus_to_dict

    from mteb_lrd.adapter.expected_texts import _distinct_documents

    rows = [{"id": "a", "title": "Cats", "text": "sit"}, {"id": "b", "title": "", "text": "Cats sit"},
            {"id": "c", "title": "Cats", "text": "run"}, {"id": "d", "title": "", "text": " Cats sit"}]  # fmt: skip
    assert _distinct_documents(Dataset.from_list(rows)) == 2  # "Cats sit" three times (one stripped)
    written = {_corpus_to_dict(row)["text"] for row in rows}  # what mteb's own dataloader encodes
    assert len(written) == 2
    padded = [{"id": "a", "text": "x "}, {"id": "b", "text": "x"}, {"id": "c", "text": "\ty"}]
    assert (
        _distinct_documents(Dataset.from_list(padded))
        == len({_corpus_to_dict(r)["text"] for r in padded})
        == 2
    )
    assert _distinct_documents(Dataset.from_list([{"id": "a", "text": "x"}, {"id": "b", "text": "x"}])) == 1
