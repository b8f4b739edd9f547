"""paraphrase-MiniLM-L3-v2 as a SentenceTransformer folder, from its ONNX export.

The ONNX weights become a ``BertModel`` (:mod:`mteb_lrd.models.onnx_bert`), checked against the
graph itself on a few sentences; the tokenizer and the mean-pooling config come from
all-MiniLM-L6-v2's folder (the same 30,522-token uncased BERT vocabulary); the pipeline is
Transformer → mean Pooling, truncating at 128 tokens, as the original model's; the BERT is loaded
without a pooler (the export has none; hidden states never use it).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from mteb_lrd.io import atomic_write_json
from mteb_lrd.models.onnx_bert import OnnxConversionError, bert_state_dict, check_against_onnx

__all__ = ["CHECK_TEXTS", "CHECK_TOLERANCE", "write_minilm_l3"]

CHECK_TEXTS = ("A man is playing a guitar.", "The weather is nice today, isn't it?", "Dogs")
"""Sentences the converted model must encode as the ONNX graph does."""
CHECK_TOLERANCE = 1e-4
"""Largest absolute difference of last hidden states allowed (measured: about 1.4e-6)."""


def write_minilm_l3(onnx_path: Path, tokenizer_folder: Path, output: Path) -> float:
    """Convert ``onnx_path`` into the SentenceTransformer folder ``output``; returns the check's
    largest difference.

    Raises:
        OnnxConversionError: weights that do not fill a ``BertModel`` exactly, or a converted model
            that differs from the graph by more than :data:`CHECK_TOLERANCE`.
    """
    import onnx
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    state = bert_state_dict(onnx.load(str(onnx_path)))
    vocab, hidden = state["embeddings.word_embeddings.weight"].shape
    layers = 1 + max(int(k.split(".")[2]) for k in state if k.startswith("encoder.layer."))
    config = BertConfig(
        vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=hidden // 32,
        intermediate_size=state["encoder.layer.0.intermediate.dense.weight"].shape[0],
        max_position_embeddings=state["embeddings.position_embeddings.weight"].shape[0],
    )  # fmt: skip
    bert = BertModel(config, add_pooling_layer=False).eval()
    try:
        bert.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=True)
    except RuntimeError as error:
        raise OnnxConversionError(f"the ONNX weights do not fill a BertModel: {error}") from None
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_folder))
    tokens = tokenizer(list(CHECK_TEXTS), padding=True, return_tensors="np")
    ids, mask = (tokens[key].astype(np.int64) for key in ("input_ids", "attention_mask"))
    difference = check_against_onnx(onnx_path, bert, ids, mask)
    if not difference <= CHECK_TOLERANCE:
        raise OnnxConversionError(f"converted model differs from the ONNX graph by {difference:.2e}")
    bert.save_pretrained(output)
    tokenizer.save_pretrained(output)
    shutil.copytree(tokenizer_folder / "1_Pooling", output / "1_Pooling", dirs_exist_ok=True)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    atomic_write_json(output / "modules.json", modules, indent=2)
    # the export has no pooler weights: load without a pooler (nothing random, no "missing weights" report)
    pipeline = {"max_seq_length": 128, "do_lower_case": False, "model_kwargs": {"add_pooling_layer": False}}
    atomic_write_json(output / "sentence_bert_config.json", pipeline)
    return difference
