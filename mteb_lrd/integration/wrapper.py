"""The layer-dynamics MTEB wrapper: one forward pass per batch serves the task's ordinary scores,
the LRD profiles of the texts it encoded, and the task's main score at every layer.

``with_layer_dynamics(model)`` returns a :class:`LayerDynamicsModel`, an mteb encoder. Its
``encode`` runs the model once per batch with all hidden states
(:class:`~mteb_lrd.extraction.extractor.LayerExtractor`), returns the model's own embeddings (so the
ordinary scores are those of a plain run) and keeps the pooled vector of every layer keyed by
``(prompt, text)``. After each task subset, :mod:`mteb_lrd.integration.seams` has
:mod:`mteb_lrd.integration.augmentation` add ``layer_dynamics`` and ``per_layer`` to the scores;
``per_layer`` re-runs the task's own evaluator on a :class:`LayerView`, which serves layer ``l``
from those vectors (no forward pass).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
from mteb.abstasks.task_metadata import TaskMetadata
from mteb.models import SentenceTransformerEncoderWrapper
from mteb.models.abs_encoder import AbsEncoder
from mteb.types import BatchedInput, PromptType

from mteb_lrd import _compat
from mteb_lrd.extraction.extractor import LayerExtractor
from mteb_lrd.integration import seams
from mteb_lrd.integration.naming import model_meta
from mteb_lrd.integration.options import SUPPORTED_TASK_TYPES, LayerDynamicsOptions
from mteb_lrd.integration.store import TextKey, VectorStore

if TYPE_CHECKING:
    from torch.utils.data import DataLoader

__all__ = ["LayerDynamicsModel", "LayerView", "with_layer_dynamics"]

logger = logging.getLogger(__name__)

CallKey = tuple[str, str, str]
"""``(task name, hf_split, hf_subset)`` of one ``encode`` call."""


def _texts(inputs: Iterable[BatchedInput]) -> list[str]:
    return [text for batch in inputs for text in batch["text"]]


def _warn(message: str, category: type[Warning] = UserWarning) -> None:
    logger.warning(message)
    warnings.warn(message, category, stacklevel=3)


class LayerDynamicsModel(AbsEncoder):
    """An mteb encoder that also records every layer; build it with :func:`with_layer_dynamics`.

    Attributes:
        extractor: the one-pass extractor of every hidden state.
        options: what is computed per task subset.
        store: the pooled per-layer vectors of the current task.
        calls: per ``(task, split, subset)``: the prompt type and keys of each ``encode`` call, until
            augmentation consumes them.
    """

    is_layer_dynamics_model = True
    """Marker the seams recognise the wrapper by (a copy of its meta or a subclass still counts)."""

    def __init__(
        self,
        model: Any,
        extractor_kwargs: dict[str, Any],
        options: LayerDynamicsOptions,
        name: str | None = None,
        revision: str | None = None,
    ) -> None:
        from sentence_transformers import SentenceTransformer

        inner = SentenceTransformerEncoderWrapper(model) if isinstance(model, SentenceTransformer) else model
        self.inner: Any = inner if hasattr(inner, "mteb_model_meta") else None
        backbone = inner.model if self.inner is not None else inner
        self.extractor = LayerExtractor(backbone, **extractor_kwargs)
        self.options = options
        self.mteb_model_meta = model_meta(
            self.inner, self.extractor.loaded.architecture.model, name, revision
        )
        self.store = VectorStore()
        self.calls: dict[CallKey, list[tuple[PromptType | None, list[TextKey]]]] = {}
        self.last_states_info: dict[str, Any] = {}
        self.depth = 0
        self._warned: set[str] = set()
        self._current_task: str | None = None
        seams.track(self)

    # -- mteb encoder interface -------------------------------------------------------------
    def similarity(self, embeddings1: Any, embeddings2: Any) -> Any:
        """The wrapped model's own similarity (cosine when it declares none)."""
        if self.inner is not None:
            return self.inner.similarity(embeddings1, embeddings2)
        return super().similarity(embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> Any:
        """The wrapped model's own pairwise similarity."""
        if self.inner is not None:
            return self.inner.similarity_pairwise(embeddings1, embeddings2)
        return super().similarity_pairwise(embeddings1, embeddings2)

    def resolve_prompt(self, task_metadata: TaskMetadata, prompt_type: PromptType | None) -> str | None:
        """The prompt text a plain mteb run of the wrapped SentenceTransformer would prepend
        (``None``: no prompt, or not a SentenceTransformer)."""
        if self.inner is None or not hasattr(self.inner, "model_prompts"):
            return None
        prompt = _compat.resolve_prompt(self.inner.model_prompts, task_metadata, prompt_type)
        if prompt is not None:
            return prompt
        st = self.inner.model
        prompts = getattr(st, "prompts", None) or {}
        # sentence-transformers' encode_query / encode_document try these prompt names, then
        # (like encode) the default prompt.
        names: tuple[str, ...] = ()
        if prompt_type is not None:
            is_query = str(getattr(prompt_type, "value", prompt_type)) == "query"
            names = ("query",) if is_query else ("document", "passage", "corpus")
        for candidate in (*names, getattr(st, "default_prompt_name", None)):
            if candidate is not None and candidate in prompts:
                return prompts[candidate]
        return None

    def encode(
        self,
        inputs: DataLoader[BatchedInput],
        *,
        task_metadata: TaskMetadata,
        hf_split: str,
        hf_subset: str,
        prompt_type: PromptType | None = None,
        **kwargs: Any,
    ) -> np.ndarray:
        """One forward pass per batch; returns the model's own embeddings, keeps every layer."""
        seams.install()  # task classes defined since the wrapper was built
        texts = _texts(inputs)
        task_type = str(task_metadata.type)
        name = task_metadata.name
        if name != self._current_task:
            self._warn_unaugmented()
            self._current_task = name
            self.store.clear()
            self.calls.clear()
        batch_size = int(kwargs.get("batch_size") or self.options.default_batch_size)
        self.extractor.batch_size = batch_size
        self.extractor.shard_size = max(1, 1024 // batch_size) * batch_size
        self.extractor.show_progress_bar = bool(kwargs.get("show_progress_bar", False))
        prompt = self.resolve_prompt(task_metadata, prompt_type)
        result = self.extractor.extract(texts, prompt=prompt)
        if task_type not in SUPPORTED_TASK_TYPES:
            self.warn_unsupported(name, task_type)
            return result.embeddings
        keys = [(prompt or "", text) for text in texts]
        self.store.add(keys, result.states)
        self.calls.setdefault((name, hf_split, hf_subset), []).append((prompt_type, keys))
        self.last_states_info = {"pooling": result.pooling, "final_norm": result.final_norm}
        return result.embeddings

    # -- bookkeeping ------------------------------------------------------------------------
    def unaugmented(self) -> list[CallKey]:
        """``(task, split, subset)`` that were encoded but got no layer keys yet."""
        return list(self.calls)

    def _warn_unaugmented(self) -> None:
        pending = self.unaugmented()
        if pending:
            _warn(
                f"mteb-lrd: {len(pending)} task subsets were encoded by the layer-dynamics model but no "
                f"augmentation ran for them, so their results lack layer_dynamics / per_layer: {pending}. "
                "The mteb seam may have moved (see mteb_lrd._compat.check()).",
                RuntimeWarning,
            )
            self.calls.clear()

    def warn_unsupported(self, name: str, task_type: str) -> None:
        """Warn once per task that no layer keys are written for its type."""
        if name in self._warned:
            return
        self._warned.add(name)
        _warn(
            f"mteb-lrd: task {name!r} has type {task_type!r}; layer_dynamics and per_layer are "
            f"computed for {', '.join(SUPPORTED_TASK_TYPES)} only. Its ordinary scores are written as usual."
        )

    def layer_view(self, layer: int) -> LayerView:
        """An encoder serving layer ``layer`` from the stored vectors."""
        return LayerView(self, layer)


class LayerView:
    """An mteb encoder that returns the stored pooled vectors of one layer (no forward pass).

    Args:
        parent: the wrapper that encoded the texts.
        layer: hidden-state index ``0..L``.
    """

    def __init__(self, parent: LayerDynamicsModel, layer: int) -> None:
        self.parent = parent
        self.layer = layer
        self.mteb_model_meta = parent.mteb_model_meta

    def encode(
        self,
        inputs: DataLoader[BatchedInput],
        *,
        task_metadata: TaskMetadata,
        hf_split: str,
        hf_subset: str,
        prompt_type: PromptType | None = None,
        **kwargs: Any,
    ) -> np.ndarray:
        """Vectors of ``self.layer`` for the texts of ``inputs``.

        Raises:
            KeyError: when a text was not encoded by the parent (it would need a forward pass).
        """
        prompt = self.parent.resolve_prompt(task_metadata, prompt_type) or ""
        return self.parent.store.layer(self.layer, [(prompt, text) for text in _texts(inputs)])

    def similarity(self, embeddings1: Any, embeddings2: Any) -> Any:
        """The parent's similarity."""
        return self.parent.similarity(embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> Any:
        """The parent's pairwise similarity."""
        return self.parent.similarity_pairwise(embeddings1, embeddings2)


def with_layer_dynamics(
    model: Any,
    *,
    tokenizer: Any = None,
    pooling: str = "auto",
    final_norm: str = "as_is",
    device: str | None = None,
    dtype: str | None = None,
    max_length: int = 512,
    name: str | None = None,
    revision: str | None = None,
    **options: Any,
) -> LayerDynamicsModel:
    """Wrap a model so that ``mteb.evaluate`` also writes ``layer_dynamics`` and ``per_layer``.

    Args:
        model: a SentenceTransformer, an mteb encoder around one (e.g. a pruned model from
            :func:`mteb_lrd.prune`), a transformers model, or a path / name of either.
        tokenizer: tokenizer of a plain transformers model (decoders: pass it explicitly).
        pooling / final_norm / device / dtype / max_length: see :class:`~mteb_lrd.LayerExtractor`.
        name / revision: model name and revision for mteb results (default: the model's own).
        **options: fields of :class:`~mteb_lrd.integration.options.LayerDynamicsOptions` (caps, seed,
            metric parameters, ``per_layer=False`` to skip the per-layer scores, ...).

    Returns:
        An mteb encoder; pass it to ``mteb.evaluate`` like any model.

    Raises:
        ValueError: for unknown or invalid options.
        SeamError: when the installed mteb lacks a private name the integration needs.

    Example:
        >>> wrapped = with_layer_dynamics(SentenceTransformer("all-MiniLM-L6-v2"))
        >>> mteb.evaluate(wrapped, mteb.get_tasks(tasks=["STSBenchmark"]))
    """
    opts = LayerDynamicsOptions.from_kwargs(options)
    extractor_kwargs = {
        "tokenizer": tokenizer, "pooling": pooling, "final_norm": final_norm, "device": device,
        "dtype": dtype, "max_length": max_length, "batch_size": opts.default_batch_size,
        "show_progress_bar": False,
    }  # fmt: skip
    seams.install()
    return LayerDynamicsModel(model, extractor_kwargs, opts, name=name, revision=revision)
