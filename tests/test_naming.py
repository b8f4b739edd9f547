"""One name per model: every route names the same model the same way (models/naming.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mteb_lrd.models.naming import DEFAULT_MODEL_NAME, check_name, folder_name, model_name

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"


def test_explicit_names_must_be_organization_slash_model():
    assert check_name("org/model") == "org/model"
    for bad in ("model", "org/ model", "/model", ""):
        with pytest.raises(ValueError, match="organization/model"):
            check_name(bad)


def test_local_folder_is_named_after_the_folder_on_every_route(tiny_st_dir, tmp_path, texts):
    import mteb
    from sentence_transformers import SentenceTransformer

    from mteb_lrd import with_layer_dynamics
    from mteb_lrd.models.loading import load_for_mteb
    from tests.mteb_helpers import sts_task

    st = SentenceTransformer(str(tiny_st_dir), device="cpu")
    assert folder_name(tiny_st_dir) == model_name(st) == f"local/{tiny_st_dir.name}"
    assert load_for_mteb(str(tiny_st_dir), device="cpu")[0] == model_name(st)
    wrapped = with_layer_dynamics(st, per_layer=False)
    assert wrapped.mteb_model_meta.name == model_name(st)
    cache = mteb.ResultCache(tmp_path / "cache")
    mteb.evaluate(wrapped, [sts_task(texts)], cache=cache, co2_tracker=False, show_progress_bar=False)
    models = [p.name for p in (cache.cache_path / "results").iterdir()]
    assert models == [f"local__{tiny_st_dir.name}"]  # never no_model_name__available


def test_hub_names_from_the_card_and_name_or_path(tiny_st_dir, tiny_model_dir):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    st = SentenceTransformer(str(tiny_st_dir), device="cpu")
    st.model_card_data.base_model = "some-org/some-model"  # what sentence-transformers sets for a Hub load
    assert model_name(st) == "some-org/some-model"
    st.model_card_data.model_name = "SentenceTransformer based on some-org/some-model"  # not a name
    assert model_name(st) == "some-org/some-model"
    hf = AutoModel.from_pretrained(str(tiny_model_dir("bert")))
    assert model_name(hf) == f"local/{tiny_model_dir('bert').name}"
    hf.config._name_or_path = "org/loaded-by-hub-id"
    assert model_name(hf) == "org/loaded-by-hub-id"
    assert model_name(hf, "mine/explicit") == "mine/explicit"


@pytest.mark.slow
def test_the_bundled_minilm_has_one_name_on_every_route():
    from sentence_transformers import SentenceTransformer

    from mteb_lrd import with_layer_dynamics
    from mteb_lrd.defaults import default_model_path
    from mteb_lrd.models.loading import load_for_mteb, resolve_model_path

    st = SentenceTransformer(str(default_model_path()), device="cpu")
    assert model_name(st) == DEFAULT_MODEL_NAME
    assert with_layer_dynamics(st).mteb_model_meta.name == DEFAULT_MODEL_NAME
    assert load_for_mteb("default", device="cpu")[0] == DEFAULT_MODEL_NAME
    # its Hub id is accepted and means the bundled folder (no Hub access)
    assert resolve_model_path(DEFAULT_MODEL_NAME) == default_model_path()
    assert load_for_mteb(DEFAULT_MODEL_NAME, device="cpu")[0] == DEFAULT_MODEL_NAME

    sys.path.insert(0, str(PLUGINS))
    try:
        import mteb_lrd_plugin  # noqa: F401  (registers on import)
    finally:
        sys.path.remove(str(PLUGINS))
    import mteb

    meta = mteb.get_model_meta("mteb-lrd/default")
    assert meta.name == DEFAULT_MODEL_NAME  # results of `mteb run -m mteb-lrd/default` land there too
