"""A BERT encoder exported to ONNX (by sentence-transformers) back into a transformers ``BertModel``.

Named initialisers (embeddings, LayerNorms, biases) map by name; each anonymous ``onnx::MatMul_*``
weight is the one whose product the named bias ``….bias`` is added to, so it becomes ``….weight``,
transposed (ONNX multiplies ``x @ W``, ``nn.Linear`` stores ``W.T``). The conversion is checked by
running the ONNX graph itself (onnx's reference evaluator) and the converted model on the same
tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["OnnxConversionError", "bert_state_dict", "check_against_onnx"]


class OnnxConversionError(RuntimeError):
    """The ONNX graph is not a BERT encoder this converter understands, or the result differs."""


def _strip(name: str, prefix: str) -> str:
    return name[len(prefix) :] if name.startswith(prefix) else name


def bert_state_dict(model: Any, prefix: str = "model.0.auto_model.") -> dict[str, np.ndarray]:
    """The ``BertModel`` state dict of a loaded ONNX ``ModelProto`` (float32 arrays).

    Raises:
        OnnxConversionError: an anonymous MatMul weight without exactly one named bias after it.
    """
    from onnx import numpy_helper

    graph = model.graph
    arrays = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    state = {_strip(k, prefix): v.astype(np.float32) for k, v in arrays.items() if not k.startswith("onnx::")}
    for node in graph.node:
        weights = [name for name in node.input if name.startswith("onnx::MatMul") and name in arrays]
        if node.op_type != "MatMul" or not weights:
            continue
        biases = [name for add in consumers.get(node.output[0], []) if add.op_type == "Add"
                  for name in add.input if name in arrays and name.endswith(".bias")]  # fmt: skip
        if len(biases) != 1:
            raise OnnxConversionError(
                f"{weights[0]}: expected one named bias added to its product, found {biases}"
            )
        key = _strip(biases[0], prefix).removesuffix(".bias") + ".weight"
        state[key] = np.ascontiguousarray(arrays[weights[0]].T.astype(np.float32))
    return state


def check_against_onnx(
    model_path: Path, bert: Any, input_ids: np.ndarray, attention_mask: np.ndarray
) -> float:
    """Largest absolute difference of the last hidden states of the ONNX graph and ``bert`` on the
    same tokens (``(n, t)`` int64 arrays).

    Raises:
        OnnxConversionError: when the graph has no single ``(n, t, d)`` float output.
    """
    import torch
    from onnx.reference import ReferenceEvaluator

    evaluator = ReferenceEvaluator(str(model_path))
    names = [i.name for i in evaluator.proto_.graph.input]
    feeds = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "token_type_ids": np.zeros_like(input_ids),
    }
    outputs: Any = evaluator.run(None, {name: feeds[name] for name in names})
    hidden = [o for o in outputs if o.dtype == np.float32 and o.ndim == 3]
    if len(hidden) != 1:
        raise OnnxConversionError(f"expected one (n, t, d) float output of the graph, found {len(hidden)}")
    with torch.no_grad():
        ours = bert(input_ids=torch.from_numpy(input_ids), attention_mask=torch.from_numpy(attention_mask))
    return float(np.abs(ours.last_hidden_state.numpy() - hidden[0]).max())
