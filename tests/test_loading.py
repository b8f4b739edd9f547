"""The one model loader: which class each kind of folder and head gives."""

from __future__ import annotations

import pytest

from mteb_lrd.extraction.loading import load_pretrained


def test_each_folder_and_head_loads_the_right_class(tiny_model_dir, tiny_st_dir):
    from sentence_transformers import SentenceTransformer

    st, tokenizer = load_pretrained(str(tiny_st_dir))
    assert isinstance(st, SentenceTransformer) and tokenizer is None
    llama, tokenizer = load_pretrained(str(tiny_model_dir("llama")), head="auto")
    assert type(llama).__name__ == "LlamaForCausalLM" and tokenizer is not None
    assert type(load_pretrained(str(tiny_model_dir("llama")), head="base")[0]).__name__ == "LlamaModel"
    assert type(load_pretrained(str(tiny_model_dir("bert")), head="auto")[0]).__name__ == "BertModel"
    bert, _ = load_pretrained(str(tiny_model_dir("bert")), dtype="float16")
    assert (
        next(bert.parameters()).dtype.is_floating_point
        and str(next(bert.parameters()).dtype) == "torch.float16"
    )


def test_bad_input_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match="head must be"):
        load_pretrained(str(tmp_path), head="seq2seq")
    with pytest.raises(FileNotFoundError, match="no such folder"):
        load_pretrained(str(tmp_path / "missing"))
    with pytest.raises(OSError, match="a folder without a loadable model"):
        load_pretrained(str(tmp_path))


def test_an_unreachable_hub_reads_the_local_cache_only_and_says_so(monkeypatch):
    # Without HF_HUB_OFFLINE and without an answer from the Hub, a load by id asks for local files
    # only (no half minute of retries) and the error says why.
    import transformers

    from mteb_lrd.extraction import loading

    asked: list[dict] = []

    def from_pretrained(name, **options):
        asked.append(options)
        raise OSError(f"{name} is not in the cache")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(loading, "hub_reachable", lambda: False)
    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", from_pretrained)
    with pytest.raises(
        OSError, match="unreachable from here and the id is not in the Hugging Face cache"
    ) as err:
        load_pretrained("org/not-a-model")
    assert asked and asked[0]["local_files_only"] is True
    assert "Errno None" not in str(err.value)
    monkeypatch.setattr(loading, "hub_reachable", lambda: True)  # reachable: the ordinary load
    with pytest.raises(OSError, match="could be loaded from huggingface.co; pass"):
        load_pretrained("org/not-a-model")
    assert "local_files_only" not in asked[-1]
