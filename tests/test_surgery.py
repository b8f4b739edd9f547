"""Block removal and skipping on every supported architecture family."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoModel, AutoModelForCausalLM

from mteb_lrd import prune
from mteb_lrd.models.pruning_record import pruning_record
from mteb_lrd.pruning.surgery import skip_blocks, validate_blocks
from tests.tiny_models import DECODERS, load_tiny_tokenizer


def _load(kind: str, path):
    cls = AutoModelForCausalLM if kind in DECODERS else AutoModel
    return cls.from_pretrained(str(path)).eval()


def _hidden_states(model, tokenizer, texts):
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True)
    return [h.numpy() for h in out.hidden_states]


def _manual_forward_without(model, tokenizer, texts, removed, kind):
    """Reference: run the kept blocks by hand via forward hooks that swap a block's output for its input."""
    from mteb_lrd.extraction.architectures import locate

    blocks = locate(model).blocks
    handles = []
    for index in removed:

        def passthrough(module, args, kwargs, output):
            hidden = kwargs.get("hidden_states", args[0] if args else None)
            return (hidden,) + tuple(output[1:]) if isinstance(output, tuple) else hidden

        handles.append(blocks[index].register_forward_hook(passthrough, with_kwargs=True))
    try:
        return _hidden_states(model, tokenizer, texts)[-1]
    finally:
        for handle in handles:
            handle.remove()


@pytest.mark.parametrize("kind", ["bert", "mpnet", "llama", "qwen2", "gpt2"])
def test_prune_removes_blocks_and_keeps_config_consistent(kind, tiny_model_dir, texts):
    path = tiny_model_dir(kind, num_layers=5)
    model = _load(kind, path)
    tokenizer = load_tiny_tokenizer(path)
    pruned = prune(model, [1, 3])
    from mteb_lrd.extraction.architectures import locate

    located = locate(pruned)
    assert located.num_blocks == 3
    assert pruned.config.num_hidden_layers == 3
    assert locate(model).num_blocks == 5, "the original model must stay untouched"
    indices = [
        m.layer_idx
        for b in located.blocks
        for m in b.modules()
        if isinstance(getattr(m, "layer_idx", None), int)
    ]
    if kind != "mpnet":  # MPNet blocks keep no layer index
        assert indices and sorted(set(indices)) == [0, 1, 2]
        assert all(
            len({m.layer_idx for m in b.modules() if isinstance(getattr(m, "layer_idx", None), int)}) == 1
            for b in located.blocks
        )
    if getattr(pruned.config, "layer_types", None) is not None:
        assert len(pruned.config.layer_types) == 3
    states = _hidden_states(pruned, tokenizer, texts[:4])
    assert len(states) == 4
    # The kept blocks are the original blocks 0, 2, 4 (same weights, same order).
    original_blocks = locate(model).blocks
    for new, old in zip(
        located.blocks, [original_blocks[0], original_blocks[2], original_blocks[4]], strict=True
    ):
        for (n1, p1), (n2, p2) in zip(new.named_parameters(), old.named_parameters(), strict=True):
            assert n1 == n2 and torch.equal(p1, p2)
    if kind in ("bert", "mpnet"):
        # encoders: the pruned forward equals the full model with blocks 1 and 3 made pass-through
        expected = _manual_forward_without(model, tokenizer, texts[:4], [1, 3], kind)
        np.testing.assert_allclose(states[-1], expected, atol=1e-5)


@pytest.mark.parametrize("kind", ["llama", "qwen2", "gpt2"])
def test_pruned_decoder_generates_with_kv_cache(kind, tiny_model_dir):
    path = tiny_model_dir(kind, num_layers=4)
    model = _load(kind, path)
    tokenizer = load_tiny_tokenizer(path)
    pruned = prune(model, [0, 2])
    batch = tokenizer(["the cat sat"], return_tensors="pt")
    with torch.no_grad():
        out = pruned.generate(**batch, max_new_tokens=3, do_sample=False, pad_token_id=0)
    assert out.shape[1] == batch["input_ids"].shape[1] + 3


def test_pruned_transformers_model_save_reload_equal(tiny_model_dir, tmp_path, texts):
    path = tiny_model_dir("qwen2", num_layers=4)
    model = _load("qwen2", path)
    tokenizer = load_tiny_tokenizer(path)
    pruned = prune(model, [1])
    pruned.save_pretrained(tmp_path / "p")
    reloaded = AutoModelForCausalLM.from_pretrained(str(tmp_path / "p")).eval()
    assert reloaded.config.num_hidden_layers == 3
    # the experiment record travels with the config, so the wrapper scores it as an experiment
    record = reloaded.config.mteb_lrd_pruning
    assert record["removed_blocks"] == [1] and record["num_blocks"] == 4
    assert record["base_model"] == f"local/{path.name}" and record["rule"] is None
    from mteb_lrd import with_layer_dynamics

    wrapped = with_layer_dynamics(reloaded, tokenizer=tokenizer, name="tiny/qwen2")
    assert wrapped.mteb_model_meta.experiment_kwargs == {"removed_blocks": [1], "num_blocks": 4}
    a = _hidden_states(pruned, tokenizer, texts[:3])
    b = _hidden_states(reloaded, tokenizer, texts[:3])
    assert len(a) == len(b) == 4
    np.testing.assert_array_equal(a[-1], b[-1])


def test_a_pruned_model_with_per_layer_rope_flags_saves_and_reloads_equal(tmp_path):
    """SmolLM3 builds each block from ``config.no_rope_layers``: the saved config must list the kept blocks'."""
    from transformers import SmolLM3Config, SmolLM3ForCausalLM

    torch.manual_seed(0)
    config = SmolLM3Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_attention_heads=4,
                           num_key_value_heads=2, num_hidden_layers=6, pad_token_id=0, bos_token_id=1,
                           eos_token_id=2, no_rope_layers=[1, 0, 1, 1, 1, 0])  # fmt: skip
    pruned = prune(SmolLM3ForCausalLM(config).eval(), [1, 3])
    assert pruned.config.no_rope_layers == [1, 1, 1, 0]
    pruned.save_pretrained(tmp_path / "p")
    reloaded = SmolLM3ForCausalLM.from_pretrained(str(tmp_path / "p")).eval()
    ids = torch.randint(3, 64, (2, 9))
    with torch.no_grad():
        np.testing.assert_array_equal(
            pruned(input_ids=ids).logits.numpy(), reloaded(input_ids=ids).logits.numpy()
        )


def test_skip_blocks_restores_model(tiny_model_dir, texts):
    path = tiny_model_dir("llama", num_layers=4)
    model = _load("llama", path)
    tokenizer = load_tiny_tokenizer(path)
    before = _hidden_states(model, tokenizer, texts[:3])
    with skip_blocks(model, [1, 2]) as same:
        assert same is model
        during = _hidden_states(model, tokenizer, texts[:3])
        assert len(during) == 3 and model.config.num_hidden_layers == 2
    after = _hidden_states(model, tokenizer, texts[:3])
    assert model.config.num_hidden_layers == 4 and len(after) == 5
    np.testing.assert_array_equal(before[-1], after[-1])
    assert not np.allclose(before[-1], during[-1])
    from mteb_lrd.extraction.architectures import locate

    assert [b.self_attn.layer_idx for b in locate(model).blocks] == [0, 1, 2, 3]


@pytest.mark.parametrize("kind", ["bert", "mpnet", "llama", "qwen2", "gpt2"])
def test_a_model_first_asked_for_its_states_inside_skip_blocks_reports_all_of_them_after(
    kind, tiny_model_dir, texts
):
    """transformers hooks the blocks for hidden states at the first call that asks for them: the
    surgery must not let that happen while blocks are out, or they never report again."""
    path = tiny_model_dir(kind, num_layers=4)
    tokenizer = load_tiny_tokenizer(path)
    model = _load(kind, path)  # fresh: never asked for hidden states
    with skip_blocks(model, [1, 2]):
        assert len(_hidden_states(model, tokenizer, texts[:3])) == 3
    after = _hidden_states(model, tokenizer, texts[:3])
    reference = _hidden_states(_load(kind, path), tokenizer, texts[:3])
    assert len(after) == len(reference) == 5
    for mine, theirs in zip(after, reference, strict=True):
        np.testing.assert_array_equal(mine, theirs)


def test_skip_blocks_restores_after_exception(tiny_model_dir):
    model = _load("gpt2", tiny_model_dir("gpt2", num_layers=4))
    with pytest.raises(RuntimeError), skip_blocks(model, [0]):
        raise RuntimeError("boom")
    assert model.config.num_hidden_layers == 4 and len(model.transformer.h) == 4


@pytest.mark.parametrize(
    ("blocks", "message"),
    [
        ([], "empty"),
        ([0, 1, 2, 3], "all 4"),
        ([4], "out of range"),
        ([-1], "out of range"),
        ([1, 1], "more than once"),
        ([1.0], "integers"),
        ([True], "integers"),
        ("12", "list"),
    ],
)
def test_validate_blocks_errors(blocks, message):
    with pytest.raises(ValueError, match=message):
        validate_blocks(blocks, 4)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-3, 8), max_size=8), st.integers(1, 6))
def test_validate_blocks_property(blocks, num_blocks):
    valid = (
        bool(blocks)
        and len(set(blocks)) == len(blocks)
        and all(0 <= b < num_blocks for b in blocks)
        and len(blocks) < num_blocks
    )
    if valid:
        assert validate_blocks(blocks, num_blocks) == sorted(blocks)
    else:
        with pytest.raises(ValueError):
            validate_blocks(blocks, num_blocks)


def test_prune_rejects_bad_rule_and_budget(tiny_st_dir):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_st_dir), device="cpu")
    with pytest.raises(ValueError, match="budget"):
        prune(model, [1], budget=1.5)
    with pytest.raises(ValueError, match="rule"):
        prune(model, [1], rule="")


def _result_files(cache, task_name):
    return sorted(
        p.relative_to(cache.cache_path).as_posix() for p in cache.cache_path.rglob(f"{task_name}.json")
    )


def test_pruned_sentence_transformer_is_an_experiment_of_its_base(tiny_st_dir, tmp_path, texts):
    import mteb
    from sentence_transformers import SentenceTransformer

    from tests.mteb_helpers import sts_task

    model = SentenceTransformer(str(tiny_st_dir), device="cpu")
    pruned = prune(model, [2], rule="gfmi", budget=0.2, name="tiny-org/tiny-st", revision="r1")
    assert type(pruned) is SentenceTransformer  # encode, save, push_to_hub as usual
    assert len(pruned[0].auto_model.encoder.layer) == 3 and len(model[0].auto_model.encoder.layer) == 4
    assert pruned[0].auto_model.config.mteb_lrd_pruning == {
        "base_model": "tiny-org/tiny-st",
        "base_revision": "r1",
        "removed_blocks": [2],
        "num_blocks": 4,
        "rule": "gfmi",
        "budget": 0.2,
    }
    card = pruned.model_card_data
    assert card.base_model == "tiny-org/tiny-st" and {"pruned", "mteb-lrd"} <= set(card.tags)
    assert "blocks 2 of 4 removed by the gfmi rule at budget 0.2" in card.model_name
    full, small = model.encode(texts), pruned.encode(texts)
    assert full.shape == small.shape and not np.allclose(full, small)

    # plain mteb.evaluate of the SentenceTransformer itself: an experiment beside the base, real size
    cache = mteb.ResultCache(tmp_path / "cache")
    task = sts_task(texts)
    mteb.evaluate(pruned, [task], cache=cache, co2_tracker=False, show_progress_bar=False)
    base_meta = mteb.models.SentenceTransformerEncoderWrapper(model).mteb_model_meta
    base = mteb.models.SentenceTransformerEncoderWrapper(model)
    base.mteb_model_meta = base_meta.model_copy(update={"name": "tiny-org/tiny-st", "revision": "r1"})
    mteb.evaluate(base, [task], cache=cache, co2_tracker=False, show_progress_bar=False)
    experiment = "budget_0.2__num_blocks_4__removed_blocks_[2]__rule_gfmi"
    assert _result_files(cache, task.metadata.name) == [
        "results/tiny-org__tiny-st/r1/TinySTS.json",
        f"results/tiny-org__tiny-st/r1/experiments/{experiment}/TinySTS.json",
    ]
    meta_file = cache.cache_path / f"results/tiny-org__tiny-st/r1/experiments/{experiment}/model_meta.json"
    n_parameters = json.loads(meta_file.read_text())["n_parameters"]
    assert n_parameters == sum(p.numel() for p in pruned.parameters())
    assert n_parameters < sum(p.numel() for p in model.parameters())


def test_pruned_sentence_transformer_save_load_round_trip(tiny_st_dir, tmp_path, texts):
    import mteb
    from sentence_transformers import SentenceTransformer

    from mteb_lrd import with_layer_dynamics

    model = SentenceTransformer(str(tiny_st_dir), device="cpu")
    pruned = prune(model, [2], name="tiny-org/tiny-st")
    pruned.save(str(tmp_path / "saved"))
    readme = (tmp_path / "saved" / "README.md").read_text()
    assert "# tiny-org/tiny-st pruned: blocks 2 of 4 removed" in readme
    assert "- pruned" in readme and "base_model: tiny-org/tiny-st" in readme
    assert json.loads((tmp_path / "saved" / "config.json").read_text())["mteb_lrd_pruning"][
        "removed_blocks"
    ] == [2]

    plain = SentenceTransformer(str(tmp_path / "saved"), device="cpu")
    np.testing.assert_allclose(plain.encode(texts), pruned.encode(texts), atol=1e-6)
    assert pruning_record(plain) == pruning_record(pruned)
    meta = mteb.models.SentenceTransformerEncoderWrapper(plain).mteb_model_meta
    wrapped = with_layer_dynamics(plain).mteb_model_meta
    for m in (meta, wrapped):
        assert (m.name, m.revision) == ("tiny-org/tiny-st", "no_revision_available")
        assert m.experiment_kwargs == {"removed_blocks": [2], "num_blocks": 4}
        assert m.n_parameters == sum(p.numel() for p in plain.parameters())

    twice = prune(plain, [0])  # current numbering: block 0 of the 3 kept; the record keeps the base's
    assert pruning_record(twice)["removed_blocks"] == [0, 2] and pruning_record(twice)["num_blocks"] == 4
    assert pruning_record(twice)["base_model"] == "tiny-org/tiny-st"
    assert len(twice[0].auto_model.encoder.layer) == 2


def test_prune_by_rule_without_texts_uses_the_demo_sample(tmp_path, caplog):
    from sentence_transformers import SentenceTransformer

    from mteb_lrd.defaults import demo_texts
    from mteb_lrd.pruning.choose import choose_blocks
    from tests.tiny_models import build_tiny_sentence_transformer

    model = SentenceTransformer(
        str(build_tiny_sentence_transformer(tmp_path / "st8", num_layers=8)), device="cpu"
    )
    with caplog.at_level("WARNING"):
        pruned = prune(model, rule="gfmi", budget=0.2)
    assert "bundled" in caplog.text and "STS Benchmark sample" in caplog.text
    expected = choose_blocks(model, "gfmi", 0.2, demo_texts())
    assert pruning_record(pruned)["removed_blocks"] == expected


def test_prune_by_rule_and_budget(tmp_path, texts):
    from sentence_transformers import SentenceTransformer

    from tests.tiny_models import build_tiny_sentence_transformer

    model = SentenceTransformer(
        str(build_tiny_sentence_transformer(tmp_path / "st8", num_layers=8)), device="cpu"
    )
    with pytest.raises(ValueError, match="give blocks=.* or rule="):
        prune(model, rule="gfmi")
    with pytest.raises(ValueError, match="rule must be one of"):
        prune(model, rule="best", budget=0.5, texts=texts)
    pruned = prune(model, rule="nrs", budget=0.5, texts=texts)
    record = pruning_record(pruned)
    assert record["rule"] == "nrs" and record["budget"] == 0.5
    assert len(record["removed_blocks"]) == 2 and set(record["removed_blocks"]) <= {3, 4, 5}
    assert len(pruned[0].auto_model.encoder.layer) == 6


def test_pruned_model_card_says_pruned_from_with_blocks_rule_and_budget(tiny_st, tmp_path):
    pruned = prune(tiny_st, [1, 2], rule="gfmi", budget=0.5)
    pruned.save(str(tmp_path / "saved"))
    card = (tmp_path / "saved" / "README.md").read_text()
    assert "finetuned from" not in card
    assert ("model pruned from [tiny-org/tiny-st](https://huggingface.co/tiny-org/tiny-st) "
            "(blocks 1, 2 of 4 removed by the gfmi rule at budget 0.5, with mteb-lrd)") in card  # fmt: skip
    assert "- pruned" in card and "base_model: tiny-org/tiny-st" in card
    tiny_st.save(str(tmp_path / "base"))  # the base model's own card is untouched
    assert "pruned from" not in (tmp_path / "base" / "README.md").read_text()
