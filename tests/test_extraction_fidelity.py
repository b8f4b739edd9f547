"""Reproduction options of the extraction: the authors' last-token rule, truncation of
SentenceTransformers, pooling resolution from sentence-transformers configs and override tables."""

from __future__ import annotations

import json
import shutil
import warnings

import numpy as np
import pytest
import torch
from transformers import AutoModel

from mteb_lrd.extraction.extractor import REFERENCE_DECODER_BATCH, LayerExtractor
from mteb_lrd.extraction.loading import sentence_transformers_pooling_config
from mteb_lrd.extraction.pooling import (
    REFERENCE_POOLING_OVERRIDES,
    pool,
    resolve_pooling,
    st_config_pooling,
)
from tests.tiny_models import load_tiny_tokenizer


def _authors_last_token(path, texts, layer):
    """The authors' decoder loop written out: given order, batches of 4, left padding, no position
    ids, token at ``mask.sum(1) - 1``."""
    model = AutoModel.from_pretrained(path).eval()
    tokenizer = load_tiny_tokenizer(path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    rows = []
    for start in range(0, len(texts), 4):
        enc = tokenizer(
            texts[start : start + 4], padding=True, truncation=True, max_length=512, return_tensors="pt"
        )
        enc.pop("token_type_ids", None)
        with torch.no_grad():
            hidden = model(**enc, output_hidden_states=True, use_cache=False).hidden_states[layer].float()
        for row, length in enumerate(enc["attention_mask"].sum(dim=1).tolist()):
            # F.normalize as the authors: a zero vector (a pad's embedding) stays zero
            rows.append(torch.nn.functional.normalize(hidden[row, length - 1], dim=0).numpy())
    return np.stack(rows)


def test_pool_reference_rule_hand_case():
    hidden = torch.arange(2 * 5 * 1, dtype=torch.float32).reshape(2, 5, 1)
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])  # left-padded short text, full text
    assert pool(hidden, mask, "last").flatten().tolist() == [4.0, 9.0]
    # mask.sum - 1 = 2 for the short row: its first real token, not its last
    assert pool(hidden, mask, "last", "reference").flatten().tolist() == [2.0, 9.0]
    with pytest.raises(ValueError, match="last_token"):
        pool(hidden, mask, "last", "final")
    # CLS: the first real token, also in a left-padded row (a decoder's batch), not a pad
    assert pool(hidden, mask, "cls").flatten().tolist() == [2.0, 5.0]
    assert pool(hidden, torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]), "cls").flatten().tolist() == [
        0.0,
        5.0,
    ]


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_reference_last_token_reproduces_the_authors_loop(kind, tiny_model_dir, texts):
    path = tiny_model_dir(kind)
    extractor = LayerExtractor(
        str(path), load_tiny_tokenizer(path), last_token="reference", batch_size=32, show_progress_bar=False
    )
    assert extractor.batch_size == REFERENCE_DECODER_BATCH
    result = extractor.extract(texts)
    for layer in range(result.states.shape[0]):
        np.testing.assert_allclose(result.states[layer], _authors_last_token(path, texts, layer), atol=2e-5)
    true = LayerExtractor(str(path), load_tiny_tokenizer(path), show_progress_bar=False).extract(texts)
    tokenizer = load_tiny_tokenizer(path)
    lengths = [len(tokenizer(t)["input_ids"]) for t in texts]
    longest = [max(lengths[s : s + 4]) for s in range(0, len(texts), 4)]
    differs = ~np.isclose(result.states[-1], true.states[-1], atol=1e-5).all(axis=1)
    shorter = np.array([lengths[i] < longest[i // 4] for i in range(len(texts))])
    assert shorter.any()
    assert np.array_equal(differs[shorter], np.ones(shorter.sum(), dtype=bool))
    assert extractor.describe()["last_token"] == "reference"


def test_last_token_rule_is_validated_and_na_for_encoders(tiny_model_dir):
    path = tiny_model_dir("llama")
    with pytest.raises(ValueError, match="last_token"):
        LayerExtractor(str(path), load_tiny_tokenizer(path), last_token="last", show_progress_bar=False)
    bert = tiny_model_dir("bert")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        extractor = LayerExtractor(str(bert), load_tiny_tokenizer(bert), last_token="reference")
    assert extractor.last_token == "n/a"
    assert extractor.batch_size == 32


def test_sentence_transformer_truncates_at_the_smaller_length(tiny_st_dir, texts):
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(tiny_st_dir), device="cpu")
    assert st.max_seq_length == 64
    wide = LayerExtractor(st, max_length=512, show_progress_bar=False)
    assert wide.max_length == 64 and wide.describe()["max_length"] == 64
    short = LayerExtractor(st, max_length=3, batch_size=4, show_progress_bar=False)
    result = short.extract(texts)
    assert st.max_seq_length == 64  # restored
    st.max_seq_length = 3
    expected = st.encode(texts, batch_size=4)
    assert np.array_equal(result.embeddings, expected)
    assert not np.allclose(result.embeddings, wide.extract(texts).embeddings)


@pytest.mark.parametrize(
    ("config", "mode"),
    [
        ({"pooling_mode": "cls"}, "cls"),
        ({"pooling_mode": ["lasttoken"]}, "last"),
        ({"pooling_mode": "max"}, None),
        ({"pooling_mode": ["cls", "mean"]}, None),
        ({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}, "cls"),
        ({"pooling_mode_mean_tokens": True}, "mean"),
        ({"pooling_mode_lasttoken": True}, "last"),
        ({"word_embedding_dimension": 32}, None),
    ],
)
def test_st_config_pooling(config, mode):
    assert st_config_pooling(config) == mode


def test_resolve_pooling_order():
    assert resolve_pooling("x/enc", False) == ("mean", "architecture default")
    assert resolve_pooling("x/dec", True) == ("last", "architecture default")
    assert resolve_pooling("x/enc", False, {"pooling_mode": "cls"}) == ("cls", "sentence-transformers config")
    table = REFERENCE_POOLING_OVERRIDES
    assert resolve_pooling("thenlper/GTE-base", False, {"pooling_mode": "mean"}, table) == ("cls", "override")
    assert resolve_pooling("/models/GritLM-7B", True, None, table) == ("mean", "override")
    assert resolve_pooling("/models/my-gte-base", False, None, table)[1] == "architecture default"
    with pytest.raises(ValueError, match="override"):
        resolve_pooling("a/b", False, None, {"a/b": "max"})


def test_folder_without_modules_json_takes_its_pooling_config(tiny_model_dir, tmp_path):
    source = tiny_model_dir("bert")
    folder = tmp_path / "bge-base-en-v1.5"
    shutil.copytree(source, folder)
    tokenizer = load_tiny_tokenizer(folder)
    with pytest.warns(UserWarning, match="no sentence-transformers pooling config"):
        plain = LayerExtractor(str(folder), tokenizer, show_progress_bar=False)
    assert (plain.pooling, plain.pooling_source) == ("mean", "architecture default")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        forced = LayerExtractor(
            str(folder), tokenizer, pooling_overrides="reference", show_progress_bar=False
        )
    assert (forced.pooling, forced.pooling_source) == ("cls", "override")
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    assert sentence_transformers_pooling_config(str(folder)) == {"pooling_mode_cls_token": True}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        configured = LayerExtractor(str(folder), tokenizer, show_progress_bar=False)
    assert (configured.pooling, configured.pooling_source) == ("cls", "sentence-transformers config")
    assert configured.describe()["pooling_source"] == "sentence-transformers config"
    with pytest.raises(ValueError, match="pooling_overrides"):
        LayerExtractor(str(folder), tokenizer, pooling_overrides="authors")


def test_pooling_config_path_comes_from_modules_json(tmp_path):
    (tmp_path / "2_Pool").mkdir()
    (tmp_path / "2_Pool" / "config.json").write_text(json.dumps({"pooling_mode": "lasttoken"}))
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "2_Pool", "type": "sentence_transformers.models.Pooling"},
    ]
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    assert sentence_transformers_pooling_config(str(tmp_path)) == {"pooling_mode": "lasttoken"}
    assert sentence_transformers_pooling_config(str(tmp_path / "missing")) is None
    assert sentence_transformers_pooling_config("no-such-org/no-such-model") is None
