"""Memory budget, spilled stores and resuming inside a task, through unmodified ``mteb.evaluate`` runs."""

from __future__ import annotations

import json
import sys

import mteb
import pytest
from sentence_transformers import SentenceTransformer

from mteb_lrd import with_layer_dynamics
from mteb_lrd.cli import main as cli_main
from tests.mteb_helpers import pair_task, retrieval_task, sts_task
from tests.test_store import open_paths_under

RUN = {"co2_tracker": False, "show_progress_bar": False}


@pytest.fixture
def tiny_st(tiny_st_dir):
    return SentenceTransformer(str(tiny_st_dir), device="cpu")


def _row(model, task, show_progress_bar=False):
    result = mteb.evaluate(
        model,
        [task],
        cache=None,
        encode_kwargs={"batch_size": 4, "show_progress_bar": show_progress_bar},
        **RUN,
    )
    return result.task_results[0].scores["test"][0]


def _without_store(row):
    row = json.loads(json.dumps(row))
    for key in ("layer_dynamics", "per_layer"):
        row[key].pop("store")
    return row


def _forward_counter(model, fail_at=None):
    """Counts forward passes (the embedding layer runs once per pass); raises at pass ``fail_at``."""
    counter = {"n": 0, "fail_at": fail_at}

    def hook(*_):
        counter["n"] += 1
        if counter["n"] == counter["fail_at"]:
            raise RuntimeError("killed mid-task")

    return counter, model[0].auto_model.embeddings.register_forward_hook(hook)


@pytest.mark.parametrize("make_task", [sts_task, retrieval_task, pair_task])
def test_disk_store_gives_identical_scores(make_task, tiny_st, tmp_path, capsys):
    memory = _row(with_layer_dynamics(tiny_st), make_task())
    spill = tmp_path / "spill"
    disk_model = with_layer_dynamics(tiny_st, memory_budget_mb=0, spill_dir=str(spill))
    disk = _row(disk_model, make_task(), show_progress_bar=True)
    assert memory["layer_dynamics"]["store"]["kind"] == "memory"
    assert disk["layer_dynamics"]["store"]["kind"] == disk["per_layer"]["store"]["kind"] == "disk"
    assert disk["layer_dynamics"]["store"]["dtype"] == "float32"
    assert disk["layer_dynamics"]["store"]["mb_on_disk"] > 0
    # every score, profile and summary equal to the last bit
    assert _without_store(disk) == _without_store(memory)
    assert len(disk_model.store) == 0 and list(spill.iterdir()) == []
    # the per-layer bar counts the layers when progress bars are on
    assert f"{make_task().metadata.name}: per-layer scores" in capsys.readouterr().err


def test_float16_store_is_close(tiny_st):
    task = sts_task()
    full = _row(with_layer_dynamics(tiny_st), task)
    half = _row(with_layer_dynamics(tiny_st, store_dtype="float16", memory_budget_mb=0), sts_task())
    assert half["layer_dynamics"]["store"]["dtype"] == "float16"
    assert half["main_score"] == full["main_score"]  # the ordinary scores never use the store
    # Stated tolerance: per-layer scores within 0.02 (16 pairs: one swapped rank moves Spearman
    # by ~0.003), LRD summaries within 1e-2 relative.
    for a, b in zip(half["per_layer"]["scores"], full["per_layer"]["scores"], strict=True):
        assert a == pytest.approx(b, abs=0.02)
    for key, value in full["layer_dynamics"]["summary"].items():
        if isinstance(value, float):
            assert half["layer_dynamics"]["summary"][key] == pytest.approx(value, rel=1e-2, abs=1e-3), key


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fd")
def test_exception_mid_encode_frees_the_spill_file(tiny_st, tmp_path):
    spill = tmp_path / "spill"
    wrapped = with_layer_dynamics(tiny_st, memory_budget_mb=0, spill_dir=str(spill), shard_size=4)
    counter, handle = _forward_counter(tiny_st, fail_at=3)
    try:
        with pytest.raises(RuntimeError, match="killed mid-task"):
            _row(wrapped, sts_task())
    finally:
        handle.remove()
    assert counter["n"] == 3
    assert open_paths_under(spill) == []  # the anonymous spill file is closed
    assert list(spill.iterdir()) == [] and len(wrapped.store) == 0


def test_killed_run_resumes_from_the_cache(tiny_st, tmp_path):
    """STS: 2 columns x 16 sentences, batch 4 and shard 4 -> 8 forward passes in 8 shards."""
    cache = tmp_path / "cache"
    options = {"cache_dir": str(cache), "shard_size": 4}
    counter, handle = _forward_counter(tiny_st, fail_at=6)
    try:
        with pytest.raises(RuntimeError, match="killed mid-task"):
            _row(with_layer_dynamics(tiny_st, **options), sts_task())
        assert counter["n"] == 6  # 5 shards finished and saved, the 6th died
        counter["n"], counter["fail_at"] = 0, None
        resumed = _row(with_layer_dynamics(tiny_st, **options), sts_task())
        assert counter["n"] == 8 - 5  # only the missing batches run again
        counter["n"] = 0
        fresh = _row(with_layer_dynamics(tiny_st), sts_task())
        assert counter["n"] == 8
    finally:
        handle.remove()
    assert _without_store(resumed) == _without_store(fresh)


def test_cli_memory_options_and_cache_lifetime(tiny_st_dir, tmp_path, capsys, monkeypatch):
    import sys

    from mteb_lrd.tasks.local_tasks import local_task

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)  # a terminal: bars shown
    folder = tmp_path / "sts"
    folder.mkdir()
    task = sts_task()
    task.load_data()
    rows = task.dataset["default"]["test"].to_list()
    (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert local_task(folder, "STS")  # a valid local task folder
    results = tmp_path / "results"
    args = ["run", "--model", str(tiny_st_dir), "--local-task", f"{folder}=STS", "--results", str(results),
            "--batch-size", "4", "--memory-budget-mb", "0", "--store-dtype", "float16"]  # fmt: skip
    assert cli_main(args) == 0
    files = list((results / "results").rglob("sts.json"))
    assert len(files) == 1
    row = json.loads(files[0].read_text())["scores"]["test"][0]
    assert row["layer_dynamics"]["store"]["kind"] == "disk"
    assert row["layer_dynamics"]["store"]["dtype"] == "float16"
    assert not (results / "mteb-lrd-cache").exists()  # removed once the run finished
    assert "per-layer scores" in capsys.readouterr().err
    assert cli_main([*args[:-4], "--memory-budget-mb", "-1"]) == 2
    assert "memory_budget_mb must be a number >= 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli_main([*args[:-4], "--store-dtype", "int8"])
    assert "invalid choice" in capsys.readouterr().err
