"""The opt-in plugin: registration when mteb is imported, nothing otherwise, a switch to turn it off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"

PROBE = """
import sys
print("mteb loaded before:", "mteb" in sys.modules)
import mteb
from mteb.models.model_implementations import MODEL_REGISTRY
import importlib
registry = importlib.import_module("mteb.get_tasks")._TASKS_REGISTRY
print("task:", "LocalSTSBenchmarkDemo" in registry, "model:", "mteb-lrd/default" in MODEL_REGISTRY)
"""


def _python(code, **env):
    full_env = {**os.environ, "PYTHONPATH": f"{PLUGINS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", **env}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=300
    )


def test_plugin_registers_on_mteb_import():
    out = _python(PROBE).stdout
    assert "mteb loaded before: False" in out and "task: True model: True" in out


def test_plugin_switched_off():
    out = _python(PROBE, MTEB_LRD_PLUGIN="0").stdout
    assert "task: False model: False" in out


def test_plugin_costs_nothing_without_mteb():
    out = _python(
        "import sys, json; print(sorted(m for m in sys.modules if m.startswith(('mteb', 'torch'))))"
    )
    assert out.stdout.strip() == "[]"


def test_plugin_loader_wraps_a_folder(tiny_st_dir, texts):
    sys.path.insert(0, str(PLUGINS))
    try:
        import mteb_lrd_plugin
    finally:
        sys.path.remove(str(PLUGINS))
    from mteb_lrd.adapter.wrapper import LayerDynamicsModel

    wrapped = mteb_lrd_plugin.load_wrapped(f"mteb-lrd/{tiny_st_dir}", device="cpu")
    assert isinstance(wrapped, LayerDynamicsModel)
    states = wrapped.extractor.extract(texts)
    assert states.states.shape[0] == 5 and np.isfinite(states.embeddings).all()


def test_stock_mteb_run_on_a_folder_and_a_pruned_folder(tiny_st_dir, tmp_path):
    """``mteb run -m <folder>`` with the plugin writes the files ``mteb-lrd run --model <folder>``
    writes: a plain sentence-transformers folder, and a pruned one as an experiment of its base."""
    import json

    from mteb_lrd.cli import main

    ours, stock, pruned = tmp_path / "ours", tmp_path / "stock", tmp_path / "pruned"
    assert main(["-q", "run", "--model", str(tiny_st_dir), "--task", "demo", "--results", str(ours)]) == 0
    assert main(["-q", "prune", "--model", str(tiny_st_dir), "--blocks", "1", "--output", str(pruned),
                 "--task", "demo", "--results", str(ours)]) == 0  # fmt: skip
    env = {**os.environ, "PYTHONPATH": f"{PLUGINS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    for folder in (tiny_st_dir, pruned):
        command = [sys.executable, "-m", "mteb", "run", "-m", str(folder), "-t", "LocalSTSBenchmarkDemo",
                   "--output-folder", str(stock)]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]

    def files(root):
        return {
            p.relative_to(root): json.loads(p.read_text()) for p in root.rglob("LocalSTSBenchmarkDemo.json")
        }

    mine, theirs = files(ours / "results"), files(stock / "results")
    assert set(mine) == set(theirs) and len(mine) == 2
    assert any("experiments" in path.parts for path in theirs)
    for path, result in mine.items():
        row, other = result["scores"]["test"][0], theirs[path]["scores"]["test"][0]
        assert other["main_score"] == row["main_score"]
        assert other["per_layer"]["scores"] == row["per_layer"]["scores"]
        assert other["layer_dynamics"]["summary"] == row["layer_dynamics"]["summary"]


def test_the_plugin_uses_only_the_public_api():
    """The plugin (one module, not a package: outside import-linter's reach) imports the package
    root and nothing below it, at module level and inside functions."""
    import ast

    tree = ast.parse((PLUGINS / "mteb_lrd_plugin.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    ours = {name for name in imported if name and name.split(".")[0] == "mteb_lrd"}
    assert ours == {"mteb_lrd"}, ours
