"""PromptEOL prompts: the English one ("EP") and the language-specific ones ("LP").

The pooled token is the prompt's final quote; the sentence is normalised first, as in the
reference (strip, terminal full stop, double quotes turned into single quotes, a final question
mark turned into a full stop) so the closing quote of the template stays unambiguous.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from mteb_lrd.dysem.languages import normalize_language
from mteb_lrd.extraction.templates import TEMPLATES, TEXT_SLOT

__all__ = [
    "PromptKind",
    "PROMPT_KINDS",
    "ENGLISH_TEMPLATE",
    "LANGUAGE_TEMPLATES",
    "SENTENCE_SLOT",
    "normalize_sentence",
    "prompt_template",
    "apply_prompt",
]

PromptKind = Literal["EP", "LP", "none"]
PROMPT_KINDS: tuple[str, ...] = ("EP", "LP", "none")

SENTENCE_SLOT = "<S>"

ENGLISH_TEMPLATE = TEMPLATES["prompteol"].replace(TEXT_SLOT, SENTENCE_SLOT)
"""``This sentence : "<S>" means in one word:"`` (the studies' ``prompteol`` text template)."""

LANGUAGE_TEMPLATES: dict[str, str] = {
    "en": ENGLISH_TEMPLATE,
    "zh": "这句话：“<S>”用一个词来表达就是：“",
    "fr": 'Cette phrase : "<S>" signifie en un mot :"',
    "de": 'Dieser Satz : "<S>" bedeutet in einem Wort :"',
    "es": 'Esta oración : "<S>" significa en una palabra :"',
    "ru": 'Это предложение : "<S>" означает одним словом :"',
    "ar": 'هذه الجملة : "<S>" تعني بكلمة واحدة :"',
    "ja": "この文 : 「<S>」を一言で表すと :「",
    "ko": '이 문장 : "<S>"을 한 단어로 표현하면 :"',
    "it": 'Questa frase : "<S>" significa in una parola :"',
    "pt": 'Esta frase : "<S>" significa em uma palavra :"',
    "hi": 'यह वाक्य : "<S>" का एक शब्द में अर्थ है :"',
    # Not in the reference (its candidates have no Dutch or Polish); ours, for the parallel STS data.
    "nl": 'Deze zin : "<S>" betekent in één woord :"',
    "pl": 'To zdanie : "<S>" oznacza jednym słowem :"',
}


def normalize_sentence(sentence: str) -> str:
    """Normalise a sentence before it goes into a PromptEOL template (the reference's rules)."""
    text = str(sentence).strip()
    if text and text[-1] not in ".?\"'":
        text += "."
    text = text.replace('"', "'")
    if text.endswith("?"):
        text = text[:-1] + "."
    return text


def prompt_template(kind: PromptKind, language: str = "en") -> str:
    """The template of prompt ``kind`` for a text in ``language`` (``<S>`` marks the sentence).

    Args:
        kind: ``"EP"`` (English PromptEOL whatever the language), ``"LP"`` (PromptEOL in the
            text's language) or ``"none"`` (the bare text, for the mean-pooling baseline).
        language: the text's language (any spelling :func:`normalize_language` accepts).

    Raises:
        ValueError: for an unknown kind, or an LP prompt for a language without a template.
    """
    if kind == "EP":
        return ENGLISH_TEMPLATE
    if kind == "none":
        return SENTENCE_SLOT
    if kind == "LP":
        code = normalize_language(language)
        if code not in LANGUAGE_TEMPLATES:
            raise ValueError(
                f"no language-specific prompt for {code!r}; available: {sorted(LANGUAGE_TEMPLATES)}"
            )
        return LANGUAGE_TEMPLATES[code]
    raise ValueError(f"prompt kind must be one of {PROMPT_KINDS}, got {kind!r}")


def apply_prompt(texts: Sequence[str], kind: PromptKind, language: str = "en") -> list[str]:
    """Put every text into the prompt (``kind="none"`` returns the texts unchanged)."""
    template = prompt_template(kind, language)
    if kind == "none":
        return [str(text) for text in texts]
    return [template.replace(SENTENCE_SLOT, normalize_sentence(text)).strip() for text in texts]
