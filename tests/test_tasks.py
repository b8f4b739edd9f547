"""Local JSON-lines folders and the shared STS data as MTEB tasks."""

from __future__ import annotations

import json

import mteb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mteb_lrd.tasks.local_tasks import TASK_TYPES, local_task, make_task
from mteb_lrd.tasks.shared_tasks import SHARED_STS, demo_task, namesake_note, register_tasks, sts_tasks


def _write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_local_sts_folder(tmp_path):
    rows = [{"sentence1": f"a {i}", "sentence2": f"b {i}", "score": i % 5} for i in range(7)]
    _write(tmp_path / "mysts" / "test.jsonl", rows)
    _write(tmp_path / "mysts" / "dev.jsonl", rows[:3])
    task = local_task(tmp_path / "mysts", "STS")()
    assert task.metadata.name == "mysts" and task.metadata.type == "STS"
    assert task.metadata.eval_splits == ["dev", "test"]
    task.load_data()
    data = task.dataset["default"]["test"]
    assert list(data["sentence1"]) == [r["sentence1"] for r in rows]
    assert list(data["score"]) == [float(r["score"]) for r in rows]


def test_local_classification_and_pairs_and_retrieval(tmp_path):
    _write(tmp_path / "cls" / "train.jsonl", [{"text": f"t{i}", "label": i % 2} for i in range(6)])
    _write(tmp_path / "cls" / "test.jsonl", [{"text": f"u{i}", "label": i % 2} for i in range(4)])
    cls = local_task(tmp_path / "cls", "Classification", n_experiments=1)()
    assert cls.metadata.eval_splits == ["test"] and cls.n_experiments == 1
    cls.load_data()
    assert set(cls.dataset["default"]) == {"train", "test"}

    _write(tmp_path / "pairs" / "test.jsonl", [{"sentence1": "a", "sentence2": "b", "labels": 1}])
    pairs = local_task(tmp_path / "pairs", "PairClassification")()
    pairs.load_data()
    assert list(pairs.dataset["default"]["test"]["labels"]) == [1]

    _write(tmp_path / "ret" / "corpus.jsonl", [{"id": "d1", "text": "doc one"}, {"id": 2, "text": "doc two"}])
    _write(tmp_path / "ret" / "queries.jsonl", [{"id": "q1", "text": "one"}])
    _write(tmp_path / "ret" / "qrels" / "test.jsonl", [{"query-id": "q1", "corpus-id": "d1", "score": 1}])
    ret = local_task(tmp_path / "ret", "Retrieval")()
    ret.load_data()
    split = ret.dataset["default"]["test"]
    assert split["relevant_docs"] == {"q1": {"d1": 1}} and list(split["corpus"]["id"]) == ["d1", "2"]


def test_local_task_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        local_task(tmp_path / "nope", "STS")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="missing files"):
        local_task(tmp_path / "empty", "STS")
    _write(tmp_path / "c" / "test.jsonl", [{"text": "x", "label": 0}])
    with pytest.raises(ValueError, match="train.jsonl"):
        local_task(tmp_path / "c", "Classification")
    _write(tmp_path / "bad" / "test.jsonl", [{"sentence1": "x"}])
    task = local_task(tmp_path / "bad", "STS")()
    with pytest.raises(
        ValueError, match=r"bad/test\.jsonl:1: missing field 'sentence2'; the row has \['sentence1'\]"
    ):
        task.load_data()


@settings(max_examples=30, deadline=None)
@given(st.text(max_size=20).filter(lambda s: s not in TASK_TYPES))
def test_unknown_task_type_rejected(task_type):
    with pytest.raises(ValueError, match="task_type must be one of"):
        make_task(task_type, "X", dict)


def test_shared_sts_tasks_registered(shared_sts):
    tasks = sts_tasks(shared_sts)
    assert {
        "LocalSTS12",
        "LocalSTS16",
        "LocalSICK-R",
        "LocalSTSBenchmark",
        "LocalSTSBenchmarkMultilingualSTS",
    } <= set(tasks)
    register_tasks([*tasks.values(), demo_task()])
    task = mteb.get_task("LocalSTSBenchmark")
    task.load_data()
    assert task.dataset["default"]["test"].num_rows == 1379
    multi = mteb.get_task("LocalSTSBenchmarkMultilingualSTS")
    assert len(multi.hf_subsets) == 11 and "de" in multi.hf_subsets
    assert tasks["LocalSICK-R"].min_score == 1.0
    with pytest.raises(ValueError, match="already an MTEB task"):
        register_tasks([make_task("STS", "STSBenchmark", dict)])


def test_sts_tasks_absent_folder(tmp_path):
    assert sts_tasks(tmp_path / "none") == {}


def test_demo_task_has_300_pairs():
    task = demo_task()()
    task.load_data()
    assert task.dataset["default"]["test"].num_rows == 300


def test_namesake_notes_state_the_real_pair_counts(shared_sts):
    for name, sts in SHARED_STS.items():
        lines = sum(1 for line in sts.test_file(shared_sts).open(encoding="utf-8") if line.strip())
        assert sts.pairs == lines, name
        assert namesake_note(name).startswith(f"{lines:,} pairs; ")
    assert "MSRvid" in namesake_note("LocalSTS12") and "3,108" in namesake_note("LocalSTS12")
    assert namesake_note("LocalSTS13") == "1,500 pairs; the same pairs as MTEB STS13"
    assert namesake_note("LocalSTSBenchmarkDemo").startswith("300 pairs; 300 of the 1,379")
    assert namesake_note("STS12") is None  # a real MTEB task: nothing to say
