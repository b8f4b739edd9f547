"""PromptEOL prompts and the reference's sentence normalisation; language codes."""

from __future__ import annotations

import pytest

from mteb_lrd.dysem.languages import LANGUAGES, language_of_task, normalize_language
from mteb_lrd.dysem.prompts import LANGUAGE_TEMPLATES, apply_prompt, normalize_sentence, prompt_template


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  A cat sits  ", "A cat sits."),
        ("Is it raining?", "Is it raining."),
        ('He said "hi"', "He said 'hi'"),  # ends with a quote: no full stop added
        ("Done.", "Done."),
        ("", ""),
        ("What?!", "What?!."),
    ],
)
def test_normalize_sentence(raw, expected):
    assert normalize_sentence(raw) == expected


def test_english_prompt_matches_the_reference():
    assert apply_prompt(["a cat"], "EP") == ['This sentence : "a cat." means in one word:"']


def test_language_prompts_cover_the_reference_languages_and_the_parallel_data():
    for code in ("en", "zh", "fr", "de", "es", "ru", "ar", "ja", "ko", "it", "pt", "hi", "nl", "pl"):
        assert "<S>" in LANGUAGE_TEMPLATES[code]
    assert apply_prompt(["Ein Hund"], "LP", "deu_Latn") == [
        'Dieser Satz : "Ein Hund." bedeutet in einem Wort :"'
    ]
    assert apply_prompt(["猫"], "LP", "zh") == ["这句话：“猫.”用一个词来表达就是：“"]


def test_none_prompt_keeps_the_text():
    assert apply_prompt([" raw text "], "none") == [" raw text "]


def test_bad_prompt_kind_and_language():
    with pytest.raises(ValueError, match="prompt kind"):
        prompt_template("XP")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown language"):
        prompt_template("LP", "tlh")


@pytest.mark.parametrize("spelling", ["de", "DE", "deu_Latn", "deu-Latn", "deu"])
def test_language_spellings(spelling):
    assert normalize_language(spelling) == "de"


def test_language_of_task():
    assert language_of_task(["eng-Latn"], "default") == "en"
    assert language_of_task({"de": ["deu-Latn"], "zh": ["cmn-Hans"]}, "zh") == "zh"
    assert language_of_task(["xxx-Latn"], "default") == "en"
    assert set(LANGUAGES) >= {"en", "de", "nl", "pl"}
