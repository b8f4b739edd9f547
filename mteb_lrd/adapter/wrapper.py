"""The layer-dynamics MTEB wrapper: one forward pass per batch serves the task's ordinary scores,
the LRD profiles of the texts it encoded, and the task's main score at every layer.

``with_layer_dynamics(model)`` returns a :class:`LayerDynamicsModel`, an mteb encoder. Its
``encode`` runs the model once per batch with all hidden states
(:class:`~mteb_lrd.extraction.extractor.LayerExtractor`), returns the model's own embeddings (so the
ordinary scores are those of a plain run) and keeps the pooled vector of every layer keyed by
``(prompt, text)``. After each task subset, :mod:`mteb_lrd.adapter.seams` has
:mod:`mteb_lrd.adapter.augmentation` add ``layer_dynamics`` and ``per_layer`` to the scores;
``per_layer`` re-runs the task's own evaluator on a :class:`LayerView`, which serves layer ``l``
from those vectors (no forward pass).
"""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np
from mteb.abstasks.task_metadata import TaskMetadata
from mteb.models import SentenceTransformerEncoderWrapper
from mteb.models.abs_encoder import AbsEncoder
from mteb.types import BatchedInput, PromptType

from mteb_lrd import _compat
from mteb_lrd.adapter import seams
from mteb_lrd.adapter.background_dynamics import BackgroundDynamics
from mteb_lrd.adapter.layer_choice import resolve_layers
from mteb_lrd.adapter.model_meta import model_meta
from mteb_lrd.adapter.options import (
    DOCUMENT_TYPES,
    SUPPORTED_TASK_TYPES,
    LayerDynamicsOptions,
    is_lrd_call,
)
from mteb_lrd.adapter.plain_prompt import plain_run_prompt
from mteb_lrd.adapter.protocols import CallKey, TextReader, read_texts
from mteb_lrd.extraction.extractor import LayerExtractor
from mteb_lrd.extraction.kept_states import KeptStates
from mteb_lrd.extraction.options import ExtractionOptions, scoring_settings
from mteb_lrd.extraction.templates import template_label
from mteb_lrd.storage.lrd_sample import LRDSample
from mteb_lrd.storage.memory_plan import MemoryPlan
from mteb_lrd.storage.vector_store import TextKey, VectorStore

if TYPE_CHECKING:
    from torch.utils.data import DataLoader

__all__ = ["LayerDynamicsModel", "LayerView", "with_layer_dynamics"]

logger = logging.getLogger(__name__)

_SHARD_BYTES = 64 * 1024 * 1024


def _warn(message: str, category: type[Warning] = UserWarning) -> None:
    logger.warning(message)
    warnings.warn(message, category, stacklevel=3)


class LayerDynamicsModel(AbsEncoder):
    """An mteb encoder that also records every layer; build it with :func:`with_layer_dynamics`.

    Attributes:
        extractor: the one-pass extractor of every hidden state.
        options: what is computed per task subset.
        layers: the hidden states that get per-layer scores.
        store: the vectors of those states of every text of the current task (in RAM up to the
            memory budget, then in a memory-mapped temporary file).
        sample: every state of the texts the layer dynamics sample (same budget rule).
        background: the layer dynamics measured in a worker thread once every expected text is in.
        score_device: the model's accelerator, where per-layer retrieval searches run (``None``
            on the CPU: numpy arrays, as mteb's own runs).
        calls: per ``(task, split, subset)``: the prompt type and keys of each ``encode`` call, until
            augmentation consumes them.
    """

    is_layer_dynamics_model = True
    """Marker the seams recognise the wrapper by (a copy of its meta or a subclass still counts)."""

    def __init__(
        self,
        model: Any,
        extraction: ExtractionOptions,
        options: LayerDynamicsOptions,
        *,
        tokenizer: Any = None,
        device: str | None = None,
        name: str | None = None,
        revision: str | None = None,
    ) -> None:
        from sentence_transformers import SentenceTransformer

        with _compat.quiet_renamed_method_calls():
            inner = (
                SentenceTransformerEncoderWrapper(model) if isinstance(model, SentenceTransformer) else model
            )
        self.inner: Any = inner if hasattr(inner, "mteb_model_meta") else None
        backbone = inner.model if self.inner is not None else inner
        self.extractor = LayerExtractor(backbone, tokenizer, device=device, options=extraction)
        self.options = options
        self.layers = resolve_layers(options.per_layer_layers, self.extractor.num_layers + 1)
        """The hidden states that get per-layer scores (resolved ``options.per_layer_layers``)."""
        self.memory = MemoryPlan.of(
            options.memory_budget_mb, options.caps, self.extractor.num_layers + 1, self.extractor.hidden_size
        )
        """How the memory budget is shared between the stores and the reads out of them."""
        half = self.memory.stores_mb / 2
        self.store = VectorStore(half, options.store_dtype, options.spill_dir)
        self.sample = LRDSample(
            options.caps, options.seed, VectorStore(half, options.store_dtype, options.spill_dir)
        )
        self.background = BackgroundDynamics()
        meta = model_meta(self.inner, self.extractor.loaded.architecture.model, name, revision)
        label = scoring_settings(
            asdict(extraction)
        )  # other embeddings: beside the model's results, never over them
        if self.extractor.template is not None:
            label["template"] = template_label(self.extractor.template)
        if label:
            meta = meta.model_copy(
                update={"experiment_kwargs": {**dict(meta.experiment_kwargs or {}), **label}}
            )
        self.mteb_model_meta = meta
        on = self.extractor.device
        self.score_device: Any = on if on.type != "cpu" else None
        """Where per-layer retrieval searches run (the model's accelerator; ``None``: numpy on the CPU)."""
        self.calls: dict[CallKey, list[tuple[PromptType | None, list[TextKey]]]] = {}
        self.last_states_info: dict[str, Any] = {}
        self.loaded_by: str | None = None
        """Which loader loaded the model, when a run knows it (recorded with the layer dynamics)."""
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
        return plain_run_prompt(self.inner, task_metadata, prompt_type)

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
        """One forward pass per batch of distinct texts; returns the model's own embeddings, keeps every layer."""
        seams.install_seams()  # task classes defined since the wrapper was built
        texts = read_texts(inputs)
        task_type = str(task_metadata.type)
        name = task_metadata.name
        if name != self._current_task:
            self._enter_task(name)
        batch_size = int(kwargs.get("batch_size") or self.options.default_batch_size)
        self.extractor.batch_size = batch_size
        self.extractor.shard_size = self._shard_size(batch_size)
        self.extractor.show_progress_bar = bool(kwargs.get("show_progress_bar", False))
        prompt = self.resolve_prompt(task_metadata, prompt_type)
        supported = task_type in SUPPORTED_TASK_TYPES
        if not supported:
            self.warn_unsupported(name, task_type)
        keys = [(prompt or "", text) for text in texts]
        try:
            evaluated = hf_split in (task_metadata.eval_splits or [hf_split])  # not a training split
            embeddings = self._encode_and_keep(
                texts, keys, prompt, supported, task_type, prompt_type, evaluated
            )
        except BaseException:
            self.clear()  # frees a spilled file now, not at the next task
            raise
        if supported:
            self.calls.setdefault((name, hf_split, hf_subset), []).append((prompt_type, keys))
            template = self.extractor.template
            self.last_states_info = {
                **({"loaded_by": self.loaded_by} if self.loaded_by is not None else {}),
                "pooling": self.extractor.pooling,
                "final_norm": self.extractor.final_norm,
                **({"template": template} if template is not None else {}),
            }
        return embeddings

    def _encode_and_keep(
        self,
        texts: list[str],
        keys: list[TextKey],
        prompt: str | None,
        supported: bool,
        task_type: str,
        prompt_type: PromptType | None,
        evaluated: bool = True,
    ) -> np.ndarray:
        """The embeddings of ``texts``; keeps the chosen states of every text and every state of the
        texts the layer dynamics sample, one shard at a time (a call's vectors are never held together).
        The layer dynamics sample only texts of an evaluation split (``evaluated``): a classification
        task also encodes its training split, whose per-layer vectors train each layer's classifier."""
        per_layer = supported and self.options.per_layer
        lrd = self.options.layer_dynamics and evaluated and is_lrd_call(task_type, prompt_type)
        sampled = supported and lrd
        if sampled and self.background.pending:  # more texts than expected: nothing may read meanwhile
            self.background.wait()
        full_rows = self.sample.admit(keys) if sampled else np.zeros(len(keys), dtype=bool)
        keep = KeptStates(self.layers if per_layer else (), full_rows, self.options.store_dtype)
        embeddings: np.ndarray | None = None
        for positions, shard in self.extractor.iter_shards(texts, prompt=prompt, keep=keep):
            if embeddings is None:
                final = shard["embeddings"]
                embeddings = np.empty((len(texts), *final.shape[1:]), dtype=final.dtype)
            embeddings[positions] = shard["embeddings"]
            shard_keys = [keys[i] for i in positions]
            if per_layer:
                self.store.add(shard_keys, shard["layers"])
            if sampled:
                kept = [key for key, full in zip(shard_keys, full_rows[positions], strict=True) if full]
                self.sample.record(shard_keys, shard["valid"], kept, shard["full"])
        if embeddings is None:
            raise ValueError("texts is empty: nothing to encode")
        if sampled and self.options.background_lrd and len(self.sample) == self.sample.expected:
            self.background.start(self.sample, self.options.params)  # every expected text is in
        return embeddings

    def plan_subset(self, task_name: str, expected_texts: int | None) -> None:
        """Before a subset of task ``task_name`` is encoded: the number of distinct texts its layer
        dynamics will see (``None``: unknown), so that only the rows their draw picks keep every state."""
        self._enter_task(task_name)
        self.sample.plan(expected_texts)

    def _enter_task(self, task_name: str) -> None:
        """Start on a subset of ``task_name`` with empty stores (warns about a task left unaugmented)."""
        if task_name != self._current_task:
            self._warn_unaugmented()
            self._current_task = task_name
        self.clear()

    def search_device(self, task_type: str) -> Any:
        """Where a task's per-layer vectors are scored: :attr:`score_device` for retrieval and
        reranking searches (torch tensors), ``None`` (numpy on the CPU) for every other task type."""
        return self.score_device if task_type in DOCUMENT_TYPES else None

    @property
    def peak_spill_bytes(self) -> int:
        """The most bytes each store's spill file held so far, summed (an upper bound of the disk
        the spill used at once)."""
        return self.store.peak_bytes_on_disk + self.sample.store.peak_bytes_on_disk

    def clear(self) -> None:
        """Forget the current task's vectors and calls (frees spilled files)."""
        self.background.clear()
        self.store.clear()
        self.sample.clear()
        self.calls.clear()

    def reencode(self, keys: list[TextKey]) -> None:
        """Every state of ``keys`` (texts the layer dynamics sample but whose states were not kept),
        encoded again and kept in the sample."""
        by_prompt: dict[str, list[str]] = {}
        for prompt, text in keys:
            by_prompt.setdefault(prompt, []).append(text)
        for prompt, texts in by_prompt.items():
            for positions, shard in self.extractor.iter_shards(texts, prompt=prompt or None):
                self.sample.store.add([(prompt, texts[i]) for i in positions], shard["states"])

    def _shard_size(self, batch_size: int) -> int:
        """Texts per extraction shard, whole batches: the option rounded up to them, else <= 1024
        texts and ~64 MB. A shard that cut a batch would change which texts share a forward pass,
        hence the padded lengths and the last bits of the embeddings a plain run returns."""
        if self.options.shard_size is not None:
            return -(-self.options.shard_size // batch_size) * batch_size
        per_text = (self.extractor.num_layers + 1) * self.extractor.hidden_size * 4
        texts = min(1024, max(1, _SHARD_BYTES // per_text))
        return max(1, texts // batch_size) * batch_size

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

    def layer_view(self, layer: int, texts: TextReader | None = None) -> LayerView:
        """An encoder serving hidden state ``layer`` (one of :attr:`layers`) from the stored vectors
        (``texts``: see :class:`LayerView`).

        Raises:
            ValueError: for a state that was not kept.
        """
        if layer not in self.layers:
            raise ValueError(f"hidden state {layer} was not kept; per-layer states: {list(self.layers)}")
        return LayerView(self, layer, texts)


class LayerView:
    """An mteb encoder that returns the stored pooled vectors of one layer (no forward pass).

    Args:
        parent: the wrapper that encoded the texts.
        layer: hidden-state index ``0..L``.
        texts: how the texts of an input are read (default :func:`read_texts`; the per-layer loop
            reads each dataloader once for all layers).
    """

    def __init__(self, parent: LayerDynamicsModel, layer: int, texts: TextReader | None = None) -> None:
        self.parent = parent
        self.layer = layer
        self.texts = texts or read_texts
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
    ) -> Any:
        """Vectors of ``self.layer`` for the texts of ``inputs`` (a numpy array; for retrieval and
        reranking searches, a torch tensor on the parent's :attr:`~LayerDynamicsModel.score_device`
        when it has one).

        Raises:
            KeyError: when a text was not encoded by the parent (it would need a forward pass).
        """
        parent = self.parent
        prompt = parent.resolve_prompt(task_metadata, prompt_type) or ""
        stored = parent.layers.index(self.layer)
        vectors = parent.store.layer(stored, [(prompt, text) for text in self.texts(inputs)])
        device = parent.search_device(str(task_metadata.type))
        if device is not None:
            import torch  # mteb's searches score torch tensors where they are: on the model's GPU

            return torch.from_numpy(vectors).to(device)
        return vectors

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
    template: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    name: str | None = None,
    revision: str | None = None,
    options: LayerDynamicsOptions | None = None,
    **fields: Any,
) -> LayerDynamicsModel:
    """Wrap a model so that ``mteb.evaluate`` also writes ``layer_dynamics`` and ``per_layer``.

    Args:
        model: a SentenceTransformer, an mteb encoder around one (e.g. a pruned model from
            :func:`mteb_lrd.prune`), a transformers model, or a path / name of either.
        tokenizer: tokenizer of a plain transformers model (decoders: pass it explicitly).
        pooling / final_norm / device / dtype / max_length / template: see
            :class:`~mteb_lrd.LayerExtractor` (``template="prompteol"`` scores and measures a decoder
            on PromptEOL-wrapped texts; mteb stores its results as an experiment of the model,
            ``<model>/<revision>/experiments/template_prompteol/``, beside the plain run's).
        cache_dir: folder of the resumable extraction cache: every shard of per-layer vectors is
            saved there, so a run killed inside a task recomputes only the missing shards
            (``None``: no cache).
        name / revision: model name and revision for mteb results (default: the model's own).
        options: every setting below as one :class:`~mteb_lrd.adapter.options.LayerDynamicsOptions`
            (then give no ``**fields``).
        **fields: fields of :class:`~mteb_lrd.adapter.options.LayerDynamicsOptions` (caps, seed,
            metric parameters, ``per_layer=False`` to skip the per-layer scores,
            ``per_layer_layers`` to choose the states that get them, ``memory_budget_mb``,
            ``store_dtype``, ``spill_dir``, ...).

    Returns:
        An mteb encoder; pass it to ``mteb.evaluate`` like any model.

    Raises:
        ValueError: for unknown or invalid options (also a ``per_layer_layers`` index beyond ``h_L``).
        SeamError: when the installed mteb lacks a private name the integration needs.

    Example:
        >>> wrapped = with_layer_dynamics(SentenceTransformer("all-MiniLM-L6-v2"))
        >>> mteb.evaluate(wrapped, mteb.get_tasks(tasks=["STSBenchmark"]))
    """
    if options is not None and fields:
        raise ValueError(
            f"pass either options= or option keywords, not both (keywords given: {sorted(fields)})"
        )
    opts = options if options is not None else LayerDynamicsOptions.from_kwargs(fields)
    extraction = ExtractionOptions(
        pooling=pooling, final_norm=final_norm, dtype=dtype, max_length=max_length, template=template,
        batch_size=opts.default_batch_size, show_progress_bar=False,
        cache_dir=None if cache_dir is None else os.fspath(cache_dir),
    )  # fmt: skip
    seams.install_seams()
    return LayerDynamicsModel(
        model, extraction, opts, tokenizer=tokenizer, device=device, name=name, revision=revision
    )
