"""Where translations come from: parallel data on disk, or a seq2seq translator with a disk cache.

Both implement :class:`TranslationSource`: ``translate(texts, source, target) -> list[str]``.
A text in its own language is returned as is (no translation to itself).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from mteb_lrd.dysem.languages import LANGUAGES, STSB_MULTI_LANGUAGES, normalize_language
from mteb_lrd.dysem.representation_store import text_key
from mteb_lrd.io import atomic_write_json, read_jsonl

__all__ = [
    "TranslationSource",
    "MissingTranslationError",
    "ParallelCorpus",
    "FallbackTranslations",
    "Seq2SeqTranslator",
]


class MissingTranslationError(LookupError):
    """Some texts have no translation in the requested language."""


@runtime_checkable
class TranslationSource(Protocol):
    """Anything that translates a list of texts from one language into another."""

    identity: str

    def translate(self, texts: Sequence[str], source: str, target: str) -> list[str]:
        """Translations of ``texts`` (in ``source``) into ``target``, one per text."""
        ...


class ParallelCorpus:
    """Translations looked up in parallel data: the same rows in several languages.

    Args:
        rows: ``{language: [text, ...]}``, every list aligned row by row.
        name: a label for the source (part of :attr:`identity`).
    """

    def __init__(self, rows: Mapping[str, Sequence[str]], name: str = "parallel") -> None:
        if not rows:
            raise ValueError("a parallel corpus needs at least one language")
        codes = {normalize_language(lang): list(texts) for lang, texts in rows.items()}
        lengths = {code: len(texts) for code, texts in codes.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(
                f"parallel texts must be aligned (same number of rows per language), got {lengths}"
            )
        self.rows = codes
        self.languages = tuple(codes)
        # first occurrence wins for a text that appears in several rows
        self._index: dict[str, dict[str, int]] = {code: {} for code in codes}
        for code, texts in codes.items():
            for i, text in enumerate(texts):
                self._index[code].setdefault(text.strip(), i)
        self.identity = f"{name}:{text_key(*[t for code in sorted(codes) for t in codes[code]])[:16]}"

    @classmethod
    def from_sts_multi(
        cls,
        folder: str | os.PathLike[str],
        languages: Iterable[str] = STSB_MULTI_LANGUAGES,
        splits: Iterable[str] = ("dev", "test"),
    ) -> ParallelCorpus:
        """The shared ``STSBenchmark-multi/<lang>/<split>.jsonl`` files (line-aligned across languages).

        Raises:
            FileNotFoundError: naming the first missing file.
        """
        folder = Path(folder)
        rows: dict[str, list[str]] = {}
        for lang in languages:
            code = normalize_language(lang)
            texts: list[str] = []
            for split in splits:
                path = folder / code / f"{split}.jsonl"
                if not path.is_file():
                    raise FileNotFoundError(f"parallel STS file not found: {path}")
                for row in read_jsonl(path):
                    texts.extend((row["sentence1"], row["sentence2"]))
            rows[code] = texts
        return cls(rows, name=f"sts-multi:{folder.name}")

    def translate(self, texts: Sequence[str], source: str, target: str) -> list[str]:
        """Look every text up in ``source`` and return its row in ``target``.

        Raises:
            MissingTranslationError: when a language is not in the corpus or texts are not found.
        """
        source, target = normalize_language(source), normalize_language(target)
        if source == target:
            return [str(t) for t in texts]
        for code in (source, target):
            if code not in self.rows:
                raise MissingTranslationError(
                    f"language {code!r} is not in this parallel corpus {self.languages}"
                )
        index = self._index[source]
        positions = [index.get(str(t).strip()) for t in texts]
        missing = [t for t, p in zip(texts, positions, strict=True) if p is None]
        if missing:
            raise MissingTranslationError(
                f"{len(missing)} of {len(texts)} {source!r} texts are not in the parallel corpus "
                f"(first: {missing[0]!r}); use a translator model or restrict DySem to the source language"
            )
        return [self.rows[target][p] for p in positions]  # type: ignore[index]

    def covers(self, texts: Sequence[str], source: str) -> bool:
        """Whether every text is in the corpus as a ``source``-language row."""
        source = normalize_language(source)
        index = self._index.get(source)
        return index is not None and all(str(t).strip() in index for t in texts)


class FallbackTranslations:
    """Ask each source in turn; the next one is used for a request the previous could not serve.

    Args:
        sources: translation sources in order of preference (e.g. parallel data, then a model).
    """

    def __init__(self, sources: Sequence[TranslationSource]) -> None:
        if not sources:
            raise ValueError("FallbackTranslations needs at least one translation source")
        self.sources = list(sources)
        self.identity = "+".join(source.identity for source in self.sources)

    def translate(self, texts: Sequence[str], source: str, target: str) -> list[str]:
        """The first source's complete answer; raises the last error when none can answer."""
        error: MissingTranslationError | None = None
        for candidate in self.sources:
            try:
                return candidate.translate(texts, source, target)
            except MissingTranslationError as exc:
                error = exc
        raise error  # type: ignore[misc]


class Seq2SeqTranslator:
    """An NLLB-style seq2seq translator (greedy decoding) with an on-disk cache keyed by content.

    Args:
        model: a transformers seq2seq model, or a path to one.
        tokenizer: its tokenizer (loaded from ``model`` when a path).
        cache_dir: folder of the JSON caches (one file per language pair, written atomically);
            ``None`` keeps translations in memory only.
        batch_size: texts per ``generate`` call.
        max_length: token limit of inputs and outputs (the reference: 256).
        device: torch device for the model.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any | None = None,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        batch_size: int = 8,
        max_length: int = 256,
        device: str | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
            raise ValueError(f"max_length must be a positive integer, got {max_length!r}")
        if isinstance(model, (str, os.PathLike)):
            from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

            tokenizer = tokenizer or AutoTokenizer.from_pretrained(str(model))
            model = AutoModelForSeq2SeqLM.from_pretrained(str(model))
        if tokenizer is None:
            raise ValueError("a tokenizer is required when the translator model is given as an object")
        self.model = model.eval() if hasattr(model, "eval") else model
        if device is not None:
            self.model = self.model.to(device)
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_length = max_length
        from mteb_lrd.extraction.identity import tokenizer_digest, weights_digest

        name = getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
        # the weights and the tokenizer, not only the name: a fine-tuned copy in the same folder, or
        # another model object of the same class, must not be served these translations
        self.identity = f"seq2seq:{name}:{max_length}:{weights_digest(model)}:{tokenizer_digest(tokenizer)}"
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._caches: dict[tuple[str, str], dict[str, str]] = {}
        self.generated_texts = 0

    def _cache_path(self, source: str, target: str) -> Path | None:
        if self.cache_dir is None:
            return None
        return self.cache_dir / f"{text_key(self.identity)[:16]}-{source}-{target}.json"

    def _cache(self, source: str, target: str) -> dict[str, str]:
        key = (source, target)
        if key not in self._caches:
            path = self._cache_path(source, target)
            data: dict[str, str] = {}
            if path is not None and path.is_file():
                try:
                    data = json.loads(path.read_text(encoding="utf-8"))
                    if not isinstance(data, dict):
                        raise ValueError("not a JSON object")
                except ValueError:
                    data = {}  # a corrupt cache is rebuilt, never used
            self._caches[key] = data
        return self._caches[key]

    def _save(self, source: str, target: str) -> None:
        path = self._cache_path(source, target)
        if path is None:
            return
        atomic_write_json(path, self._caches[(source, target)], indent=None)

    def _generate(self, texts: list[str], source: str, target: str) -> list[str]:
        import torch

        if hasattr(self.tokenizer, "src_lang"):
            self.tokenizer.src_lang = LANGUAGES[source].nllb
        inputs = self.tokenizer(
            texts, return_tensors="pt", padding=True, truncation=True, max_length=self.max_length
        ).to(self.model.device)
        forced_bos = self.tokenizer.convert_tokens_to_ids(LANGUAGES[target].nllb)
        with torch.inference_mode():
            generated = self.model.generate(
                **inputs,
                forced_bos_token_id=forced_bos,
                max_length=self.max_length,
                num_beams=1,
                do_sample=False,
            )
        return self.tokenizer.batch_decode(generated, skip_special_tokens=True)

    def translate(self, texts: Sequence[str], source: str, target: str) -> list[str]:
        """Translate, reading and filling the cache; each unique uncached text is generated once."""
        source, target = normalize_language(source), normalize_language(target)
        texts = [str(t) for t in texts]
        if source == target:
            return texts
        cache = self._cache(source, target)
        todo = [t for t in dict.fromkeys(texts) if text_key(t) not in cache]
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start : start + self.batch_size]
            for text, translated in zip(chunk, self._generate(chunk, source, target), strict=True):
                cache[text_key(text)] = translated
            self.generated_texts += len(chunk)
            self._save(source, target)  # after every batch: an interrupted run keeps what it did
        return [cache[text_key(t)] for t in texts]
