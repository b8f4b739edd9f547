"""ShortGPT block influence and angular distance against straightforward loops."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mteb_lrd.pruning.block_influence import block_influence, block_influence_sums
from mteb_lrd.pruning.rules import angular_distance_matrix
from tests.tiny_models import TEXTS, load_tiny_tokenizer


def test_block_influence_sums_masks_padding():
    rng = np.random.default_rng(0)
    hidden = [torch.tensor(rng.standard_normal((2, 3, 4)), dtype=torch.float32) for _ in range(3)]
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    expected = np.zeros(2)
    for layer in range(2):
        for b in range(2):
            for t in range(3):
                if mask[b, t]:
                    u, v = hidden[layer][b, t].double().numpy(), hidden[layer + 1][b, t].double().numpy()
                    expected[layer] += 1 - u @ v / np.linalg.norm(u) / np.linalg.norm(v)
    np.testing.assert_allclose(block_influence_sums(hidden, mask).numpy(), expected, rtol=1e-5)


def test_block_influence_on_tiny_decoder_matches_unbatched(tiny_model_dir):
    from transformers import AutoModel

    path = tiny_model_dir("llama", num_layers=4)
    model, tok = AutoModel.from_pretrained(path), load_tiny_tokenizer(path)
    batched = block_influence(model, TEXTS[:6], tokenizer=tok, batch_size=4)
    # one text per batch: no padding at all, so the mask cannot matter
    sums, count = np.zeros(4), 0
    with torch.no_grad():
        for text in TEXTS[:6]:
            enc = tok([text], return_tensors="pt")
            out = model(
                input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], output_hidden_states=True
            )
            h = [s[0].double().numpy() for s in out.hidden_states]
            for layer in range(4):
                a, b = h[layer], h[layer + 1]
                sums[layer] += np.sum(
                    1 - (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
                )
            count += h[0].shape[0]
    np.testing.assert_allclose(batched, sums / count, rtol=1e-4)
    assert batched.shape == (4,) and np.all(batched >= 0)


def test_block_influence_rejects_bad_input(tiny_model_dir):
    path = tiny_model_dir("llama", num_layers=4)
    with pytest.raises(ValueError, match="texts"):
        block_influence(str(path), [], tokenizer=load_tiny_tokenizer(path))
    with pytest.raises(ValueError, match="batch_size"):
        block_influence(str(path), ["a"], tokenizer=load_tiny_tokenizer(path), batch_size=0)


def test_angular_distance_matrix_against_loop():
    rng = np.random.default_rng(1)
    states = rng.standard_normal((4, 5, 3))
    d = angular_distance_matrix(states)
    for a in range(4):
        for b in range(4):
            angles = []
            for i in range(5):
                u, v = states[a, i], states[b, i]
                cos = np.clip(u @ v / np.linalg.norm(u) / np.linalg.norm(v), -1, 1)
                angles.append(np.arccos(cos) / np.pi)
            assert d[a, b] == pytest.approx(np.mean(angles), abs=1e-7)
    with pytest.raises(ValueError, match="NaN"):
        angular_distance_matrix(np.full((2, 2, 2), np.nan))
