"""Every private name of mteb, sentence-transformers and transformers that mteb-lrd relies on.

mteb has no evaluator hooks and no plugin registry, so the integration must touch a few private
names. They live here and nowhere else: :func:`check` verifies all of them at once and names the
library version and the missing name, so a renamed internal fails loudly in one place (and the
plugin import hook can switch itself off with a warning instead of breaking ``import mteb``).

=====================================  ===========================================================
private name                           why
=====================================  ===========================================================
``AbsTask*._evaluate_subset``          every task family funnels a subset's scoring through it;
``AbsTaskClassification.               cross-validated classification through this one. Wrapped
_evaluate_subset_cross_validation``    to add ``layer_dynamics`` / ``per_layer`` to the scores.
``AbsTask._add_main_score``            fills ``main_score`` of the per-layer scores dicts.
``mteb.evaluate._check_cache``         decides what is missing from cached results: wrapped so a
                                       cached result without the layer keys counts as missing.
``mteb.get_tasks._TASKS_REGISTRY``     task name look-ups (``mteb.get_task``, ``mteb run``).
``mteb.models.model_implementations.   model name look-ups (``mteb.get_model``, ``mteb run``).
MODEL_REGISTRY``
``mteb.models.sentence_transformer_    the prompt a plain mteb run would use for a task.
wrapper._resolve_prompt``
``mteb._create_dataloaders.           the dataloader factory the evaluators call by name: rebound
create_dataloader``                    at its use sites while the layers of one subset are scored,
                                       so each dataloader is built once, not once per layer.
``AbsTaskRetrieval._top_k``            how deep a retrieval search goes: lowered while the layers
                                       are scored to what the main score's cutoff needs.
``mteb._evaluators.retrieval_metrics.  the abstention (nAUC) metrics of a retrieval subset:
evaluate_abstention``                  skipped while the layers are scored unless the main score
                                       is one of them. Missing: the speed-up is off, nothing breaks.
``AbsTaskSTS._calculate_scores``       sees the similarity series and gold scores of an STS subset:
                                       recorded while the layers are scored, for the per-layer
                                       bootstrap interval. Missing: no interval, nothing breaks.
``SentenceTransformer._input_length``  the length sort of ``encode`` and, for models whose inputs
``SentenceTransformer.                 are flattened (no padding), its interleaving of long and
_can_flatten_inputs`` / ``_interleave_ short texts: our batches — and so the embeddings — are
sorted_indices``                       ``encode``'s to the bit. Missing: no interleaving.
``SentenceTransformer._model_card_text`` the loaded README, which ``save`` would copy unchanged: a
                                       pruned model drops it so its own card is generated (as
                                       sentence-transformers' model merging does).
``transformers.utils.output_capturing.  transformers hooks the blocks for hidden states at the first
maybe_install_capturing_hooks``        call that asks for them, once: block surgery hooks them
                                       first, so a block removed then still reports its state once
                                       restored. Missing: hooks are not lazy there, nothing to do.
=====================================  ===========================================================
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

__all__ = [
    "CACHE_CHECK",
    "MAIN_SCORE_METHOD",
    "ABSTENTION",
    "RETRIEVAL_TOP_K",
    "STS_SCORES",
    "SUBSET_METHODS",
    "SeamError",
    "add_main_score",
    "installed_version",
    "cache_check_owner",
    "abstention_owner",
    "check",
    "dataloader_factory_sites",
    "drop_loaded_model_card",
    "encode_order",
    "input_length",
    "install_output_capturing_hooks",
    "model_registry",
    "quiet_renamed_method_calls",
    "resolve_prompt",
    "task_registry",
]

SUBSET_METHODS: tuple[str, ...] = ("_evaluate_subset", "_evaluate_subset_cross_validation")
"""Task methods that score one subset: ``(self, model, data_split, *, hf_split, hf_subset, ...)``."""

CACHE_CHECK = "_check_cache"
"""Function of ``mteb.evaluate`` returning ``(existing TaskResult | None, {split: [missing subsets]})``."""

MAIN_SCORE_METHOD = "_add_main_score"
"""Task method that fills ``main_score`` of a subset's scores dict: ``(self, scores) -> None``."""

_MAIN_SCORE = MAIN_SCORE_METHOD

RETRIEVAL_TOP_K = "_top_k"
"""Attribute of retrieval tasks: the search depth (``max(k_values)``) passed to mteb's searcher."""

_DATALOADERS = "mteb._create_dataloaders"

ABSTENTION = "evaluate_abstention"
"""Function of :data:`_RETRIEVAL_METRICS` that mteb's retrieval scoring calls by name for the nAUCs."""

_RETRIEVAL_METRICS = "mteb._evaluators.retrieval_metrics"

STS_SCORES = "_calculate_scores"
"""Method of mteb's STS tasks: ``(self, scores, normalized_scores) -> metrics`` (series and gold)."""


# sentence-transformers 6 renamed this method; mteb 2.26 still calls the old name while it builds a
# SentenceTransformer's ModelMeta, which warns on every run although nothing is wrong for the user.
_RENAMED_BY_SENTENCE_TRANSFORMERS = "The `get_sentence_embedding_dimension` method has been renamed"


@contextlib.contextmanager
def quiet_renamed_method_calls() -> Iterator[None]:
    """Silence the FutureWarning of mteb calling sentence-transformers' renamed
    ``get_sentence_embedding_dimension`` (only that message; others still show)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_RENAMED_BY_SENTENCE_TRANSFORMERS, category=FutureWarning)
        yield


class SeamError(RuntimeError):
    """A private name mteb-lrd relies on is missing from the installed library."""


def installed_version(distribution: str) -> str | None:
    """The installed version of a PyPI distribution; ``None`` when it is not installed."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _missing(distribution: str, name: str) -> SeamError:
    return SeamError(
        f"mteb-lrd needs {name}, which {distribution} {installed_version(distribution) or '(not installed)'} "
        "does not have; mteb-lrd is tested with the versions its setup.cfg allows "
        "(mteb>=2.26,<2.27: 2.26.0 and the newest 2.26.x are tested in CI)"
    )


def _attribute(module: str, name: str, distribution: str = "mteb") -> Any:
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise _missing(distribution, f"{module}.{name}") from err


def task_registry() -> dict[str, type]:
    """mteb's task registry: name → task class (``mteb.get_tasks`` is also a function name)."""
    return _attribute("mteb.get_tasks", "_TASKS_REGISTRY")


def model_registry() -> dict[str, Any]:
    """mteb's model registry: name → ``ModelMeta``."""
    return _attribute("mteb.models.model_implementations", "MODEL_REGISTRY")


def resolve_prompt(
    model_prompts: Mapping[str, str] | None, task_metadata: Any, prompt_type: Any
) -> str | None:
    """The prompt mteb's SentenceTransformer wrapper would use for this task and prompt type."""
    function = _attribute("mteb.models.sentence_transformer_wrapper", "_resolve_prompt")
    return function(model_prompts, task_metadata, prompt_type)


def add_main_score(task: Any, scores: dict[str, Any]) -> None:
    """Fill ``scores["main_score"]`` the way the task does after a subset."""
    method = getattr(task, _MAIN_SCORE, None)
    if method is None:
        raise _missing("mteb", f"{type(task).__name__}.{_MAIN_SCORE}")
    method(scores)


def cache_check_owner() -> Any:
    """The module whose ``_check_cache`` ``mteb.evaluate`` calls (patched in place there)."""
    module = importlib.import_module("mteb.evaluate")
    if not callable(getattr(module, CACHE_CHECK, None)):
        raise _missing("mteb", f"mteb.evaluate.{CACHE_CHECK}")
    return module


def dataloader_factory_sites() -> tuple[Callable[..., Any], list[Any]]:
    """mteb's ``create_dataloader`` and every loaded ``mteb.*`` module that calls it by that name.

    Returns:
        ``(create_dataloader, modules)``: rebinding ``module.create_dataloader`` in each module
        changes what its evaluators call.
    """
    factory = _attribute(_DATALOADERS, "create_dataloader")
    sites = [
        module
        for name, module in list(sys.modules.items())
        if name.startswith("mteb.") and getattr(module, "create_dataloader", None) is factory
    ]
    return factory, sites


def abstention_owner() -> Any | None:
    """The module whose :data:`ABSTENTION` retrieval scoring calls, ``None`` when this mteb has none."""
    try:
        module = importlib.import_module(_RETRIEVAL_METRICS)
    except ImportError:
        return None
    return module if callable(getattr(module, ABSTENTION, None)) else None


def input_length(model: Any) -> Callable[[str], int] | None:
    """``SentenceTransformer._input_length`` (the length ``encode`` sorts by), ``None`` when absent."""
    return getattr(model, "_input_length", None)


def encode_order(model: Any, texts: list[str]) -> np.ndarray:
    """The order in which ``SentenceTransformer.encode`` batches ``texts``: its length sort (numpy's
    default ``argsort`` of the negated lengths, as ``encode`` calls it) and, where the model flattens
    its inputs (no padding), its interleaving of long and short texts. A model without the private
    length function is sorted by character count."""
    length = input_length(model) or len
    order = np.argsort([-length(text) for text in texts])
    can_flatten = getattr(model, "_can_flatten_inputs", None)
    interleave = getattr(model, "_interleave_sorted_indices", None)
    if callable(can_flatten) and callable(interleave) and can_flatten():
        order = interleave(order)
    return np.asarray(order)


def drop_loaded_model_card(model: Any) -> None:
    """Make ``model.save`` generate a model card from ``model.model_card_data`` instead of copying the
    README it was loaded with (sentence-transformers reuses ``_model_card_text`` unless trained)."""
    if hasattr(model, "_model_card_text"):
        model._model_card_text = None


def install_output_capturing_hooks(model: Any) -> None:
    """Hook every block of each outermost transformers model inside ``model`` for hidden states now.

    transformers installs these hooks lazily, at the first forward that asks for hidden states, and
    marks the model as hooked: blocks absent then (removed by surgery) would never report their
    states, even once restored. Hooking an outer model also marks the models nested in it; a model
    with a nested one hooked already (transformers hooks the model whose forward collects the
    states) is left alone, or its blocks would report twice.
    """
    try:
        from transformers import PreTrainedModel
        from transformers.utils.output_capturing import _CAN_RECORD_REGISTRY, maybe_install_capturing_hooks
    except ImportError:  # a transformers whose hooks are not lazy
        return

    def visit(module: Any) -> None:
        if isinstance(module, PreTrainedModel) and _CAN_RECORD_REGISTRY.get(module):
            if not any(
                getattr(inner, "_output_capturing_hooks_installed", False) for inner in module.modules()
            ):
                maybe_install_capturing_hooks(module)
            return
        for child in module.children():
            visit(child)

    visit(model)


def check() -> list[str]:
    """Every seam problem of the installed libraries, as messages (empty when all is in place).

    Returns:
        One message per missing name, each naming the library version.
    """
    problems: list[str] = []
    for probe in (task_registry, model_registry, cache_check_owner):
        try:
            probe()
        except SeamError as err:
            problems.append(str(err))
    for module, name in (("mteb.models.sentence_transformer_wrapper", "_resolve_prompt"),
                         (_DATALOADERS, "create_dataloader")):  # fmt: skip
        try:
            _attribute(module, name)
        except SeamError as err:
            problems.append(str(err))
    try:
        from mteb.abstasks.abstask import AbsTask
        from mteb.abstasks.classification import AbsTaskClassification
    except ImportError as err:  # pragma: no cover - mteb itself is broken
        return [*problems, f"cannot import mteb's task classes: {err}"]
    for owner, name in ((AbsTask, SUBSET_METHODS[0]), (AbsTaskClassification, SUBSET_METHODS[1]),
                        (AbsTask, _MAIN_SCORE)):  # fmt: skip
        if not callable(getattr(owner, name, None)):
            problems.append(str(_missing("mteb", f"{owner.__name__}.{name}")))
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as err:  # pragma: no cover - a declared dependency
        return [*problems, f"cannot import sentence_transformers: {err}"]
    if not callable(getattr(SentenceTransformer, "_input_length", None)):
        problems.append(str(_missing("sentence-transformers", "SentenceTransformer._input_length")))
    return problems
