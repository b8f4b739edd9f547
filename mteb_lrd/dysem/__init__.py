"""DySem: training-free semantic textual similarity over dynamic, multilingual-consensus dimensions.

Pure math (:mod:`~mteb_lrd.dysem.similarity`, :mod:`~mteb_lrd.dysem.consensus`,
:mod:`~mteb_lrd.dysem.grid`) is numpy only; :mod:`~mteb_lrd.dysem.representation` runs the
decoder; :mod:`~mteb_lrd.dysem.model` and :mod:`~mteb_lrd.dysem.tasks` are the MTEB glue.
Torch and mteb load on first use of the names that need them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "consensus_mask": "mteb_lrd.dysem.consensus",
    "value_vectors": "mteb_lrd.dysem.consensus",
    "language_agreement": "mteb_lrd.dysem.consensus",
    "rank_languages": "mteb_lrd.dysem.consensus",
    "rank_languages_by_labels": "mteb_lrd.dysem.consensus",
    "LabelLeakageWarning": "mteb_lrd.dysem.consensus",
    "dynamic_similarity": "mteb_lrd.dysem.similarity",
    "semantic_sets": "mteb_lrd.dysem.similarity",
    "GridPoint": "mteb_lrd.dysem.grid",
    "grid_search": "mteb_lrd.dysem.grid",
    "best_point": "mteb_lrd.dysem.grid",
    "normalize_sentence": "mteb_lrd.dysem.prompts",
    "apply_prompt": "mteb_lrd.dysem.prompts",
    "normalize_language": "mteb_lrd.dysem.languages",
    "Component": "mteb_lrd.dysem.representation",
    "RepresentationExtractor": "mteb_lrd.dysem.representation",
    "ParallelCorpus": "mteb_lrd.dysem.translation",
    "Seq2SeqTranslator": "mteb_lrd.dysem.translation",
    "FallbackTranslations": "mteb_lrd.dysem.translation",
    "MissingTranslationError": "mteb_lrd.dysem.translation",
    "DySemModel": "mteb_lrd.dysem.model",
    "DenseBaseline": "mteb_lrd.dysem.model",
    "mean_pooling_baseline": "mteb_lrd.dysem.model",
    "prompteol_baseline": "mteb_lrd.dysem.model",
    "attention_sum_baseline": "mteb_lrd.dysem.model",
    "model_similarity_task": "mteb_lrd.dysem.tasks",
}

__all__ = [
    "Component",
    "DenseBaseline",
    "DySemModel",
    "FallbackTranslations",
    "GridPoint",
    "LabelLeakageWarning",
    "MissingTranslationError",
    "ParallelCorpus",
    "RepresentationExtractor",
    "Seq2SeqTranslator",
    "apply_prompt",
    "attention_sum_baseline",
    "best_point",
    "consensus_mask",
    "dynamic_similarity",
    "grid_search",
    "language_agreement",
    "mean_pooling_baseline",
    "model_similarity_task",
    "normalize_language",
    "normalize_sentence",
    "prompteol_baseline",
    "rank_languages",
    "rank_languages_by_labels",
    "semantic_sets",
    "value_vectors",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mteb_lrd.dysem' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from mteb_lrd.dysem.consensus import (
        LabelLeakageWarning,
        consensus_mask,
        language_agreement,
        rank_languages,
        rank_languages_by_labels,
        value_vectors,
    )
    from mteb_lrd.dysem.grid import GridPoint, best_point, grid_search
    from mteb_lrd.dysem.languages import normalize_language
    from mteb_lrd.dysem.model import (
        DenseBaseline,
        DySemModel,
        attention_sum_baseline,
        mean_pooling_baseline,
        prompteol_baseline,
    )
    from mteb_lrd.dysem.prompts import apply_prompt, normalize_sentence
    from mteb_lrd.dysem.representation import Component, RepresentationExtractor
    from mteb_lrd.dysem.similarity import dynamic_similarity, semantic_sets
    from mteb_lrd.dysem.tasks import model_similarity_task
    from mteb_lrd.dysem.translation import (
        FallbackTranslations,
        MissingTranslationError,
        ParallelCorpus,
        Seq2SeqTranslator,
    )
