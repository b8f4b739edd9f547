"""Ray fan-out: results equal a sequential run's, a killed worker's unit is retried, resume skips,
and result files are written atomically (also when a writer dies mid-file)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
from pathlib import Path

import pytest

from mteb_lrd.runners.distributed import (
    LEDGER_FOLDER,
    RayResources,
    Unit,
    UnitConfig,
    is_finished,
    ray_init_kwargs,
    run_unit,
    run_units,
)
from tests.tiny_models import build_tiny_sentence_transformer

VOLATILE = ("evaluation_time", "evaluation_phases", "date", "kg_co2_emissions")
# Each Ray worker runs torch with its own thread count (Ray sets OMP_NUM_THREADS to the unit's CPUs),
# so float reductions differ in the last bits; mteb rounds scores to 6 decimals.
ATOL = 1e-5
OPTIONS = {"per_layer": True, "default_batch_size": 4}


def _cli(argv):
    parser = argparse.ArgumentParser(prog="mteb-lrd")
    subparsers = parser.add_subparsers(dest="command", required=True)
    importlib.import_module("mteb_lrd.cli.run").register(subparsers)
    args = parser.parse_args([str(a) for a in argv])
    return args.func(args)


def _task_files(results: Path) -> dict[str, dict]:
    """Every ``<Task>.json`` under ``results`` by relative path, without the run-time fields."""
    out = {}
    for path in sorted((results / "results").rglob("*.json")):
        if path.name == "model_meta.json":
            continue
        data = json.loads(path.read_text())
        out[str(path.relative_to(results))] = {k: v for k, v in data.items() if k not in VOLATILE}
    return out


def _assert_same(ours, ref, where="") -> None:
    """Equal structure and values; floats within ``ATOL``."""
    if isinstance(ref, dict):
        assert isinstance(ours, dict) and ours.keys() == ref.keys(), where
        for key in ref:
            _assert_same(ours[key], ref[key], f"{where}/{key}")
    elif isinstance(ref, list):
        assert isinstance(ours, list) and len(ours) == len(ref), where
        for i, (a, b) in enumerate(zip(ours, ref, strict=True)):
            _assert_same(a, b, f"{where}[{i}]")
    elif isinstance(ref, float) and not isinstance(ours, bool):
        assert ours == pytest.approx(ref, abs=ATOL), where
    else:
        assert ours == ref, where


def _leftovers(results: Path) -> list[Path]:
    return [p for p in results.rglob("*") if p.name.endswith(".tmp") or ".torn-" in p.name]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("dist-models")
    return [str(build_tiny_sentence_transformer(root / f"st{seed}", seed=seed)) for seed in (0, 1)]


@pytest.fixture(scope="module")
def task_specs(tmp_path_factory) -> list[str]:
    from tests.tiny_models import TEXTS

    specs = []
    for name, step in (("tinysts_a", 3), ("tinysts_b", 5)):
        folder = tmp_path_factory.mktemp("dist-tasks") / name
        folder.mkdir()
        rows = [{"sentence1": TEXTS[i], "sentence2": TEXTS[(i * step + 1) % 16], "score": (i * 7) % 6}
                for i in range(16)]  # fmt: skip
        (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        specs.append(f"{folder}=STS")
    return specs


@pytest.fixture(scope="module")
def sequential(models, task_specs, tmp_path_factory) -> Path:
    """The reference: a plain sequential ``mteb-lrd run`` of both models on both tasks."""
    results = tmp_path_factory.mktemp("sequential")
    argv = ["run", "--results", results, "--batch-size", 4]
    for model in models:
        argv += ["--model", model]
    for spec in task_specs:
        argv += ["--local-task", spec]
    assert _cli(argv) == 0
    return results


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    ray.init(**ray_init_kwargs(num_cpus=2), log_to_driver=False)
    yield ray
    ray.shutdown()


def test_ray_run_equals_sequential_then_resume_skips(
    ray_local, models, task_specs, sequential, tmp_path, capsys
):
    results = tmp_path / "ray"
    argv = ["run", "--executor", "ray", "--results", results, "--batch-size", 4, "--cpus-per-unit", 1]
    for model in models:
        argv += ["--model", model]
    for spec in task_specs:
        argv += ["--local-task", spec]
    assert _cli(argv) == 0
    out = capsys.readouterr().out
    assert out.count("[done]") == 4 and "4 units run, 0 skipped, 0 failed" in out
    expected = _task_files(sequential)
    assert len(expected) == 4
    _assert_same(_task_files(results), expected)
    for rows in (row for data in expected.values() for row in data["scores"]["test"]):
        assert "layer_dynamics" in rows and "per_layer" in rows
    assert len(list((results / LEDGER_FOLDER).glob("*.json"))) == 4
    assert not _leftovers(results)

    # a second run skips every unit without starting a task (the ledger names finished files)
    before = {p: p.stat().st_mtime_ns for p in (results / "results").rglob("*.json")}
    assert _cli(argv) == 0
    out = capsys.readouterr().out
    assert out.count("[skipped]") == 4 and "0 units run, 4 skipped, 0 failed" in out
    assert {p: p.stat().st_mtime_ns for p in (results / "results").rglob("*.json")} == before


def test_ray_and_sequential_store_under_the_same_name_revision_and_cache(
    ray_local, models, task_specs, tmp_path, capsys
):
    """``--name``, ``--revision`` and ``--cache-dir`` reach the Ray units: both executors write the
    same files, and both fill the extraction cache the user named."""
    common = ["--model", models[0], "--local-task", task_specs[0], "--batch-size", 4,
              "--name", "org/custom-name", "--revision", "r7"]  # fmt: skip
    written = {}
    for executor in ("sequential", "ray"):
        results, cache = tmp_path / executor, tmp_path / f"cache-{executor}"
        extra = ["--executor", "ray", "--cpus-per-unit", 1] if executor == "ray" else []
        assert _cli(["run", *common, *extra, "--results", results, "--cache-dir", cache]) == 0
        written[executor] = _task_files(results)
        assert any(cache.rglob("*")), f"{executor}: nothing in the --cache-dir"
    capsys.readouterr()
    assert list(written["ray"]) == ["results/org__custom-name/r7/tinysts_a.json"]
    _assert_same(written["ray"], written["sequential"])


def die_on_first_attempt(unit: Unit, config: UnitConfig):
    """A unit runner that, on its first attempt, kills its worker process half-way through writing
    ``<Task>.json`` (the marker file records the attempt), then behaves normally."""
    marker = Path(config.results) / f"attempts-{unit.key}.txt"
    marker.parent.mkdir(parents=True, exist_ok=True)
    attempts = marker.read_text().count("\n") if marker.exists() else 0
    with marker.open("a") as handle:
        handle.write(f"{os.getpid()}\n")
    if attempts == 0:
        from mteb.results.task_result import TaskResult

        def torn_to_disk(self, path):
            path.write_text('{"dataset_revision": "x", "task_name": "')  # half a file, then death
            os._exit(1)

        TaskResult.to_disk = torn_to_disk
    return run_unit(unit, config)


def test_killed_worker_is_retried_and_leaves_no_torn_file(
    ray_local, models, task_specs, sequential, tmp_path
):
    results = tmp_path / "ray"
    config = UnitConfig(str(results), OPTIONS, batch_size=4)
    unit = Unit(models[1], task_specs[0])
    outcomes = run_units(
        [unit], config, RayResources(max_retries=2), runner=die_on_first_attempt, progress=False
    )
    assert [o.status for o in outcomes] == ["done"], outcomes
    pids = (results / f"attempts-{unit.key}.txt").read_text().split()
    assert len(pids) == 2 and pids[0] != pids[1]  # a second worker process ran the retry
    files = _task_files(results)
    assert len(files) == 1
    path, data = next(iter(files.items()))
    _assert_same(data, _task_files(sequential)[path])
    assert not _leftovers(results) and is_finished(unit, config)


def test_unit_with_no_retries_left_fails_and_others_go_on(ray_local, models, task_specs, tmp_path):
    config = UnitConfig(str(tmp_path / "ray"), OPTIONS, batch_size=4)
    dying = Unit(models[0], task_specs[1])
    [outcome] = run_units(
        [dying], config, RayResources(max_retries=0), runner=die_on_first_attempt, progress=False
    )
    assert outcome.status == "failed" and "WorkerCrashedError" in outcome.error
    assert not is_finished(dying, config)
    units = [Unit(models[0], "no-such-task-name"), Unit(models[0], task_specs[1])]
    outcomes = run_units(units, config, progress=False)
    assert outcomes[0].status == "failed" and "unknown task" in outcomes[0].error
    assert outcomes[1].status == "done" and is_finished(units[1], config)


def test_relative_paths_name_the_drivers_folders(ray_local, models, task_specs, tmp_path, monkeypatch):
    """A Ray worker does not run in the driver's working folder: relative model, task and results
    paths must still name the driver's folders."""
    monkeypatch.chdir(tmp_path)
    model = os.path.relpath(models[0])
    folder, kind = task_specs[0].rsplit("=", 1)
    unit = Unit(model, f"{os.path.relpath(folder)}={kind}")
    config = UnitConfig("relative-results", OPTIONS, batch_size=4)
    [outcome] = run_units([unit], config, progress=False)
    assert outcome.status == "done", outcome.error
    assert outcome.unit == unit and Path(outcome.path).is_relative_to(tmp_path / "relative-results")
    assert is_finished(unit, config)


def test_a_unit_of_a_task_type_without_layer_keys_is_finished_once_scored(models, tmp_path):
    from tests.tiny_models import TEXTS

    folder = tmp_path / "bitext"
    folder.mkdir()
    rows = [{"sentence1": TEXTS[i], "sentence2": TEXTS[(i + 3) % 16]} for i in range(16)]
    (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    unit, config = (
        Unit(models[0], f"{folder}=BitextMining"),
        UnitConfig(str(tmp_path / "res"), OPTIONS, batch_size=4),
    )
    assert not is_finished(unit, config)
    with pytest.warns(UserWarning, match="BitextMining"):
        outcome = run_unit(unit, config)
    assert outcome.status == "done" and is_finished(unit, config)


def test_resume_needs_the_layer_keys(models, task_specs, tmp_path):
    config = UnitConfig(str(tmp_path), OPTIONS, batch_size=4)
    unit = Unit(models[0], task_specs[0])
    assert not is_finished(unit, config)
    outcome = run_unit(unit, config)
    assert outcome.status == "done" and is_finished(unit, config)
    assert outcome.disk_mb is not None and outcome.disk_mb["cache"] > 0  # measured before its removal
    assert "disk: spill peak" in outcome.line()
    assert not (tmp_path / "mteb-lrd-cache" / "units" / unit.key).exists()
    # a rerun asking for states never scored is not finished; fewer are
    assert not is_finished(unit, UnitConfig(str(tmp_path), {**OPTIONS, "per_layer_layers": [0, 99]}))
    assert is_finished(unit, UnitConfig(str(tmp_path), {**OPTIONS, "per_layer_layers": "last:1"}))
    uncached = run_unit(unit, UnitConfig(str(tmp_path / "none"), OPTIONS, batch_size=4, cache=False))
    assert uncached.disk_mb == {"spill_peak": 0.0, "cache": 0.0}
    assert not (tmp_path / "none" / "mteb-lrd-cache").exists()
    path = Path(outcome.path)
    data = json.loads(path.read_text())
    for row in data["scores"]["test"]:
        del row["per_layer"]
    path.write_text(json.dumps(data))
    assert not is_finished(unit, config)
    assert is_finished(unit, UnitConfig(str(tmp_path), {**OPTIONS, "per_layer": False}))
    path.write_text(path.read_text()[:100])  # torn by some other writer
    assert not is_finished(unit, config)


def test_a_templated_unit_is_its_own_experiment_and_resumes_apart(models, task_specs, tmp_path):
    plain = UnitConfig(str(tmp_path), OPTIONS, batch_size=4)
    templated = UnitConfig(str(tmp_path), {**OPTIONS, "template": "the {text} ."}, batch_size=4)
    unit = Unit(models[0], task_specs[0])
    first = run_unit(unit, plain)
    assert is_finished(unit, plain) and not is_finished(unit, templated)
    second = run_unit(unit, templated)
    assert is_finished(unit, templated) and is_finished(unit, plain)
    assert Path(second.path).parent.name.startswith("template_custom-") and Path(first.path).is_file()
    assert second.main_score != first.main_score


def test_a_unit_under_other_embedding_settings_or_another_name_is_stored_and_resumed_apart(
    models, task_specs, tmp_path
):
    plain = UnitConfig(str(tmp_path), OPTIONS, batch_size=4)
    unit = Unit(models[0], task_specs[0])
    first = run_unit(unit, plain)
    for other in (UnitConfig(str(tmp_path), {**OPTIONS, "max_length": 8}, batch_size=4),
                  UnitConfig(str(tmp_path), OPTIONS, batch_size=4, name="org/other")):  # fmt: skip
        assert not is_finished(unit, other)
        again = run_unit(unit, other)
        assert is_finished(unit, other) and is_finished(unit, plain) and again.path != first.path
    assert Path(again.path).parts[-3] == "org__other"  # results/<name>/<revision>/<Task>.json
    truncated = run_unit(unit, UnitConfig(str(tmp_path), {**OPTIONS, "max_length": 8}, batch_size=4))
    assert Path(truncated.path).parent.name == "max_length_8"  # an mteb experiment of the model


def test_unit_keys_and_bad_resources(models, task_specs, tmp_path):
    relative = os.path.relpath(models[0])
    assert Unit(relative, task_specs[0]).key == Unit(models[0], task_specs[0]).key
    assert Unit(models[0], task_specs[0], (1,)).key != Unit(models[0], task_specs[0]).key
    assert Unit(models[0], "STS12").key == Unit(models[0], "LocalSTS12").key  # one task, one result file
    with pytest.raises(ValueError, match="resources and retries must be >= 0"):
        RayResources(gpus_per_unit=-1)


def _saved_files(cache_cls, root: Path, task_results: list) -> dict[str, bytes]:
    cache = cache_cls(root)
    for task_result in task_results:
        cache.save_to_cache(task_result, "org/model", "rev1", encode_kwargs={"batch_size": 4})
    folder = root / "results" / "org__model" / "rev1"
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if not p.name.startswith(".")}


@pytest.fixture(scope="module")
def two_task_results(models, task_specs, tmp_path_factory) -> list:
    from mteb.results.task_result import TaskResult

    results = tmp_path_factory.mktemp("two-results")
    config = UnitConfig(str(results), OPTIONS, batch_size=4)
    return [TaskResult.from_disk(Path(run_unit(Unit(models[0], spec), config).path)) for spec in task_specs]


def test_atomic_cache_writes_mteb_bytes_and_merges_run_settings(two_task_results, tmp_path):
    import mteb

    from mteb_lrd.runners.atomic_cache import AtomicResultCache

    ours = _saved_files(AtomicResultCache, tmp_path / "ours", two_task_results)
    plain = _saved_files(mteb.ResultCache, tmp_path / "plain", two_task_results)
    assert ours == plain  # the same files with the same bytes as mteb's own save
    assert {"tinysts_a.json", "tinysts_b.json", "run_settings.jsonl"} <= set(ours)
    assert not _leftovers(tmp_path)


def test_concurrent_saves_of_one_model_keep_every_run_setting(two_task_results, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from mteb_lrd.runners.atomic_cache import AtomicResultCache

    def save(task_result) -> None:
        for _ in range(5):
            AtomicResultCache(tmp_path).save_to_cache(task_result, "org/model", "rev1", encode_kwargs={})

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(save, two_task_results))
    settings = (tmp_path / "results" / "org__model" / "rev1" / "run_settings.jsonl").read_text()
    assert "tinysts_a" in settings and "tinysts_b" in settings  # neither writer lost the other's entry


def test_torn_result_is_moved_aside_and_the_unit_reruns(models, task_specs, tmp_path):
    config = UnitConfig(str(tmp_path), OPTIONS, batch_size=4)
    unit = Unit(models[0], task_specs[0])
    path = Path(run_unit(unit, config).path)
    good = json.loads(path.read_text())
    path.write_text(path.read_text()[:150])  # a writer killed mid-file (e.g. an older plain mteb run)
    (tmp_path / LEDGER_FOLDER / f"{unit.key}.json").unlink()
    with pytest.warns(UserWarning, match=r"could not be read .* moved to tinysts_a\.json\.torn-"):
        outcome = run_unit(unit, config)
    assert outcome.status == "done" and Path(outcome.path) == path
    _assert_same({k: v for k, v in json.loads(path.read_text()).items() if k not in VOLATILE},
                 {k: v for k, v in good.items() if k not in VOLATILE})  # fmt: skip
    [aside] = path.parent.glob("tinysts_a.json.torn-*")
    assert len(aside.read_text()) == 150  # kept, not lost


def test_pruned_variant_unit_writes_an_experiment_of_the_base_model(models, task_specs, tmp_path):
    config = UnitConfig(str(tmp_path), OPTIONS, batch_size=4)
    base = run_unit(Unit(models[0], task_specs[0]), config)
    pruned = run_unit(Unit(models[0], task_specs[0], (1,)), config)
    assert Path(pruned.path).parent.parent.name == "experiments"
    assert Path(pruned.path).parents[2] == Path(base.path).parent  # same model and revision folder
    rows = json.loads(Path(pruned.path).read_text())["scores"]["test"]
    assert len(rows[0]["per_layer"]["scores"]) == 4  # h_0 .. h_3 after removing 1 of 4 blocks
    assert is_finished(Unit(models[0], task_specs[0], (1,)), config)


def test_a_retried_unit_resumes_from_its_saved_shards(models, task_specs, tmp_path, monkeypatch):
    """A unit killed mid-task leaves its finished extraction shards; the retry runs forward passes
    only for the missing ones, gives the uninterrupted unit's results, and then removes its cache."""
    import mteb_lrd.models.loading as resolve
    from mteb_lrd.runners.distributed import unit_cache_dir

    load = resolve.load_for_mteb
    passes = {"n": 0, "fail_at": None}

    def counted(*args, **kwargs):
        name, model, tokenizer = load(*args, **kwargs)

        def hook(*_):
            passes["n"] += 1
            if passes["n"] == passes["fail_at"]:
                raise RuntimeError("worker died mid-unit")

        model[0].auto_model.embeddings.register_forward_hook(hook)
        return name, model, tokenizer

    monkeypatch.setattr(resolve, "load_for_mteb", counted)
    unit = Unit(models[0], task_specs[0])
    # batches of 4 in shards of 4: every forward pass is a shard, saved as soon as it is computed
    config = UnitConfig(str(tmp_path / "results"), {**OPTIONS, "shard_size": 4}, batch_size=4)
    run_unit(unit, UnitConfig(str(tmp_path / "fresh"), {**OPTIONS, "shard_size": 4}, batch_size=4))
    uninterrupted = passes["n"]
    assert uninterrupted > 3
    passes.update(n=0, fail_at=3)
    with pytest.raises(RuntimeError, match="worker died"):
        run_unit(unit, config)
    assert any(unit_cache_dir(unit, config).rglob("*"))  # the 2 finished shards are saved
    passes.update(n=0, fail_at=None)
    resumed = run_unit(unit, config)
    assert resumed.status == "done" and passes["n"] == uninterrupted - 2
    assert not unit_cache_dir(unit, config).exists()
    _assert_same(_task_files(tmp_path / "results"), _task_files(tmp_path / "fresh"))


def test_the_revision_folder_lock_excludes_and_leaves_no_file(two_task_results, tmp_path, monkeypatch):
    import fcntl
    import os
    import threading

    from mteb_lrd.runners import atomic_cache

    AtomicResultCache = atomic_cache.AtomicResultCache
    AtomicResultCache(tmp_path).save_to_cache(two_task_results[0], "org/model", "rev1", encode_kwargs={})
    folder = tmp_path / "results" / "org__model" / "rev1"
    assert not (folder / atomic_cache.LOCK_NAME).exists()  # the folder itself was locked

    entered = threading.Event()

    def second_writer() -> None:
        with atomic_cache._locked(folder):
            entered.set()

    with atomic_cache._locked(folder):
        thread = threading.Thread(target=second_writer)
        thread.start()
        assert not entered.wait(0.3)  # held out while the first holds the lock
    assert entered.wait(5)
    thread.join()

    real_flock = fcntl.flock

    def no_folder_locks(fd, operation):  # NFS: a folder cannot be locked for writing
        if os.path.isdir(f"/proc/self/fd/{fd}") and operation == fcntl.LOCK_EX:
            raise OSError("Bad file descriptor")
        return real_flock(fd, operation)

    monkeypatch.setattr(atomic_cache.fcntl, "flock", no_folder_locks)
    with atomic_cache._locked(folder):
        assert (folder / atomic_cache.LOCK_NAME).is_file()  # the fallback: a lock file, kept
