"""DySem and its three baselines as MTEB encoders.

``DySemModel.encode`` returns, per text, its value vector and its consensus mask side by side
(``(N, 2d)``: ``[v(x), M(x) as 0/1]``); ``similarity_pairwise`` splits them again and computes the
dynamic similarity, which MTEB's STS evaluator records as ``pearson`` / ``spearman`` (the model's
own similarity). The ``cosine_*`` keys MTEB computes on that packed layout mean nothing for
DySem: wrap tasks with :func:`mteb_lrd.dysem.tasks.model_similarity_task` to make the model's
similarity the main score and to record the mean joint-set size ("#Dim").

The baselines (mean pooling, PromptEOL, dense attention sum) return plain vectors scored by cosine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from mteb_lrd.dysem.consensus import consensus_mask, value_vectors
from mteb_lrd.dysem.languages import LANGUAGES, language_of_task, normalize_language
from mteb_lrd.dysem.prompts import PROMPT_KINDS, apply_prompt
from mteb_lrd.dysem.representation import Component, RepresentationExtractor
from mteb_lrd.dysem.representation_store import text_key
from mteb_lrd.dysem.similarity import dynamic_similarity, semantic_sets
from mteb_lrd.dysem.translation import TranslationSource

__all__ = [
    "DySemModel",
    "DenseBaseline",
    "mean_pooling_baseline",
    "prompteol_baseline",
    "attention_sum_baseline",
    "texts_of",
    "unpack",
]

# Pairs scored at once by ``similarity`` (the all-pairs form): bounds a chunk x N2 x d boolean union.
_MATRIX_ELEMENTS = 1 << 25


def texts_of(inputs: Any) -> list[str]:
    """The texts of an MTEB ``DataLoader`` (batches with a ``"text"`` column) or of a plain list."""
    if isinstance(inputs, (list, tuple)):
        return [str(t) for t in inputs]
    return [str(text) for batch in inputs for text in batch["text"]]


def unpack(embeddings: Any) -> tuple[np.ndarray, np.ndarray]:
    """Split DySem's packed ``(N, 2d)`` embeddings into value vectors and boolean masks."""
    array = np.asarray(embeddings.cpu() if hasattr(embeddings, "cpu") else embeddings, dtype=np.float32)
    if array.ndim == 1:
        array = array[None]
    if array.ndim != 2 or array.shape[1] % 2:
        raise ValueError(f"DySem embeddings have shape (N, 2d) [values, mask]; got {array.shape}")
    d = array.shape[1] // 2
    return array[:, :d], array[:, d:] > 0.5


def _cosine_pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return np.where(norms > 0, np.einsum("...d,...d->...", a, b) / np.where(norms > 0, norms, 1.0), 0.0)


def _model_meta(name: str, extractor: RepresentationExtractor, dim: int, experiment: dict[str, Any]) -> Any:
    from mteb.models.model_meta import ModelMeta

    base = str(getattr(extractor.model.config, "_name_or_path", "") or type(extractor.model).__name__)
    base = base.rstrip("/").split("/")[-1] or "model"
    return ModelMeta.create_empty(
        overwrites={
            "name": f"mteb-lrd/{name}__{base}",
            "revision": extractor.identity[:12],
            "embed_dim": dim,
            "framework": ["PyTorch"],
            "max_tokens": extractor.max_length,
            "n_parameters": sum(p.numel() for p in extractor.model.parameters()),
            "experiment_kwargs": experiment,
        }
    )


class _ExtractorEncoder(ABC):
    """Shared MTEB plumbing: texts from the DataLoader, the task's source language, the meta."""

    extractor: RepresentationExtractor
    last_similarity_stats: dict[str, float] | None = None

    def encode(
        self,
        inputs: Any,
        *,
        task_metadata: Any = None,
        hf_split: str = "test",
        hf_subset: str = "default",
        prompt_type: Any = None,
        **kwargs: Any,
    ) -> np.ndarray:
        """Encode an MTEB DataLoader (or a list of texts) for the task's source language.

        ``batch_size`` among the encode kwargs (MTEB always passes one) sets the texts per forward
        pass for this call.
        """
        eval_langs = getattr(task_metadata, "eval_langs", ["eng-Latn"])
        batch_size = kwargs.get("batch_size")
        if batch_size is not None and (
            isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
        ):
            raise ValueError(f"encode batch_size must be a positive integer, got {batch_size!r}")
        configured = self.extractor.batch_size
        self.extractor.batch_size = batch_size or configured
        try:
            return self.encode_texts(
                texts_of(inputs), source_language=language_of_task(eval_langs, hf_subset)
            )
        finally:
            self.extractor.batch_size = configured

    _meta: Any

    @abstractmethod
    def encode_texts(self, texts: Sequence[str], source_language: str = "en") -> np.ndarray:
        """Embeddings of ``texts`` written in ``source_language``."""

    @property
    def mteb_model_meta(self) -> Any:
        return self._meta


class DenseBaseline(_ExtractorEncoder):
    """A dense vector from the decoder, scored by cosine.

    Args:
        extractor: the decoder.
        component: which vector (see :class:`~mteb_lrd.dysem.representation.Component`).
        prompt: ``"EP"``, ``"LP"`` or ``"none"``.
        name: the model's short name in results (``"prompteol"``...).
    """

    def __init__(self, extractor: RepresentationExtractor, component: str, prompt: str, name: str) -> None:
        if prompt not in PROMPT_KINDS:
            raise ValueError(f"prompt must be one of {PROMPT_KINDS}, got {prompt!r}")
        self.extractor = extractor
        self.component = Component.parse(component)
        self.prompt = prompt
        self.name = name
        self._meta = _model_meta(
            name, extractor, extractor.hidden_size, {"component": self.component.key, "prompt": prompt}
        )

    def encode_texts(self, texts: Sequence[str], source_language: str = "en") -> np.ndarray:
        """``(N, d)`` vectors of ``texts`` written in ``source_language``."""
        prompted = apply_prompt(texts, self.prompt, source_language)  # type: ignore[arg-type]
        return self.extractor.extract(prompted, [self.component])[self.component.key]

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> np.ndarray:
        """Cosine of each pair; records the dimension count (``d``) as #Dim."""
        a, b = np.asarray(embeddings1, dtype=np.float32), np.asarray(embeddings2, dtype=np.float32)
        self.last_similarity_stats = {"mean_dimensions": float(a.shape[-1])}
        return _cosine_pairs(a, b)

    def similarity(self, embeddings1: Any, embeddings2: Any) -> np.ndarray:
        """All-pairs cosine matrix."""
        a, b = np.asarray(embeddings1, dtype=np.float64), np.asarray(embeddings2, dtype=np.float64)
        a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
        b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
        return a @ b.T


def mean_pooling_baseline(extractor: RepresentationExtractor) -> DenseBaseline:
    """Mean of the last hidden state over the tokens of the bare text."""
    return DenseBaseline(extractor, "mean", "none", "mean-pooling")


def prompteol_baseline(extractor: RepresentationExtractor) -> DenseBaseline:
    """PromptEOL: the last hidden state at the last token of the English prompt."""
    return DenseBaseline(extractor, "hidden", "EP", "prompteol")


def attention_sum_baseline(extractor: RepresentationExtractor, prompt: str = "EP") -> DenseBaseline:
    """The dense attention-sum vector (DySem's representation without dimension selection)."""
    return DenseBaseline(extractor, "attention", prompt, "attention-sum")


class DySemModel(_ExtractorEncoder):
    """DySem: cosine on the union of each pair's top-k multilingual-consensus dimensions.

    Args:
        extractor: the decoder.
        languages: the candidate languages in order of preference (e.g. from
            :func:`mteb_lrd.dysem.consensus.rank_languages`); the first ``num_languages`` are used.
        num_languages: ``L``; default all of ``languages``.
        k: semantic-set size per text.
        value: ``"source"`` (the original text's vector) or ``"mean"`` (mean over the languages).
        prompt: ``"EP"`` (English PromptEOL for every language) or ``"LP"`` (each language's own).
        component: the representation (default the attention sum).
        translations: where translations come from; needed when a selected language differs from
            a text's language.
    """

    def __init__(
        self,
        extractor: RepresentationExtractor,
        *,
        languages: Sequence[str] = ("en",),
        num_languages: int | None = None,
        k: int = 1024,
        value: str = "source",
        prompt: str = "EP",
        component: str = "attention",
        translations: TranslationSource | None = None,
    ) -> None:
        codes = [normalize_language(lang) for lang in languages]
        if not codes or len(set(codes)) != len(codes):
            raise ValueError(f"languages must be a non-empty list without repeats, got {list(languages)}")
        num_languages = len(codes) if num_languages is None else num_languages
        if (
            isinstance(num_languages, bool)
            or not isinstance(num_languages, int)
            or not 1 <= num_languages <= len(codes)
        ):
            raise ValueError(f"num_languages must be an integer in 1..{len(codes)}, got {num_languages!r}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        if value not in ("source", "mean"):
            raise ValueError(f'value must be "source" or "mean", got {value!r}')
        if prompt not in ("EP", "LP"):
            raise ValueError(f'prompt must be "EP" or "LP", got {prompt!r}')
        self.extractor = extractor
        self.languages = codes[:num_languages]
        self.k = k
        self.value: Literal["source", "mean"] = value  # type: ignore[assignment]  # checked above
        self.prompt = prompt
        self.component = Component.parse(component)
        self.translations = translations
        experiment = {
            "k": k,
            "languages": "-".join(self.languages),
            "value": value,
            "prompt": prompt,
            "component": self.component.key,
        }
        if translations is not None:  # other translations, other vectors: another experiment
            experiment["translations"] = text_key(translations.identity)[:12]
        self._meta = _model_meta("dysem", extractor, 2 * extractor.hidden_size, experiment)

    def representations(
        self, texts: Sequence[str], source_language: str = "en"
    ) -> tuple[np.ndarray, np.ndarray]:
        """The original texts' vectors ``(N, d)`` and the selected languages' ``(L, N, d)``.

        Raises:
            MissingTranslationError: when no translation of some text can be found.
            ValueError: when translations are needed and no source of them was given.
        """
        source = normalize_language(source_language)
        texts = [str(t) for t in texts]
        key = self.component.key
        own = apply_prompt(texts, self.prompt, source)  # type: ignore[arg-type]
        source_vectors = self.extractor.extract(own, [self.component])[key]
        stack = []
        for lang in self.languages:
            if lang == source:
                stack.append(source_vectors)
                continue
            if self.translations is None:
                raise ValueError(
                    f"DySem needs {LANGUAGES[lang].name} translations of {LANGUAGES[source].name} texts; "
                    "pass translations=ParallelCorpus(...) or Seq2SeqTranslator(...), or use languages=[source]"
                )
            translated = self.translations.translate(texts, source, lang)
            prompted = apply_prompt(translated, self.prompt, lang)  # type: ignore[arg-type]
            stack.append(self.extractor.extract(prompted, [self.component])[key])
        return source_vectors, np.stack(stack)

    def encode_texts(self, texts: Sequence[str], source_language: str = "en") -> np.ndarray:
        """Packed ``(N, 2d)``: value vectors, then consensus masks as 0/1."""
        source_vectors, stack = self.representations(texts, source_language)
        values = value_vectors(stack, self.value, source=source_vectors)
        return np.concatenate([values, consensus_mask(stack).astype(np.float32)], axis=1)

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> np.ndarray:
        """DySem similarity of each pair; records the mean joint-set size in ``last_similarity_stats``."""
        v1, m1 = unpack(embeddings1)
        v2, m2 = unpack(embeddings2)
        sims, sizes = dynamic_similarity(v1, v2, m1, m2, self.k)
        self.last_similarity_stats = {"mean_dimensions": float(sizes.mean()) if sizes.size else 0.0}
        return sims

    def similarity(self, embeddings1: Any, embeddings2: Any) -> np.ndarray:
        """All-pairs DySem similarity ``(N1, N2)`` (semantic sets computed once per text)."""
        v1, m1 = unpack(embeddings1)
        v2, m2 = unpack(embeddings2)
        s1, s2 = semantic_sets(v1, m1, self.k), semantic_sets(v2, m2, self.k)
        n1, n2, d = v1.shape[0], v2.shape[0], v1.shape[1]
        out = np.zeros((n1, n2), dtype=np.float64)
        step = max(1, _MATRIX_ELEMENTS // max(1, n2 * d))
        for start in range(0, n1, step):
            rows = slice(start, start + step)
            union = s1[rows, None, :] | s2[None, :, :]
            a = np.where(union, v1[rows, None, :], 0).astype(np.float64)
            b = np.where(union, v2[None, :, :], 0).astype(np.float64)
            dots = np.einsum("ijd,ijd->ij", a, b)
            norms = np.sqrt(np.einsum("ijd,ijd->ij", a, a)) * np.sqrt(np.einsum("ijd,ijd->ij", b, b))
            out[rows] = np.where(norms > 1e-9, dots / np.where(norms > 1e-9, norms, 1.0), 0.0)
        return out
