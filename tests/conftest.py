"""Shared fixtures: offline environment and tiny random models saved to a temporary folder."""

from __future__ import annotations

import os
import tempfile

# Before anything imports huggingface_hub / mteb: never reach for the Hub (a look-up costs ~25 s).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
_tmp_home = tempfile.mkdtemp(prefix="mteb-lrd-test-home-")
os.environ.setdefault("HF_HOME", os.path.join(_tmp_home, "hf"))
os.environ.setdefault("MTEB_CACHE", os.path.join(_tmp_home, "mteb"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from tests.tiny_models import TEXTS, build_tiny_model, build_tiny_sentence_transformer  # noqa: E402

SHARED_STS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "sts"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """``tiny_model_dir(kind)`` → folder of a saved tiny model (bert, mpnet, llama, qwen2, gpt2)."""
    root = tmp_path_factory.mktemp("tiny-models")
    built: dict[tuple[str, int], Path] = {}

    def get(kind: str, num_layers: int = 4) -> Path:
        key = (kind, num_layers)
        if key not in built:
            built[key] = build_tiny_model(kind, root / f"{kind}-{num_layers}", num_layers=num_layers)
        return built[key]

    return get


@pytest.fixture(scope="session")
def tiny_st_dir(tmp_path_factory) -> Path:
    """A saved tiny SentenceTransformer (BERT + mean pooling + Normalize)."""
    return build_tiny_sentence_transformer(tmp_path_factory.mktemp("tiny-st") / "st")


@pytest.fixture
def texts() -> list[str]:
    return list(TEXTS)


@pytest.fixture(scope="session")
def shared_sts() -> Path:
    if not SHARED_STS.is_dir():
        pytest.skip(f"shared STS data not found at {SHARED_STS}")
    return SHARED_STS


@pytest.fixture
def tiny_st(tiny_st_dir):
    """The tiny SentenceTransformer, named as sentence-transformers names a model loaded by Hub id, so
    plain mteb and the wrapper store it under one name (plain mteb files an unnamed local folder under
    no_model_name/available). Tests that want the unnamed model define their own."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_st_dir), device="cpu")
    model.model_card_data.base_model = "tiny-org/tiny-st"
    return model
