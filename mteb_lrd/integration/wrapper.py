"""The layer-dynamics MTEB wrapper: one forward pass per batch serves the task's ordinary scores,
the LRD profiles of the texts it encoded, and the task's main score at every layer.

``with_layer_dynamics(model)`` returns an mteb encoder. Its ``encode`` runs the model once per batch
with all hidden states (:class:`~mteb_lrd.extraction.LayerExtractor`), returns the model's own
embeddings (so the ordinary scores are those of a plain run) and keeps the pooled vector of every
layer keyed by ``(prompt, text)``. After each task subset, :mod:`mteb_lrd.integration.augmentation` adds
``layer_dynamics`` and ``per_layer`` to the subset's scores; ``per_layer`` re-runs the task's own
evaluator on a :class:`LayerView`, which serves layer ``l`` from those vectors (no forward pass).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "SUPPORTED_TASK_TYPES",
    "LayerDynamicsOptions",
    "LayerView",
    "VectorStore",
    "build_layer_dynamics_model",
    "with_layer_dynamics",
]

logger = logging.getLogger(__name__)

SUPPORTED_TASK_TYPES = ("STS", "Classification", "PairClassification", "Clustering", "Retrieval", "Reranking")
_DOCUMENT_TYPES = ("Retrieval", "Reranking")


@dataclass(frozen=True)
class LayerDynamicsOptions:
    """What the wrapper computes per task subset.

    Attributes:
        layer_dynamics / per_layer: compute the ``layer_dynamics`` and ``per_layer`` keys.
        frenet_cap / nrs_cap / gfmi_cap: at most this many texts per metric (reference 1000, 1000,
            5000), drawn with ``RandomState(seed).choice``; ``None`` = all.
        seed: sub-sampling and NRS anchor seed.
        rank / var_threshold: Frenet subspace rank (``None``: explained-variance rule).
        nrs_k / n_anchors / gfmi_k: neighbourhood sizes (clamped to ``N - 1`` on tiny tasks, recorded).
        default_batch_size: used when mteb passes no ``batch_size`` (mteb issue #3547).
    """

    layer_dynamics: bool = True
    per_layer: bool = True
    frenet_cap: int | None = 1000
    nrs_cap: int | None = 1000
    gfmi_cap: int | None = 5000
    seed: int = 42
    rank: int | None = None
    var_threshold: float = 0.95
    nrs_k: int = 20
    n_anchors: int = 500
    gfmi_k: int = 30
    default_batch_size: int = 32

    def __post_init__(self) -> None:
        for name in ("frenet_cap", "nrs_cap", "gfmi_cap"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 3):
                raise ValueError(f"{name} must be an integer >= 3 or None (all texts); got {value!r}")
        for name in ("nrs_k", "n_anchors", "gfmi_k", "default_batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer; got {value!r}")
        if not 0 < self.var_threshold <= 1:
            raise ValueError(f"var_threshold must be in (0, 1]; got {self.var_threshold!r}")
        if not (self.layer_dynamics or self.per_layer):
            raise ValueError("layer_dynamics and per_layer are both off: nothing for the wrapper to add")


@dataclass
class VectorStore:
    """Pooled per-layer vectors keyed by ``(prompt, text)``: rows appended, gathered by key."""

    keys: dict[tuple[str, str], int] = field(default_factory=dict)
    chunks: list[np.ndarray] = field(default_factory=list)

    def add(self, keys: list[tuple[str, str]], states: np.ndarray) -> None:
        """Append ``states`` ``(L+1, n, d)`` for ``keys`` (a key seen before keeps its first row)."""
        offset = sum(chunk.shape[1] for chunk in self.chunks)
        new = {key: offset + i for i, key in enumerate(keys) if key not in self.keys}
        self.keys.update(new)
        self.chunks.append(states)

    def gather(self, keys: list[tuple[str, str]]) -> np.ndarray:
        """``(L+1, len(keys), d)`` for keys added before.

        Raises:
            KeyError: naming a key that was never encoded.
        """
        missing = [k for k in keys if k not in self.keys]
        if missing:
            raise KeyError(f"{len(missing)} texts were never encoded by the wrapper, e.g. {missing[0]!r}")
        if len(self.chunks) > 1:
            self.chunks = [np.concatenate(self.chunks, axis=1)]
        rows = np.fromiter((self.keys[k] for k in keys), dtype=np.int64, count=len(keys))
        return self.chunks[0][:, rows]

    def clear(self) -> None:
        """Forget every vector."""
        self.keys.clear()
        self.chunks.clear()


def _texts(inputs: Any) -> list[str]:
    return [text for batch in inputs for text in batch["text"]]


def _task_type(task_metadata: Any) -> str:
    return str(getattr(task_metadata, "type", ""))


def build_layer_dynamics_model(base_class: type) -> type:
    """Create the wrapper class on top of mteb's ``AbsEncoder`` (imported lazily: mteb is heavy)."""

    class LayerDynamicsModel(base_class):
        """An mteb encoder that also records every layer; see :func:`with_layer_dynamics`."""

        def __init__(self, model: Any, extractor_kwargs: dict[str, Any], options: LayerDynamicsOptions,
                     name: str | None = None, revision: str | None = None) -> None:  # fmt: skip
            from mteb.models import ModelMeta, SentenceTransformerEncoderWrapper
            from sentence_transformers import SentenceTransformer

            from mteb_lrd.extraction.extractor import LayerExtractor

            inner = model
            if isinstance(model, SentenceTransformer):
                inner = SentenceTransformerEncoderWrapper(model)
            st_or_hf = getattr(inner, "model", inner) if hasattr(inner, "mteb_model_meta") else inner
            self.extractor = LayerExtractor(st_or_hf, **extractor_kwargs)
            self.options = options
            self.inner = inner if hasattr(inner, "mteb_model_meta") else None
            meta = self.inner.mteb_model_meta if self.inner is not None else None
            if meta is None:
                fallback = name or getattr(getattr(st_or_hf, "config", None), "_name_or_path", None)
                meta = ModelMeta.create_empty(overwrites={"name": fallback or "mteb-lrd/unnamed-model"})
            updates = {k: v for k, v in (("name", name), ("revision", revision)) if v is not None}
            if meta.name is None and "name" not in updates:
                updates["name"] = "mteb-lrd/unnamed-model"
            if meta.revision is None and "revision" not in updates:
                updates["revision"] = "no_revision_available"
            pruning = getattr(self.extractor.loaded.architecture.model.config, "mteb_lrd_pruning", None)
            if pruning and not meta.experiment_kwargs:  # a pruned model loaded without PrunedModel
                updates["experiment_kwargs"] = dict(pruning)
            self.mteb_model_meta = meta.model_copy(update=updates) if updates else meta
            self.store = VectorStore()
            self.calls: dict[tuple[str, str, str], list[tuple[Any, list[tuple[str, str]]]]] = {}
            self.last_states_info: dict[str, Any] = {}
            self.depth = 0
            self._warned: set[str] = set()
            self._current_task: str | None = None

        @property
        def mteb_model_meta(self) -> Any:
            """The model's mteb metadata (results are stored under its name / revision)."""
            return self._meta

        @mteb_model_meta.setter
        def mteb_model_meta(self, meta: Any) -> None:
            # mteb's ModelMeta.load_model replaces the meta after loading: keep tracking it so cached
            # results of this meta are still checked for the layer keys.
            from mteb_lrd.integration.augmentation import track

            self._meta = meta
            track(self)

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

        def resolve_prompt(self, task_metadata: Any, prompt_type: Any) -> str | None:
            """The prompt text a plain mteb run of the wrapped SentenceTransformer would prepend
            (``None``: no prompt, or not a SentenceTransformer)."""
            from mteb.models.sentence_transformer_wrapper import _resolve_prompt

            if self.inner is None or not hasattr(self.inner, "model_prompts"):
                return None
            prompt = _resolve_prompt(self.inner.model_prompts, task_metadata, prompt_type)
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

        def encode(self, inputs: Any, *, task_metadata: Any, hf_split: str, hf_subset: str,
                   prompt_type: Any = None, **kwargs: Any) -> np.ndarray:  # fmt: skip
            """One forward pass per batch; returns the model's own embeddings, keeps every layer."""
            from mteb_lrd.integration.augmentation import install

            install()
            texts = _texts(inputs)
            task_type = _task_type(task_metadata)
            name = getattr(task_metadata, "name", "?")
            if name != self._current_task:
                self._current_task = name
                self.store.clear()
                self.calls.clear()
            batch_size = kwargs.get("batch_size") or self.options.default_batch_size
            self.extractor.batch_size = int(batch_size)
            self.extractor.shard_size = max(1, 1024 // int(batch_size)) * int(batch_size)
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

        def warn_unsupported(self, name: str, task_type: str) -> None:
            """Warn once per task that no layer keys are written for its type."""
            if name in self._warned:
                return
            self._warned.add(name)
            message = (
                f"mteb-lrd: task {name!r} has type {task_type!r}; layer_dynamics and per_layer are "
                f"computed for {', '.join(SUPPORTED_TASK_TYPES)} only. Its ordinary scores are written as usual."
            )
            logger.warning(message)
            warnings.warn(message, stacklevel=3)

        def layer_view(self, layer: int) -> LayerView:
            """An encoder serving layer ``layer`` from the stored vectors."""
            return LayerView(self, layer)

    return LayerDynamicsModel


class LayerView:
    """An mteb encoder that returns the stored pooled vectors of one layer (no forward pass).

    Args:
        parent: the wrapper that encoded the texts.
        layer: hidden-state index ``0..L``.
    """

    def __init__(self, parent: Any, layer: int) -> None:
        self.parent = parent
        self.layer = layer
        self.mteb_model_meta = parent.mteb_model_meta

    def encode(self, inputs: Any, *, task_metadata: Any, hf_split: str, hf_subset: str,
               prompt_type: Any = None, **kwargs: Any) -> np.ndarray:  # fmt: skip
        """Vectors of ``self.layer`` for the texts of ``inputs``.

        Raises:
            KeyError: when a text was not encoded by the parent (it would need a forward pass).
        """
        prompt = self.parent.resolve_prompt(task_metadata, prompt_type) or ""
        keys = [(prompt, text) for text in _texts(inputs)]
        return self.parent.store.gather(keys)[self.layer]

    def similarity(self, embeddings1: Any, embeddings2: Any) -> Any:
        """The parent's similarity."""
        return self.parent.similarity(embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> Any:
        """The parent's pairwise similarity."""
        return self.parent.similarity_pairwise(embeddings1, embeddings2)


_MODEL_CLASS: type | None = None


def _model_class() -> type:
    global _MODEL_CLASS
    if _MODEL_CLASS is None:
        from mteb.models.abs_encoder import AbsEncoder

        _MODEL_CLASS = build_layer_dynamics_model(AbsEncoder)
    return _MODEL_CLASS


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
) -> Any:
    """Wrap a model so that ``mteb.evaluate`` also writes ``layer_dynamics`` and ``per_layer``.

    Args:
        model: a SentenceTransformer, an mteb encoder around one (e.g. a pruned model from
            :func:`mteb_lrd.prune`), a transformers model, or a path / name of either.
        tokenizer: tokenizer of a plain transformers model (decoders: pass it explicitly).
        pooling / final_norm / device / dtype / max_length: see :class:`~mteb_lrd.LayerExtractor`.
        name / revision: model name and revision for mteb results (default: the model's own).
        **options: fields of :class:`LayerDynamicsOptions` (caps, seed, metric parameters,
            ``per_layer=False`` to skip the per-layer scores, ...).

    Returns:
        An mteb encoder; pass it to ``mteb.evaluate`` like any model.

    Raises:
        ValueError: for unknown or invalid options.

    Example:
        >>> wrapped = with_layer_dynamics(SentenceTransformer("all-MiniLM-L6-v2"))
        >>> mteb.evaluate(wrapped, mteb.get_tasks(tasks=["STSBenchmark"]))
    """
    from mteb_lrd.integration.augmentation import install

    unknown = sorted(set(options) - set(LayerDynamicsOptions.__dataclass_fields__))
    if unknown:
        allowed = ", ".join(sorted(LayerDynamicsOptions.__dataclass_fields__))
        raise ValueError(f"unknown options {unknown}; allowed: {allowed}")
    opts = LayerDynamicsOptions(**options)
    extractor_kwargs = {
        "tokenizer": tokenizer, "pooling": pooling, "final_norm": final_norm, "device": device,
        "dtype": dtype, "max_length": max_length, "batch_size": opts.default_batch_size,
        "show_progress_bar": False,
    }  # fmt: skip
    install()
    return _model_class()(model, extractor_kwargs, opts, name=name, revision=revision)
