"""Pruned models against an independent reference: a model *built* with fewer blocks.

The reference never touches mteb-lrd's surgery: it instantiates the same architecture from a config
with ``num_hidden_layers = len(kept)`` and loads the original weights with block ``kept[i]``
renamed to block ``i``. A pruned model must compute exactly what that natively shallower model
computes, for encoders and decoders (rotary / learned positions, KV heads, padding) alike.
"""

from __future__ import annotations

import re

import pytest
import torch
from transformers import AutoModel, AutoModelForCausalLM

from mteb_lrd.pruning.pruned import pruned_copy as prune
from tests.tiny_models import DECODERS, load_tiny_tokenizer

BLOCK_PREFIX = re.compile(r"^(.*?(?:layers|layer|h))\.(\d+)\.(.*)$")


def _natively_shallower(model: torch.nn.Module, kept: list[int]) -> torch.nn.Module:
    config = model.config.__class__.from_dict(model.config.to_dict())
    if hasattr(config, "n_layer"):
        config.n_layer = len(kept)
    config.num_hidden_layers = len(kept)
    if getattr(config, "layer_types", None) is not None:
        config.layer_types = [model.config.layer_types[i] for i in kept]
    reference = type(model)(config).eval()
    new_index = {old: new for new, old in enumerate(kept)}
    state = {}
    for name, tensor in model.state_dict().items():
        match = BLOCK_PREFIX.match(name)
        if match is None:
            state[name] = tensor
        elif int(match.group(2)) in new_index:
            state[f"{match.group(1)}.{new_index[int(match.group(2))]}.{match.group(3)}"] = tensor
    missing, unexpected = reference.load_state_dict(state, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    return reference


def _outputs(model, tokenizer, texts):
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True)
    return torch.stack(out.hidden_states)


@pytest.mark.parametrize(
    ("kind", "padding_side"),
    [("bert", "right"), ("mpnet", "right"), *((k, side) for k in DECODERS for side in ("left", "right"))],
)
def test_pruned_model_equals_a_natively_shallower_model(kind, padding_side, tiny_model_dir, texts):
    path = tiny_model_dir(kind, num_layers=6)
    model = (AutoModelForCausalLM if kind in DECODERS else AutoModel).from_pretrained(str(path)).eval()
    tokenizer = load_tiny_tokenizer(path)
    tokenizer.padding_side = padding_side
    removed = [1, 4]
    kept = [i for i in range(6) if i not in removed]
    pruned = prune(model, removed)
    reference = _natively_shallower(model, kept)
    torch.testing.assert_close(
        _outputs(pruned, tokenizer, texts[:6]), _outputs(reference, tokenizer, texts[:6]), rtol=0, atol=1e-6
    )
    if kind in DECODERS:  # generation with the KV cache also matches (layer_idx renumbered)
        prompt = tokenizer(texts[:2], return_tensors="pt", padding=True)
        kwargs = {"max_new_tokens": 4, "do_sample": False, "pad_token_id": 0}
        assert torch.equal(pruned.generate(**prompt, **kwargs), reference.generate(**prompt, **kwargs))
