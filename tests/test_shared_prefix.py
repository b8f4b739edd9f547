"""Every pruned variant from one pass over the shared blocks, against separately pruned copies."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from mteb_lrd.pruning.pruned import pruned_copy as prune
from mteb_lrd.pruning.shared_prefix import encode_variants, resumed_from
from tests.tiny_models import build_tiny_sentence_transformer

NUM_LAYERS = 7
CANDIDATES = (2, 3, 4)  # every 1- and 2-block set among them: starts 2, 3 and 4


@pytest.fixture(scope="module", params=["bert", "mpnet", "gemma3"])
def st_model(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"st-{request.param}") / "st"
    build_tiny_sentence_transformer(folder, num_layers=NUM_LAYERS, kind=request.param)
    return SentenceTransformer(str(folder), device="cpu")


def _sets():
    return [list(c) for size in (1, 2) for c in combinations(CANDIDATES, size)]


# (2, 3, 4) resumes from (2, 3); (2, 6) from the full model ((2,) keeps no block after 6);
# (5, 6) keeps none after 5; (1, 5) has no parent but the full model
DEEPER = [[2, 3, 4], [2, 6], [1, 5]]


def test_every_variant_equals_its_pruned_copy(st_model, texts):
    repeated = texts + texts[:5]  # repeats are encoded once and indexed back
    sets = _sets() + DEEPER
    codes, vectors = encode_variants(st_model, repeated, sets, prompt="q: ", batch_size=4)
    assert len(vectors[()]) == len(texts) and len(codes) == len(repeated)
    expected = st_model.encode(repeated, prompt="q: ", batch_size=4)
    np.testing.assert_allclose(vectors[()][codes], expected, atol=2e-5)
    for blocks in sets:
        pruned = prune(st_model, blocks).encode(repeated, prompt="q: ", batch_size=4)
        np.testing.assert_allclose(vectors[tuple(blocks)][codes], pruned, atol=2e-5, err_msg=str(blocks))
        assert not np.allclose(pruned, expected, atol=1e-3)  # the variants do differ from the full model


@pytest.mark.parametrize(("kind", "template"), [("llama", "prompteol"), ("qwen2", "prompteol"),
                                              ("gemma3", None), ("bert", None)])  # fmt: skip
def test_every_plain_model_variant_equals_what_the_extractor_gives_its_pruned_copy(
    tiny_model_dir, texts, kind, template
):
    """A plain transformers model (a decoder in its template, pooled at its last real token; an
    encoder): each variant is the final embedding the extractor (so the scoring wrapper) gives the
    pruned copy, batch for batch the same, bit for bit."""
    from transformers import AutoModel

    from mteb_lrd.extraction.extractor import LayerExtractor
    from tests.tiny_models import load_tiny_tokenizer

    path = tiny_model_dir(kind, NUM_LAYERS)
    model, tokenizer = AutoModel.from_pretrained(str(path)).eval(), load_tiny_tokenizer(path)
    repeated = texts + texts[:3]
    sets = _sets() + DEEPER
    codes, vectors = encode_variants(
        model, repeated, sets, tokenizer=tokenizer, template=template, batch_size=4
    )

    def extracted(m):  # the distinct texts: the batches encode_variants forms
        extractor = LayerExtractor(m, tokenizer, template=template, batch_size=4, show_progress_bar=False)
        return extractor.extract(texts).embeddings

    np.testing.assert_array_equal(codes, [*range(len(texts)), 0, 1, 2])
    full = extracted(model)
    np.testing.assert_array_equal(vectors[()], full)
    for blocks in sets:
        pruned = extracted(prune(model, blocks))
        np.testing.assert_array_equal(vectors[tuple(blocks)], pruned, err_msg=str(blocks))
        assert not np.allclose(pruned, full, atol=1e-3)


def _block_calls(model, encode) -> list[int]:
    """How many times each block of ``model`` runs during ``encode()``."""
    from mteb_lrd.extraction.architectures import locate

    calls = [0] * NUM_LAYERS
    handles = [
        b.register_forward_hook(lambda *_a, i=i: calls.__setitem__(i, calls[i] + 1))
        for i, b in enumerate(locate(model).blocks)
    ]
    try:
        encode()
    finally:
        for handle in handles:
            handle.remove()
    return calls


def _assert_each_variant_ran_from_its_parent(calls: list[int]) -> None:
    # every 1- and 2-block set runs the blocks after its last removed one (its single-block prefix
    # holds the state there); (2, 3, 4) those after 4; (2, 6) and (1, 5) those after 2 and 1
    sets, starts = _sets() + DEEPER, [max(s) for s in _sets()] + [4, 2, 1]
    assert calls == [
        1 + sum(j > b and j not in s for s, b in zip(sets, starts, strict=True)) for j in range(NUM_LAYERS)
    ]
    from_first = [1 + sum(j > min(s) and j not in s for s in sets) for j in range(NUM_LAYERS)]
    assert sum(calls) < sum(from_first)  # resuming every set from its first removed block costs more


def test_each_variant_runs_only_its_blocks_after_its_last_removed_one(st_model, texts):
    calls = _block_calls(
        st_model, lambda: encode_variants(st_model, texts, _sets() + DEEPER, batch_size=len(texts))
    )
    _assert_each_variant_ran_from_its_parent(calls)  # one batch


def test_a_decoders_variants_run_only_their_blocks_after_their_last_removed_one(tiny_model_dir, texts):
    from transformers import AutoModel

    from tests.tiny_models import load_tiny_tokenizer

    path = tiny_model_dir("qwen2", NUM_LAYERS)
    model, tokenizer = AutoModel.from_pretrained(str(path)).eval(), load_tiny_tokenizer(path)
    calls = _block_calls(model, lambda: encode_variants(model, texts, _sets() + DEEPER, tokenizer=tokenizer,
                                                        template="prompteol", batch_size=len(texts)))  # fmt: skip
    _assert_each_variant_ran_from_its_parent(calls)


def test_resumed_from_restores_the_model(st_model, texts):
    before = st_model.encode(texts)
    import torch

    state = torch.zeros(1, 3, st_model.get_embedding_dimension())
    with pytest.raises(RuntimeError), resumed_from(st_model, state, [3]):
        raise RuntimeError("inside")
    np.testing.assert_array_equal(st_model.encode(texts), before)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"texts": []}, "texts is empty"),
        ({"batch_size": 0}, "batch_size must be a positive integer"),
        ({"block_sets": [[NUM_LAYERS]]}, "out of range"),
        ({"block_sets": [[5, 6]]}, "removes every block after 5"),
        ({"block_sets": [[2, 2]]}, "more than once"),
    ],
)
def test_bad_input_is_named(st_model, texts, kwargs, message):
    args = {"texts": texts, "block_sets": [[2]], **kwargs}
    with pytest.raises(ValueError, match=message):
        encode_variants(st_model, args.pop("texts"), args.pop("block_sets"), **args)


def _main_score(encoder, task):
    import mteb

    run = mteb.evaluate(encoder, [task], cache=None, co2_tracker=False, show_progress_bar=False)
    return run.task_results[0].scores["test"][0]["main_score"]


def test_mteb_scores_equal_those_of_pruned_copies_and_encode_once(st_model, tmp_path):
    from mteb.models import SentenceTransformerEncoderWrapper

    from mteb_lrd.studies.pruned_variants import PrunedVariants
    from tests.mteb_helpers import sts_task

    task = sts_task()
    variants = PrunedVariants(st_model, _sets(), tmp_path / "vectors", batch_size=4)
    forwards = []
    handle = (
        st_model[0].auto_model.get_input_embeddings().register_forward_hook(lambda *_: forwards.append(1))
    )
    try:
        scores = {tuple(b): _main_score(variants.encoder(b), task) for b in [[], *_sets()]}
    finally:
        handle.remove()
    # the second column holds the first's 16 sentences: one encoding by the full model and each variant
    assert len(forwards) == 4 * (1 + len(_sets()))
    assert scores[()] == pytest.approx(
        _main_score(SentenceTransformerEncoderWrapper(st_model), task), abs=1e-6
    )
    for blocks in ([2], [3, 4]):
        copy = SentenceTransformerEncoderWrapper(prune(st_model, blocks))
        assert scores[tuple(blocks)] == pytest.approx(_main_score(copy, task), abs=1e-6)
    # a resumed study reads the kept vectors; a folder left without its codes is encoded again
    handle = (
        st_model[0].auto_model.get_input_embeddings().register_forward_hook(lambda *_: forwards.append(1))
    )
    try:
        forwards.clear()
        again = PrunedVariants(st_model, [[2, 4], [3]], tmp_path / "vectors", batch_size=4)  # what is left
        assert _main_score(again.encoder([2, 4]), task) == scores[(2, 4)] and not forwards
        for path in (tmp_path / "vectors").glob("*/without-3.npy"):
            path.unlink()  # as if the run had stopped before it was moved in
        assert (
            _main_score(again.encoder([2, 4]), task) == scores[(2, 4)] and len(forwards) == 4 * 2
        )  # full model + [3]
        assert _main_score(again.encoder([3]), task) == scores[(3,)]
    finally:
        handle.remove()
    with pytest.raises(ValueError, match="not among"):
        variants.encoder([5])
    variants.clear()
    assert not (tmp_path / "vectors").exists()


def test_each_variant_is_stored_as_its_pruned_copy_would_be(st_model, tmp_path):
    """A variant's results go where a pruned copy's go (an experiment of the base model), never over
    the full model's; its meta counts its own parameters."""
    from mteb.cache import ResultCache
    from mteb.models import SentenceTransformerEncoderWrapper

    from mteb_lrd.adapter.experiments import pruned_meta
    from mteb_lrd.studies.pruned_variants import PrunedVariants

    variants = PrunedVariants(st_model, _sets(), tmp_path / "vectors", batch_size=4)
    cache = ResultCache(tmp_path / "results")
    full = variants.encoder([]).mteb_model_meta
    assert full == SentenceTransformerEncoderWrapper(st_model).mteb_model_meta
    paths = {cache.get_task_result_path("T", full)}
    for blocks in ([2], [3, 4]):
        ours = variants.encoder(blocks).mteb_model_meta
        copy = pruned_meta(full, prune(st_model, blocks))  # how mteb-lrd names a pruned model
        assert (ours.name, ours.revision) == (full.name, full.revision)
        assert (ours.experiment_kwargs, ours.n_parameters) == (copy.experiment_kwargs, copy.n_parameters)
        assert ours.experiment_kwargs == {"removed_blocks": blocks, "num_blocks": NUM_LAYERS}
        paths.add(cache.get_task_result_path("T", ours))
    assert len(paths) == 3


def test_a_variant_of_a_rule_pruned_model_is_named_as_its_pruned_copy(st_model, tmp_path):
    """Pruning a rule-pruned model further: the variant's blocks are not the rule's choice, so its
    experiment names the removed blocks in the base numbering and no rule or budget."""
    from mteb.models import SentenceTransformerEncoderWrapper

    import mteb_lrd
    from mteb_lrd.studies.pruned_variants import PrunedVariants

    ruled = mteb_lrd.prune(st_model, [1], rule="nrs", budget=0.2)  # the public prune names experiments
    assert SentenceTransformerEncoderWrapper(ruled).mteb_model_meta.experiment_kwargs["rule"] == "nrs"
    ours = PrunedVariants(ruled, [[2]], tmp_path / "vectors", batch_size=4).encoder([2]).mteb_model_meta
    copy = SentenceTransformerEncoderWrapper(mteb_lrd.prune(ruled, [2])).mteb_model_meta
    assert (
        ours.experiment_kwargs
        == copy.experiment_kwargs
        == {"removed_blocks": [1, 3], "num_blocks": NUM_LAYERS}
    )
    assert ours.n_parameters == copy.n_parameters


def test_variants_use_the_prompt_a_plain_run_uses(tmp_path):
    """EmbeddingGemma-style task-type prompts: each variant's texts get the STS prompt, as in a plain run."""
    from mteb.models import SentenceTransformerEncoderWrapper

    from mteb_lrd.studies.pruned_variants import PrunedVariants
    from tests.mteb_helpers import sts_task

    folder = build_tiny_sentence_transformer(tmp_path / "st", num_layers=NUM_LAYERS)
    model = SentenceTransformer(str(folder), device="cpu", prompts={"STS": "alpha beta ", "query": "gamma "})
    task = sts_task()
    variants = PrunedVariants(model, [[3]], tmp_path / "vectors")
    ours = _main_score(variants.encoder([3]), task)
    assert ours == pytest.approx(
        _main_score(SentenceTransformerEncoderWrapper(prune(model, [3])), task), abs=1e-6
    )
    plain = SentenceTransformer(str(folder), device="cpu")  # no prompts: a different score
    assert ours != pytest.approx(
        _main_score(PrunedVariants(plain, [[3]], tmp_path / "v2").encoder([3]), task), abs=1e-4
    )


def test_the_expected_texts_are_encoded_together_in_resumable_chunks(st_model, texts, tmp_path, monkeypatch):
    """Both columns' texts in one encoding (each distinct text once), chunk by chunk: an encoding
    interrupted after two chunks recomputes only the others."""
    from mteb_lrd.studies import pruned_variants
    from mteb_lrd.studies.pruned_variants import PrunedVariants

    one, two = texts[:10], texts[6:]  # 16 distinct texts, 4 in both
    calls = []
    original = pruned_variants.encode_variants

    def failing_third(model, part, *args, **kwargs):
        calls.append(len(part))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return original(model, part, *args, **kwargs)

    monkeypatch.setattr(pruned_variants, "encode_variants", failing_third)
    variants = PrunedVariants(st_model, [[3]], tmp_path / "v", batch_size=4, texts=one + two, chunk_texts=5)
    with pytest.raises(KeyboardInterrupt):
        variants.vectors((3,), one, None)
    calls.clear()
    monkeypatch.setattr(
        pruned_variants, "encode_variants", lambda *a, **k: calls.append(len(a[1])) or original(*a, **k)
    )
    first = variants.vectors((3,), one, None)
    assert calls == [5, 1]  # chunks 3 and 4 of 16 texts (5, 5, 5, 1); the first two were kept
    calls.clear()
    second = variants.vectors((3,), two, None)
    assert not calls  # the second column came with the first
    pruned = prune(st_model, [3])
    np.testing.assert_allclose(first, pruned.encode(one), atol=2e-5)
    np.testing.assert_allclose(second, pruned.encode(two), atol=2e-5)
    assert not list((tmp_path / "v").rglob("chunks/*/*.npz"))  # chunks go once the files are whole


def test_a_plain_models_variants_need_the_encoder_that_scores_the_full_model(tiny_model_dir, tmp_path):
    from transformers import AutoModel

    from mteb_lrd.studies.pruned_variants import PrunedVariants

    model = AutoModel.from_pretrained(str(tiny_model_dir("qwen2", NUM_LAYERS)))
    with pytest.raises(ValueError, match="needs full_encoder"):
        PrunedVariants(model, [[2]], tmp_path / "vectors")


def test_embedding_pass_is_for_plain_models(st_model):
    from mteb_lrd.extraction.extractor import LayerExtractor

    with pytest.raises(TypeError, match="plain transformers models"):
        LayerExtractor(st_model, show_progress_bar=False).embedding_pass(["a text"])
