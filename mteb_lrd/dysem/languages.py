"""Language codes DySem understands: short ISO 639-1 codes, NLLB codes and MTEB's ISO 639-3 forms.

Every public function takes any of the three spellings and works on the short code internally,
because the parallel STS data is organised by short codes (``en``, ``de`` ...), NLLB translators
need ``deu_Latn`` and MTEB tasks say ``deu-Latn``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "Language",
    "LANGUAGES",
    "STSB_MULTI_LANGUAGES",
    "normalize_language",
    "language_of_task",
]


@dataclass(frozen=True)
class Language:
    """One language.

    Attributes:
        code: short ISO 639-1 code, the key used everywhere in this package.
        nllb: the NLLB-200 code (what a translator's ``forced_bos_token`` is called).
        mteb: the ISO 639-3 + script code MTEB tasks use in ``eval_langs``.
        name: English name, for messages and tables.
    """

    code: str
    nllb: str
    mteb: str
    name: str


LANGUAGES: dict[str, Language] = {
    lang.code: lang
    for lang in (
        Language("en", "eng_Latn", "eng-Latn", "English"),
        Language("zh", "zho_Hans", "cmn-Hans", "Chinese (Simplified)"),
        Language("fr", "fra_Latn", "fra-Latn", "French"),
        Language("de", "deu_Latn", "deu-Latn", "German"),
        Language("es", "spa_Latn", "spa-Latn", "Spanish"),
        Language("ru", "rus_Cyrl", "rus-Cyrl", "Russian"),
        Language("ar", "arb_Arab", "arb-Arab", "Arabic"),
        Language("ja", "jpn_Jpan", "jpn-Jpan", "Japanese"),
        Language("ko", "kor_Hang", "kor-Hang", "Korean"),
        Language("it", "ita_Latn", "ita-Latn", "Italian"),
        Language("pt", "por_Latn", "por-Latn", "Portuguese"),
        Language("hi", "hin_Deva", "hin-Deva", "Hindi"),
        Language("nl", "nld_Latn", "nld-Latn", "Dutch"),
        Language("pl", "pol_Latn", "pol-Latn", "Polish"),
    )
}

# The languages of the shared parallel STS Benchmark copy (``STSBenchmark-multi/<code>``).
STSB_MULTI_LANGUAGES: tuple[str, ...] = ("en", "de", "es", "fr", "it", "ja", "nl", "pl", "pt", "ru", "zh")

_ALIASES: dict[str, str] = {}
for _lang in LANGUAGES.values():
    for _spelling in (_lang.code, _lang.nllb, _lang.mteb, _lang.mteb.split("-")[0], _lang.nllb.split("_")[0]):
        _ALIASES[_spelling.lower()] = _lang.code
_ALIASES["zho-hans"] = "zh"  # MTEB spells Mandarin "cmn"; NLLB "zho": accept both with either separator
_ALIASES["cmn_hans"] = "zh"


def normalize_language(language: str) -> str:
    """Return the short code of ``language`` given as ``de``, ``deu_Latn``, ``deu-Latn`` or ``deu``.

    Raises:
        ValueError: naming the unknown code and the supported ones.
    """
    if not isinstance(language, str):
        raise ValueError(f"a language code must be a string, got {type(language).__name__}")
    code = _ALIASES.get(language.strip().lower())
    if code is None:
        supported = ", ".join(sorted(LANGUAGES))
        raise ValueError(
            f"unknown language {language!r}; supported (short, NLLB or MTEB spellings of): {supported}"
        )
    return code


def language_of_task(eval_langs: Sequence[str] | Mapping[str, Sequence[str]], hf_subset: str) -> str:
    """The source language of an MTEB task subset (``"en"`` when it cannot be told).

    Args:
        eval_langs: ``TaskMetadata.eval_langs`` (a list, or a dict subset -> list).
        hf_subset: the subset being evaluated (``"default"`` for monolingual tasks).
    """
    langs = eval_langs.get(hf_subset, []) if isinstance(eval_langs, dict) else eval_langs
    for spelling in [hf_subset, *(langs or [])]:
        try:
            return normalize_language(str(spelling))
        except ValueError:
            continue
    return "en"
