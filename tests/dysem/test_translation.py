"""Translation sources: parallel data look-ups and the seq2seq translator's on-disk cache."""

from __future__ import annotations

import json

import pytest
import torch

from mteb_lrd.dysem.translation import (
    FallbackTranslations,
    MissingTranslationError,
    ParallelCorpus,
    Seq2SeqTranslator,
)


def test_parallel_corpus_looks_rows_up_in_any_language():
    corpus = ParallelCorpus(
        {"en": ["a cat", "a dog"], "de": ["eine Katze", "ein Hund"], "fr": ["un chat", "un chien"]}
    )
    assert corpus.translate(["a dog", " a cat "], "en", "deu_Latn") == ["ein Hund", "eine Katze"]
    assert corpus.translate(["un chien"], "fr", "en") == ["a dog"]
    assert corpus.translate(["anything"], "en", "en") == ["anything"]  # no translation to itself
    assert corpus.covers(["a cat"], "en") and not corpus.covers(["a bird"], "en")
    with pytest.raises(MissingTranslationError, match="1 of 2"):
        corpus.translate(["a cat", "a bird"], "en", "de")
    with pytest.raises(MissingTranslationError, match="not in this parallel corpus"):
        corpus.translate(["a cat"], "en", "zh")


def test_parallel_corpus_rejects_unaligned_rows():
    with pytest.raises(ValueError, match="aligned"):
        ParallelCorpus({"en": ["a", "b"], "de": ["x"]})


def test_shared_sts_multi_is_line_aligned(shared_sts):
    corpus = ParallelCorpus.from_sts_multi(
        shared_sts / "STSBenchmark-multi", languages=["en", "de"], splits=["dev"]
    )
    first = json.loads(
        (shared_sts / "STSBenchmark-multi" / "de" / "dev.jsonl").open(encoding="utf-8").readline()
    )
    en = json.loads(
        (shared_sts / "STSBenchmark-multi" / "en" / "dev.jsonl").open(encoding="utf-8").readline()
    )
    assert corpus.translate([en["sentence2"]], "en", "de") == [first["sentence2"]]


class FakeTokenizer:
    src_lang = None

    def __call__(self, texts, **kwargs):
        class Batch(dict):
            def to(self, device):
                return self

        return Batch(input_ids=torch.tensor([[len(t)] for t in texts]))

    def convert_tokens_to_ids(self, token):
        return 7

    def get_vocab(self):
        return {"<s>": 0, "a": 1}

    def __len__(self):
        return 2

    def batch_decode(self, generated, skip_special_tokens=True):
        return [f"T{int(row[0])}" for row in generated]


class FakeSeq2Seq(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.anchor = torch.nn.Parameter(torch.zeros(1))

    @property
    def device(self):
        return self.anchor.device

    def generate(self, input_ids, forced_bos_token_id, max_length, num_beams, do_sample):
        assert forced_bos_token_id == 7 and num_beams == 1 and not do_sample  # greedy, target language forced
        self.calls += 1
        return input_ids


def test_translator_caches_on_disk_by_content(tmp_path):
    model = FakeSeq2Seq()
    translator = Seq2SeqTranslator(model, FakeTokenizer(), cache_dir=tmp_path, batch_size=2)
    assert translator.translate(["ab", "abc", "ab", "abcd"], "en", "de") == ["T2", "T3", "T2", "T4"]
    assert translator.generated_texts == 3 and model.calls == 2
    files = list(tmp_path.glob("*-en-de.json"))
    assert len(files) == 1 and not list(tmp_path.glob(".tmp-*"))
    again = Seq2SeqTranslator(model, FakeTokenizer(), cache_dir=tmp_path)
    assert again.translate(["abc", "ab"], "en", "de") == ["T3", "T2"]
    assert again.generated_texts == 0
    assert again.translate(["x"], "de", "de") == ["x"]


def test_another_translator_of_the_same_name_misses_the_cache(tmp_path):
    """Same class and config name (a fine-tuned copy in the same folder, say), other weights."""
    Seq2SeqTranslator(FakeSeq2Seq(), FakeTokenizer(), cache_dir=tmp_path).translate(["ab"], "en", "fr")
    tuned = FakeSeq2Seq()
    with torch.no_grad():
        tuned.anchor.fill_(1.0)
    other = Seq2SeqTranslator(tuned, FakeTokenizer(), cache_dir=tmp_path)
    assert other.translate(["ab"], "en", "fr") == ["T2"] and other.generated_texts == 1
    same = Seq2SeqTranslator(FakeSeq2Seq(), FakeTokenizer(), cache_dir=tmp_path)
    assert same.translate(["ab"], "en", "fr") == ["T2"] and same.generated_texts == 0


def test_corrupt_translation_cache_is_rebuilt(tmp_path):
    model = FakeSeq2Seq()
    Seq2SeqTranslator(model, FakeTokenizer(), cache_dir=tmp_path).translate(["ab"], "en", "fr")
    next(tmp_path.glob("*-en-fr.json")).write_text("{broken", encoding="utf-8")
    fresh = Seq2SeqTranslator(model, FakeTokenizer(), cache_dir=tmp_path)
    assert fresh.translate(["ab"], "en", "fr") == ["T2"] and fresh.generated_texts == 1


def test_fallback_uses_the_next_source_only_when_needed():
    corpus = ParallelCorpus({"en": ["a cat"], "de": ["eine Katze"]})
    model = FakeSeq2Seq()
    chain = FallbackTranslations([corpus, Seq2SeqTranslator(model, FakeTokenizer())])
    assert chain.translate(["a cat"], "en", "de") == ["eine Katze"] and model.calls == 0
    assert chain.translate(["a bird"], "en", "de") == ["T6"] and model.calls == 1
