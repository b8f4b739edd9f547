"""The hook-based representation on tiny random decoders, checked against independent computations."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoModelForCausalLM

from mteb_lrd.dysem.representation import Component, RepresentationExtractor
from mteb_lrd.extraction.architectures import UnsupportedArchitectureError, locate
from tests.tiny_models import load_tiny_tokenizer

TEXTS = ["the cat sat on the mat", "a dog", "the woman plays the guitar with a happy child", "good day"]


def extractor_for(path, **kwargs) -> RepresentationExtractor:
    return RepresentationExtractor(path, load_tiny_tokenizer(path), device="cpu", **kwargs)


def single_text_reference(path, text: str):
    """Per-layer sub-layer outputs of one unpadded text, with hooks written here, and the raw last block output."""
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    located = locate(model)
    tok = load_tiny_tokenizer(path)
    captured: dict[str, list[torch.Tensor]] = {"attention": [], "mlp": [], "last_block": []}
    handles = []
    for block in located.blocks:
        attn = getattr(block, located.spec.attention)
        mlp = getattr(block, located.spec.mlp)
        handles.append(attn.register_forward_hook(lambda m, i, o: captured["attention"].append(o[0][0, -1])))
        handles.append(mlp.register_forward_hook(lambda m, i, o: captured["mlp"].append(o[0, -1])))
    handles.append(
        located.blocks[-1].register_forward_hook(
            lambda m, i, o: captured["last_block"].append(o[0][0, -1] if isinstance(o, tuple) else o[0, -1])
        )
    )
    ids = tok([text], return_tensors="pt")
    with torch.no_grad():
        out = model(**ids, output_hidden_states=True)
    for h in handles:
        h.remove()
    return {
        "attention": torch.stack(captured["attention"]).sum(0).numpy(),
        "mlp": torch.stack(captured["mlp"]).sum(0).numpy(),
        "h0": out.hidden_states[0][0, -1].numpy(),
        "hL_raw": captured["last_block"][0].numpy(),
        "hL": out.hidden_states[-1][0, -1].numpy(),
        "mean": out.hidden_states[-1][0].mean(0).numpy(),
        "h2": out.hidden_states[2][0, -1].numpy(),
    }


@pytest.mark.parametrize("kind", ["llama", "qwen2", "gpt2"])
def test_padded_batch_equals_independent_single_text_hooks(tiny_model_dir, kind):
    path = tiny_model_dir(kind)
    ex = extractor_for(path, batch_size=4)
    out = ex.extract(TEXTS, ["attention", "mlp", "hidden", "hidden:2", "mean"])
    assert ex.forward_batches == 1  # every component from the one pass
    for i, text in enumerate(TEXTS):
        ref = single_text_reference(path, text)
        np.testing.assert_allclose(out["attention"][i], ref["attention"], atol=2e-4, rtol=1e-4)
        np.testing.assert_allclose(out["mlp"][i], ref["mlp"], atol=2e-4, rtol=1e-4)
        np.testing.assert_allclose(out["hidden:-1"][i], ref["hL"], atol=2e-4, rtol=1e-4)
        np.testing.assert_allclose(out["hidden:2"][i], ref["h2"], atol=2e-4, rtol=1e-4)
        np.testing.assert_allclose(out["mean:-1"][i], ref["mean"], atol=2e-4, rtol=1e-4)
        # the residual stream: h_L (before the final norm) = h_0 + sum of attention and MLP outputs
        np.testing.assert_allclose(
            ref["h0"] + ref["attention"] + ref["mlp"], ref["hL_raw"], atol=5e-4, rtol=1e-4
        )


def test_hooks_are_removed_after_an_exception(tiny_model_dir):
    path = tiny_model_dir("llama")
    ex = extractor_for(path)
    blocks = ex.located.blocks

    def boom(module, args):
        raise RuntimeError("boom")

    trap = blocks[-1].mlp.register_forward_pre_hook(boom)
    with pytest.raises(RuntimeError, match="boom"):
        ex.extract(TEXTS, ["attention", "mlp"])
    trap.remove()
    for block in blocks:
        assert not block.self_attn._forward_hooks and not block.mlp._forward_hooks
    assert ex.extract(TEXTS[:1], ["attention"])["attention"].shape == (1, ex.hidden_size)


def test_each_unique_text_goes_through_the_model_once(tiny_model_dir, tmp_path):
    path = tiny_model_dir("qwen2")
    ex = extractor_for(path, batch_size=2, cache_dir=tmp_path, prefetch=("hidden",))
    first = ex.extract(TEXTS + TEXTS[:2], ["attention"])
    assert ex.forward_texts == len(TEXTS)
    np.testing.assert_array_equal(first["attention"][:2], first["attention"][-2:])
    ex.extract(TEXTS, ["attention", "hidden"])  # prefetched: no new pass
    assert ex.forward_texts == len(TEXTS)
    again = extractor_for(path, cache_dir=tmp_path, prefetch=("hidden",))  # a new process, same cache
    np.testing.assert_array_equal(
        again.extract(TEXTS, ["attention"])["attention"], first["attention"][: len(TEXTS)]
    )
    assert again.forward_texts == 0


def test_corrupt_cache_shard_is_detected_and_recomputed(tiny_model_dir, tmp_path):
    path = tiny_model_dir("llama")
    ex = extractor_for(path, cache_dir=tmp_path)
    ex.extract(TEXTS, ["attention"])
    shards = list(tmp_path.rglob("shard-*.npz"))
    assert len(shards) == 1
    shards[0].write_bytes(b"not a zip file")
    fresh = extractor_for(path, cache_dir=tmp_path)
    with pytest.warns(UserWarning, match="corrupt cache shard"):
        fresh.extract(TEXTS, ["attention"])
    assert fresh.forward_texts == len(TEXTS)


def test_encoders_get_a_clear_error(tiny_model_dir):
    path = tiny_model_dir("bert")
    with pytest.raises(UnsupportedArchitectureError, match="decoder"):
        RepresentationExtractor(AutoModel.from_pretrained(path), load_tiny_tokenizer(path))


@pytest.mark.parametrize(
    ("spec", "message"),
    [("attention:3", "takes no layer"), ("hidden:x", "integer"), ("logits", "component must be")],
)
def test_bad_component_specs(spec, message):
    with pytest.raises(ValueError, match=message):
        Component.parse(spec)


def test_out_of_range_layer_and_bad_settings(tiny_model_dir):
    path = tiny_model_dir("llama")
    ex = extractor_for(path)
    with pytest.raises(ValueError, match="out of range"):
        ex.extract(TEXTS, ["hidden:9"])
    with pytest.raises(ValueError, match="batch_size"):
        extractor_for(path, batch_size=0)


def test_a_model_object_stays_on_its_device(tiny_model_dir, monkeypatch):
    """With a GPU "visible", a CPU model object is run where it is (moving it would fail on this
    CUDA-less torch), like LayerExtractor."""
    path = tiny_model_dir("llama")
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    ex = RepresentationExtractor(model, load_tiny_tokenizer(path))
    out = ex.extract(TEXTS[:2], ["attention"])
    assert ex.device == torch.device("cpu")
    ref = single_text_reference(path, TEXTS[0])
    np.testing.assert_allclose(out["attention"][0], ref["attention"], atol=2e-4, rtol=1e-4)


def test_a_tokenizer_that_gives_other_ids_misses_the_cache(tiny_model_dir, tmp_path):
    """Same weights, same vocabulary, another normaliser: other ids, so not the cached vectors."""
    from tokenizers import normalizers

    path = tiny_model_dir("qwen2")
    texts = ["The Cat sat on the mat", "A DOG"]
    first = extractor_for(path, cache_dir=tmp_path)
    first.extract(texts, ["attention"])
    other = load_tiny_tokenizer(path)
    other.backend_tokenizer.normalizer = normalizers.Sequence(
        [normalizers.Lowercase(), normalizers.Replace("cat", "dog")]
    )
    assert other(texts)["input_ids"] != first.tokenizer(texts)["input_ids"]
    again = RepresentationExtractor(path, other, device="cpu", cache_dir=tmp_path)
    assert again.identity != first.identity
    fresh = RepresentationExtractor(path, other, device="cpu").extract(texts, ["attention"])["attention"]
    np.testing.assert_array_equal(again.extract(texts, ["attention"])["attention"], fresh)


def test_the_same_model_in_another_folder_is_served_from_the_cache(tiny_model_dir, tmp_path):
    """The identity is the model's, not its folder's: a copy elsewhere (another machine's cache
    folder) reads the vectors the original wrote."""
    import shutil

    path = tiny_model_dir("qwen2")
    copy = shutil.copytree(path, tmp_path / "elsewhere" / "model")
    first = extractor_for(path, cache_dir=tmp_path / "cache")
    vectors = first.extract(TEXTS, ["attention"])["attention"]
    again = extractor_for(copy, cache_dir=tmp_path / "cache")
    assert again.identity == first.identity
    np.testing.assert_array_equal(again.extract(TEXTS, ["attention"])["attention"], vectors)
    assert again.forward_texts == 0
