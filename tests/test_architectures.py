"""The architecture table finds blocks and final norms of every supported family."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    AutoModel,
    AutoModelForCausalLM,
    Gemma3TextConfig,
    MistralConfig,
    XLMRobertaConfig,
)

from mteb_lrd.extraction.architectures import UnsupportedArchitectureError, locate


@pytest.mark.parametrize(
    ("kind", "name", "causal"),
    [
        ("bert", "bert", False),
        ("mpnet", "bert", False),
        ("llama", "llama", True),
        ("qwen2", "llama", True),
        ("gpt2", "gpt2", True),
    ],
)
def test_base_models(kind, name, causal, tiny_model_dir):
    located = locate(AutoModel.from_pretrained(tiny_model_dir(kind)))
    assert located.spec.name == name and located.spec.causal is causal
    assert located.num_blocks == 4
    assert (located.final_norm is not None) is causal


@pytest.mark.parametrize(("kind", "name"), [("llama", "llama-causal-lm"), ("gpt2", "gpt2-lm-head")])
def test_task_head_models(kind, name, tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir(kind))
    located = locate(model)
    assert located.spec.name == name and located.num_blocks == 4
    block = located.blocks[0]
    assert isinstance(getattr(block, located.spec.attention), torch.nn.Module)
    assert isinstance(getattr(block, located.spec.mlp), torch.nn.Module)


@pytest.mark.parametrize(
    "config",
    [
        MistralConfig(
            vocab_size=50,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
        ),
        Gemma3TextConfig(
            vocab_size=50,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=4,
        ),
        XLMRobertaConfig(
            vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=3, num_attention_heads=4
        ),
    ],
    ids=["mistral", "gemma3", "xlm-roberta"],
)
def test_other_families(config):
    located = locate(AutoModel.from_config(config))
    assert located.num_blocks == 3


def test_sentence_transformer_is_unwrapped(tiny_st_dir):
    from sentence_transformers import SentenceTransformer

    located = locate(SentenceTransformer(str(tiny_st_dir), device="cpu"))
    assert located.spec.name == "bert" and located.num_blocks == 4


def test_unknown_model_and_non_model():
    with pytest.raises(UnsupportedArchitectureError, match="Linear.*tried"):
        locate(torch.nn.Linear(2, 2))
    with pytest.raises(UnsupportedArchitectureError, match="expected a SentenceTransformer"):
        locate("not a model")
