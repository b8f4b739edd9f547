"""ONNX BERT → transformers: the weight mapping by hand-built graphs, the check against a real export."""

from __future__ import annotations

import numpy as np
import pytest
import torch

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from mteb_lrd.models.onnx_bert import OnnxConversionError, bert_state_dict, check_against_onnx  # noqa: E402

PREFIX = "model.0.auto_model."


def _graph(named: dict[str, np.ndarray], linears: dict[str, np.ndarray], *, drop_bias_of: str | None = None):
    """A graph shaped like sentence-transformers' ONNX export: named tensors as initialisers, each
    linear layer as ``MatMul(x, onnx::MatMul_k)`` followed by ``Add(·, <name>.bias)``."""
    inits = [numpy_helper.from_array(v, PREFIX + k) for k, v in named.items()]
    nodes = []
    for k, (name, weight) in enumerate(linears.items()):
        anonymous = f"onnx::MatMul_{470 + k}"
        inits.append(numpy_helper.from_array(weight.T.copy(), anonymous))
        nodes.append(helper.make_node("MatMul", ["x", anonymous], [f"mm{k}"]))
        if name != drop_bias_of:
            nodes.append(helper.make_node("Add", [PREFIX + name + ".bias", f"mm{k}"], [f"out{k}"]))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])], [], inits
    )
    return helper.make_model(graph)


def test_anonymous_weights_are_named_by_the_bias_added_to_their_product_and_transposed():
    rng = np.random.default_rng(0)
    named = {
        "embeddings.LayerNorm.weight": rng.normal(size=4).astype(np.float32),
        "encoder.layer.0.attention.self.query.bias": rng.normal(size=4).astype(np.float32),
        "encoder.layer.0.intermediate.dense.bias": rng.normal(size=6).astype(np.float32),
    }
    linears = {  # nn.Linear layout: (out, in)
        "encoder.layer.0.attention.self.query": rng.normal(size=(4, 4)).astype(np.float32),
        "encoder.layer.0.intermediate.dense": rng.normal(size=(6, 4)).astype(np.float32),
    }
    state = bert_state_dict(_graph(named, linears))
    assert set(state) == set(named) | {f"{k}.weight" for k in linears}
    for key, value in named.items():
        np.testing.assert_array_equal(state[key], value)
    for key, value in linears.items():
        np.testing.assert_array_equal(state[f"{key}.weight"], value)


def test_a_weight_without_its_bias_is_an_error():
    linears = {"encoder.layer.0.output.dense": np.ones((4, 4), np.float32)}
    named = {"encoder.layer.0.output.dense.bias": np.zeros(4, np.float32)}
    with pytest.raises(OnnxConversionError, match="onnx::MatMul_470.*one named bias"):
        bert_state_dict(_graph(named, linears, drop_bias_of="encoder.layer.0.output.dense"))


def _embedding_graph(table: np.ndarray):
    """A graph whose (n, t, d) output is an embedding look-up, beside an integer output (as the
    sentence-transformers export has)."""
    nodes = [helper.make_node("Gather", ["table", "input_ids"], ["hidden"]),
             helper.make_node("Identity", ["attention_mask"], ["mask_out"])]  # fmt: skip
    inputs = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["b", "t"])
        for n in ("input_ids", "attention_mask")
    ]
    outputs = [helper.make_tensor_value_info("mask_out", TensorProto.INT64, ["b", "t"]),
               helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["b", "t", table.shape[1]])]  # fmt: skip
    graph = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(table, "table")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class _Embedder(torch.nn.Module):
    def __init__(self, table):
        super().__init__()
        self.embedding = torch.nn.Embedding.from_pretrained(torch.from_numpy(table))

    def forward(self, input_ids, attention_mask):
        from types import SimpleNamespace

        return SimpleNamespace(last_hidden_state=self.embedding(input_ids))


def test_the_check_runs_the_graph_and_compares_its_hidden_states(tmp_path):
    table = np.random.default_rng(1).normal(size=(50, 8)).astype(np.float32)
    path = tmp_path / "g.onnx"
    onnx.save(_embedding_graph(table), str(path))
    ids = np.array([[1, 2, 3], [4, 5, 0]], dtype=np.int64)
    mask = np.array([[1, 1, 1], [1, 1, 0]], dtype=np.int64)
    assert check_against_onnx(path, _Embedder(table), ids, mask) == 0.0
    shifted = table + np.float32(0.25)
    assert check_against_onnx(path, _Embedder(shifted), ids, mask) == pytest.approx(0.25)


def test_write_minilm_l3_builds_a_sentence_transformer_from_the_graph_weights(
    tmp_path, tiny_st_dir, monkeypatch
):
    """A tiny BERT's weights as the export lays them out → the folder loads as a SentenceTransformer
    with exactly those weights, the tokenizer and mean pooling of the tokenizer folder, no pooler."""
    from sentence_transformers import SentenceTransformer
    from transformers import BertConfig, BertModel

    from mteb_lrd.models import minilm_l3

    config = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=1,
                        intermediate_size=64, max_position_embeddings=40)  # fmt: skip
    bert = BertModel(config, add_pooling_layer=False).eval()
    state = {k: v.numpy() for k, v in bert.state_dict().items() if "position_ids" not in k}
    linears = {k.removesuffix(".weight"): v for k, v in state.items()
               if k.endswith(".weight") and v.ndim == 2 and "embeddings" not in k}  # fmt: skip
    named = {k: v for k, v in state.items() if k.removesuffix(".weight") not in linears}
    path = tmp_path / "model.onnx"
    onnx.save(_graph(named, linears), str(path))
    monkeypatch.setattr(minilm_l3, "check_against_onnx", lambda *args: 0.0)  # the graph here is not runnable
    output = tmp_path / "st"
    output.mkdir()
    assert minilm_l3.write_minilm_l3(path, tiny_st_dir, output) == 0.0
    loaded = SentenceTransformer(str(output), device="cpu")
    model = loaded[0].auto_model
    assert model.pooler is None and loaded.max_seq_length == 128 and len(loaded) == 2
    assert model.config.num_attention_heads == 1  # hidden 32 / 32 per head
    for key, value in bert.state_dict().items():
        torch.testing.assert_close(model.state_dict()[key], value, rtol=0, atol=0)
    monkeypatch.setattr(minilm_l3, "check_against_onnx", lambda *args: 0.5)
    with pytest.raises(OnnxConversionError, match="differs from the ONNX graph"):
        minilm_l3.write_minilm_l3(path, tiny_st_dir, tmp_path / "other")
