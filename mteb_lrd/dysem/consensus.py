"""Multilingual consensus: the mask of dimensions positive in every language, value vectors, and
the order in which languages are taken.

The default language order uses no labels: each language is scored by how well its vectors agree
with the source text's (or with the other languages'). The reference's order — the dense-cosine
Spearman of each language against gold similarity scores — is available only through
:func:`rank_languages_by_labels`, which warns, because on test labels it leaks the answer.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Literal

import numpy as np
from scipy.stats import spearmanr

__all__ = [
    "consensus_mask",
    "value_vectors",
    "language_agreement",
    "rank_languages",
    "rank_languages_by_labels",
    "LabelLeakageWarning",
]

ValueKind = Literal["source", "mean"]
AgreementMethod = Literal["source", "consensus"]


class LabelLeakageWarning(UserWarning):
    """The language order was chosen with gold similarity scores."""


def _check_stack(per_language: object, name: str = "per_language") -> np.ndarray:
    stack = np.asarray(per_language)
    if stack.ndim != 3:
        raise ValueError(f"{name} must have shape (languages, texts, dimensions), got shape {stack.shape}")
    if stack.shape[0] < 1:
        raise ValueError(f"{name} must hold at least one language")
    if not (np.issubdtype(stack.dtype, np.floating) or np.issubdtype(stack.dtype, np.integer)):
        raise ValueError(f"{name} must be numeric, got dtype {stack.dtype}")
    if not np.all(np.isfinite(stack)):
        raise ValueError(f"{name} contains NaN or infinite values; only finite values are allowed")
    return stack


def consensus_mask(per_language: object) -> np.ndarray:
    """``M(x)``: the dimensions that are positive in the vector of every language.

    Args:
        per_language: ``(languages, N, d)`` representations of each text in each selected language.

    Returns:
        ``(N, d)`` boolean mask.
    """
    return np.all(_check_stack(per_language) > 0, axis=0)


def value_vectors(
    per_language: object, kind: ValueKind = "source", source: object | None = None
) -> np.ndarray:
    """The value vector ``v(x)`` of every text.

    Args:
        per_language: ``(languages, N, d)`` representations in the selected languages.
        kind: ``"source"`` (the original text's representation, ``source``) or ``"mean"``
            (mean over the selected languages).
        source: ``(N, d)`` representations of the original texts; required for ``"source"``.
    """
    stack = _check_stack(per_language)
    if kind == "mean":
        return stack.astype(np.float32, copy=False).mean(axis=0)
    if kind == "source":
        if source is None:
            raise ValueError('value kind "source" needs the source texts\' representations (source=...)')
        src = np.asarray(source, dtype=np.float32)
        if src.shape != stack.shape[1:]:
            raise ValueError(f"source must have shape {stack.shape[1:]}, got {src.shape}")
        return src
    raise ValueError(f'value kind must be "source" or "mean", got {kind!r}')


def _row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a.astype(np.float64, copy=False)
    b = b.astype(np.float64, copy=False)
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    dots = np.einsum("...d,...d->...", a, b)
    return np.where(norms > 0, dots / np.where(norms > 0, norms, 1.0), 0.0)


def language_agreement(
    per_language: object, source: object | None = None, method: AgreementMethod = "source"
) -> np.ndarray:
    """Label-free agreement of each language: mean cosine over texts with a reference vector.

    Args:
        per_language: ``(languages, N, d)`` representations of the same texts in each language.
        source: ``(N, d)`` representations of the original texts (for ``method="source"``).
        method: ``"source"`` — cosine with the original text's vector; ``"consensus"`` — cosine
            with the mean of the *other* languages' vectors (needs at least two languages).

    Returns:
        ``(languages,)`` mean cosines (higher = more agreement).
    """
    stack = _check_stack(per_language).astype(np.float64)
    if method == "source":
        if source is None:
            raise ValueError('agreement method "source" needs source=... (the original texts\' vectors)')
        src = np.asarray(source, dtype=np.float64)
        if src.shape != stack.shape[1:]:
            raise ValueError(f"source must have shape {stack.shape[1:]}, got {src.shape}")
        return _row_cosines(stack, src[None]).mean(axis=1)
    if method == "consensus":
        n_lang = stack.shape[0]
        if n_lang < 2:
            raise ValueError('agreement method "consensus" needs at least two languages')
        others = (stack.sum(axis=0, keepdims=True) - stack) / (n_lang - 1)
        return _row_cosines(stack, others).mean(axis=1)
    raise ValueError(f'agreement method must be "source" or "consensus", got {method!r}')


def _order(languages: Sequence[str], scores: np.ndarray) -> list[str]:
    languages = list(languages)
    if len(languages) != len(scores):
        raise ValueError(f"got {len(languages)} language names for {len(scores)} languages of vectors")
    # Stable: equal scores keep the given order.
    return [languages[i] for i in np.argsort(-np.asarray(scores), kind="stable")]


def rank_languages(
    per_language: object,
    languages: Sequence[str],
    *,
    source: object | None = None,
    method: AgreementMethod = "source",
) -> list[str]:
    """Order ``languages`` by :func:`language_agreement`, most agreeing first (no labels used)."""
    return _order(languages, language_agreement(per_language, source=source, method=method))


def rank_languages_by_labels(
    per_language_1: object,
    per_language_2: object,
    scores: object,
    languages: Sequence[str],
) -> list[str]:
    """The reference's order: languages by dense-cosine Spearman against gold scores (warns).

    Args:
        per_language_1: ``(languages, P, d)`` vectors of the first texts of ``P`` pairs.
        per_language_2: ``(languages, P, d)`` vectors of the second texts.
        scores: ``(P,)`` gold similarity scores.
        languages: names of the languages, in the stacks' order.
    """
    a = _check_stack(per_language_1, "per_language_1")
    b = _check_stack(per_language_2, "per_language_2")
    gold = np.asarray(scores, dtype=np.float64)
    if a.shape != b.shape or gold.shape != (a.shape[1],):
        raise ValueError(
            f"need two stacks of one shape and P scores; got {a.shape}, {b.shape} and {gold.shape}"
        )
    warnings.warn(
        "ordering languages by their Spearman correlation with gold similarity scores (the reference's "
        "rule): if these are test labels, the chosen languages leak test information into the result",
        LabelLeakageWarning,
        stacklevel=2,
    )
    cos = _row_cosines(a, b)
    per_lang = np.array([spearmanr(row, gold)[0] if np.ptp(row) > 0 else -np.inf for row in cos])
    return _order(languages, np.nan_to_num(per_lang, nan=-np.inf))
