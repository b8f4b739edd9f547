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
    from mteb_lrd.integration.wrapper import LayerDynamicsModel

    wrapped = mteb_lrd_plugin.load_wrapped(f"mteb-lrd/{tiny_st_dir}", device="cpu")
    assert isinstance(wrapped, LayerDynamicsModel)
    states = wrapped.extractor.extract(texts)
    assert states.states.shape[0] == 5 and np.isfinite(states.embeddings).all()
