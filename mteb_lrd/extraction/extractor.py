"""Models → the pooled, L2-normalised vector of every hidden state ``h_0 .. h_L``, in one pass.

One forward pass per batch yields every layer (the reference re-runs the model once per 8
layers). SentenceTransformers go through their own pipeline (same tokenisation, same length-sorted
batches, same modules, truncation at ``min(max_length, max_seq_length)``) so the final embedding is
the one ``encode`` returns, and each layer is pooled with the model's own pooling module. Plain
transformers models pool as :func:`~mteb_lrd.extraction.pooling.resolve_pooling` decides (an
override, the model's sentence-transformers pooling config, else mean for encoders and the last
token for decoders, left padding). Results can be cached on disk in shards, so an interrupted run
resumes where it stopped.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from mteb_lrd import _compat
from mteb_lrd.extraction.cache import ArrayCache
from mteb_lrd.extraction.final_norm import FINAL_NORMS, apply_final_norm, capture_pre_norm
from mteb_lrd.extraction.identity import model_identity, state_fingerprint
from mteb_lrd.extraction.kept_states import KeptStates
from mteb_lrd.extraction.layer_states import LayerStates, clean_texts
from mteb_lrd.extraction.loading import (
    load_model,
    resolve_device,
    resolve_dtype,
    sentence_transformers_pooling_config,
)
from mteb_lrd.extraction.options import ExtractionOptions
from mteb_lrd.extraction.pooling import (
    pool,
    resolve_pooling,
)
from mteb_lrd.extraction.templates import apply_template, resolve_template
from mteb_lrd.io import content_key, texts_digest
from mteb_lrd.keywords import options_or_keywords
from mteb_lrd.progress import Progress

__all__ = [
    "FINAL_NORMS",
    "ExtractionOptions",
    "REFERENCE_DECODER_BATCH",
    "LayerStates",
    "LayerExtractor",
    "extract_layer_states",
    "clean_texts",
]

_CACHE_FORMAT = 1
REFERENCE_DECODER_BATCH = 4
"""Batch size of the authors' decoder extraction; ``last_token="reference"`` uses it."""


class LayerExtractor:
    """Extracts pooled vectors of every layer with one forward pass per batch.

    Args:
        model: a SentenceTransformer, a transformers model, or a path / name of either.
        tokenizer: the tokenizer of a plain transformers model (loaded from the model when omitted).
        pooling: ``"auto"`` (the SentenceTransformer's own pooling; for plain models
            :func:`~mteb_lrd.extraction.pooling.resolve_pooling`: an override, the model's
            sentence-transformers pooling config, else mean for encoders (with a warning) and the
            last token for decoders) or one of ``"mean"``, ``"cls"``, ``"last"`` for plain models.
        pooling_overrides: ``None``, ``"reference"`` (the authors' table
            :data:`~mteb_lrd.extraction.pooling.REFERENCE_POOLING_OVERRIDES`: bge / gte /
            arctic / mxbai → CLS, GritLM → mean) or a ``{model id: mode}`` mapping; used with
            ``pooling="auto"`` for plain models.
        last_token: decoders pooled with ``"last"``: ``"true"`` (default, the last real token) or
            ``"reference"`` (the authors' rule, reproduced exactly: texts in the given order in
            left-padded batches of :data:`REFERENCE_DECODER_BATCH`, default positions, position
            ``mask.sum(1) - 1``, a pad or mid-text token for every text shorter than the longest
            of its batch). Recorded as ``"n/a"`` where it does not apply.
        final_norm: decoders only: ``"as_is"`` (default, as transformers returns it: the final norm
            on ``h_L`` only), ``"all"`` (final norm on every hidden state) or ``"none"`` (no final
            norm, ``h_L`` is the raw last block output).
        batch_size: texts per forward pass.
        device: ``None`` → a loaded model's own device (it is not moved); for a path or name, cuda
            when available, else cpu.
        dtype: compute dtype (``None`` keeps the model's).
        max_length: truncation length; a SentenceTransformer truncates at the smaller of it and its
            own ``max_seq_length`` (what was used is ``self.max_length``).
        show_progress_bar: a tqdm bar over batches.
        cache_dir: folder for the resumable on-disk cache; ``None`` disables it.
        shard_size: texts per cache shard (a resumed run recomputes at most one shard).
        template: put every text into this template before the prompt and tokenisation: a name
            of :data:`~mteb_lrd.extraction.templates.TEMPLATES` (``"prompteol"``) or a text with
            one ``{text}``; ``None`` keeps the texts as they are. Decoders pooled at the last token
            need one to embed sentences.
        options: the same settings as one
            :class:`~mteb_lrd.extraction.options.ExtractionOptions` (then leave the keywords
            above at their defaults).

    Raises:
        ValueError: for invalid options. UnsupportedArchitectureError: for unknown architectures.
    """

    def __init__(
        self,
        model: object,
        tokenizer: object = None,
        *,
        pooling: str = "auto",
        pooling_overrides: str | Mapping[str, str] | None = None,
        last_token: str = "true",
        final_norm: str = "as_is",
        batch_size: int = 32,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype | None = None,
        max_length: int = 512,
        show_progress_bar: bool = True,
        cache_dir: str | None = None,
        shard_size: int = 1024,
        template: str | None = None,
        options: ExtractionOptions | None = None,
    ) -> None:
        opts = options_or_keywords(
            ExtractionOptions, options, pooling=pooling, pooling_overrides=pooling_overrides, last_token=last_token,
            final_norm=final_norm, batch_size=batch_size, dtype=dtype, max_length=max_length,
            show_progress_bar=show_progress_bar, cache_dir=cache_dir, shard_size=shard_size, template=template,
        )  # fmt: skip
        self.options = opts
        """The extraction options as given (:class:`~mteb_lrd.extraction.options.ExtractionOptions`)."""
        self.template = resolve_template(opts.template)
        self.device = resolve_device(device, model)
        self.dtype = resolve_dtype(opts.dtype)
        self.loaded = load_model(model, tokenizer, device=self.device, dtype=self.dtype)
        max_length = opts.max_length
        if self.loaded.is_sentence_transformer:
            if opts.pooling != "auto":
                raise ValueError("a SentenceTransformer uses its own pooling module: leave pooling='auto'")
            self._pooling_module = self._find_pooling_module()
            self.pooling = f"sentence-transformers:{self._pooling_module.pooling_mode}"
            self.pooling_source = "sentence-transformers pipeline"
            own = self.loaded.model.max_seq_length
            max_length = min(max_length, int(own)) if own else max_length
        else:
            self._pooling_module = None
            self.pooling, self.pooling_source = self._plain_pooling(opts.pooling, opts.pooling_overrides)
        self.final_norm = opts.final_norm if self.loaded.architecture.final_norm is not None else "n/a"
        self.last_token = opts.last_token if self.pooling == "last" else "n/a"
        self.batch_size = REFERENCE_DECODER_BATCH if self.last_token == "reference" else opts.batch_size
        self.max_length = max_length
        self.show_progress_bar = opts.show_progress_bar
        self.cache = ArrayCache(os.path.expanduser(opts.cache_dir)) if opts.cache_dir is not None else None
        self.shard_size = opts.shard_size
        self._identity: tuple[Any, str] | None = None

    def _plain_pooling(self, pooling: str, overrides: Mapping[str, str] | None) -> tuple[str, str]:
        if pooling != "auto":
            return pooling, "explicit"
        causal = self.loaded.architecture.spec.causal
        name = self.loaded.name
        mode, source = resolve_pooling(name, causal, sentence_transformers_pooling_config(name), overrides)
        if source == "architecture default" and not causal:
            warnings.warn(
                f"mteb-lrd: no sentence-transformers pooling config found for {name!r}: pooling with "
                "the mean of the token states; pass pooling='cls' (or pooling_overrides='reference') "
                "if the model was trained with CLS pooling",
                UserWarning,
                stacklevel=3,
            )
        return mode, source

    # -- properties -------------------------------------------------------------------------
    @property
    def num_layers(self) -> int:
        """``L``: the number of transformer blocks."""
        return self.loaded.architecture.num_blocks

    @property
    def hidden_size(self) -> int:
        """Width ``d`` of the hidden states."""
        config: Any = self.loaded.architecture.model.config
        return int(config.hidden_size)

    @property
    def is_sentence_transformer(self) -> bool:
        """Whether the model is a SentenceTransformer."""
        return self.loaded.is_sentence_transformer

    @property
    def identity(self) -> str:
        """A digest of the model (name, config, tokenizer, every weight, pipeline) for cache keys,
        computed again whenever the model or its tokenizer changed since (:func:`state_fingerprint`)."""
        fingerprint = state_fingerprint(self.loaded)
        if self._identity is None or self._identity[0] != fingerprint:
            self._identity = (fingerprint, model_identity(self.loaded))
        return self._identity[1]

    # -- extraction -------------------------------------------------------------------------
    def extract(self, texts: Sequence[str], *, prompt: str | None = None) -> LayerStates:
        """Pooled, L2-normalised vectors of every hidden state for ``texts``.

        Args:
            texts: the texts; empty ones become ``" "`` (counted).
            prompt: an instruction prepended the way the model does it (SentenceTransformer's
                ``prompt=``); for SentenceTransformers ``None`` falls back to its default prompt.

        Raises:
            TypeError: for non-string texts. ValueError: for an empty list.
        """
        cleaned, n_empty = clean_texts(texts)
        positions, shards = [], []
        for shard_positions, shard in self.iter_shards(cleaned, prompt=prompt):
            positions.append(shard_positions)
            shards.append(shard)
        inverse = np.argsort(np.concatenate(positions))
        states = np.concatenate([s["states"] for s in shards], axis=1)[:, inverse]
        embeddings = np.concatenate([s["embeddings"] for s in shards], axis=0)[inverse]
        return LayerStates(
            states=states,
            embeddings=embeddings,
            pooling=self.pooling,
            final_norm=self.final_norm,
            n_empty_replaced=n_empty,
            n_duplicates=len(cleaned) - len(set(cleaned)),
            texts_sha256=texts_digest(list(texts)),
        )

    def iter_shards(
        self, texts: Sequence[str], *, prompt: str | None = None, keep: KeptStates | None = None
    ) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
        """:meth:`extract` one shard at a time, so that a caller never holds every vector at once.

        Args:
            texts: the texts. prompt: as in :meth:`extract`.
            keep: keep only these states (:class:`KeptStates`); the cache then holds only them too.

        Yields:
            ``(positions, {"states": (L+1, n, d), "embeddings": (n, D)})`` per shard of
            ``shard_size`` texts in the model's length order; ``positions`` are the shard's indices
            into ``texts``. With ``keep``: ``{"embeddings", "valid", "layers", "full"}`` (see
            :meth:`KeptStates.reduce`). With a cache, a shard computed before is loaded instead of
            recomputed.

        Raises:
            TypeError: for non-string texts. ValueError: for an empty list.
        """
        cleaned, _ = clean_texts(texts)
        if not cleaned:
            raise ValueError("texts is empty: nothing to extract")
        if prompt is None and self.is_sentence_transformer:
            st = self.loaded.model
            prompt = st.prompts.get(st.default_prompt_name) if st.default_prompt_name else None
        order = self._length_order(cleaned)
        sorted_texts = [cleaned[i] for i in order]
        cache = self.cache
        key = (
            self._cache_key(sorted_texts, prompt, keep.digest(order) if keep else None)
            if cache is not None
            else ""
        )
        starts = range(0, len(sorted_texts), self.shard_size)
        bar: Progress[Any] = Progress(
            total=len(sorted_texts), desc="layers", unit="text", show=self.show_progress_bar
        )
        with bar, self._hidden_states_enabled(), self._truncation():
            for shard_index, start in enumerate(starts):
                chunk = sorted_texts[start : start + self.shard_size]
                positions = order[start : start + self.shard_size]
                shard = cache.load(f"{key}-{shard_index}", rows=len(chunk)) if cache is not None else None
                if shard is None:
                    shard = self._run_shard(chunk, prompt, bar)
                    if keep is not None:
                        shard = keep.reduce(shard, positions)
                    if cache is not None:
                        cache.save(f"{key}-{shard_index}", shard, rows=len(chunk))
                else:
                    bar.update(len(chunk))
                yield positions, shard

    def _length_order(self, texts: list[str]) -> np.ndarray:
        # The SentenceTransformer's own order makes our batches — and so its embeddings — identical
        # to those of ``encode``. The authors' last-token rule depends on the batches: keep their
        # (given) order.
        if self.last_token == "reference":
            return np.arange(len(texts))
        if self.is_sentence_transformer:
            return _compat.encode_order(self.loaded.model, texts)
        return np.argsort([-len(t) for t in texts])

    def _cache_key(self, sorted_texts: list[str], prompt: str | None, kept: str | None = None) -> str:
        templated = {"template": self.template} if self.template is not None else {}
        return content_key(
            {
                **templated,  # absent without one: caches written before templates stay valid
                "format": _CACHE_FORMAT,
                "model": self.identity,
                "layers": "all" if kept is None else kept,
                "pooling": self.pooling,
                "last_token": self.last_token,
                "final_norm": self.final_norm,
                "max_length": self.max_length,
                "batch_size": self.batch_size,
                "dtype": str(self.dtype),
                "prompt": prompt,
                "shard_size": self.shard_size,
                "texts": texts_digest(sorted_texts),
            }
        )

    def _run_shard(self, texts: list[str], prompt: str | None, bar: Progress[Any]) -> dict[str, np.ndarray]:
        layers, finals = [], []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            per_layer, final = self._forward(batch, prompt)
            layers.append(per_layer)
            finals.append(final)
            bar.update(len(batch))
        states = torch.cat(layers, dim=1)
        states = torch.nn.functional.normalize(states, p=2, dim=-1)
        return {"states": states.numpy(), "embeddings": torch.cat(finals).numpy()}

    @torch.inference_mode()
    def _forward(self, batch: list[str], prompt: str | None) -> tuple[torch.Tensor, torch.Tensor]:
        """One forward pass: ``((L+1, B, d) pooled fp32, (B, D) final embedding fp32)``, on CPU."""
        batch = apply_template(batch, self.template)
        with capture_pre_norm(self.loaded.architecture.final_norm, self.final_norm) as captured:
            if self.is_sentence_transformer:
                hidden, mask, final, features = self._forward_sentence_transformer(batch, prompt)
            else:
                hidden, mask = self._forward_transformers(batch, prompt)
                final, features = None, None
        own_last = hidden[-1]  # the model's own last state, whatever convention the layers follow
        hidden = apply_final_norm(
            list(hidden), self.loaded.architecture.final_norm, self.final_norm, captured
        )
        if self._pooling_module is not None:
            per_layer = [
                self._pooling_module({**features, "token_embeddings": h})["sentence_embedding"]
                for h in hidden
            ]
            pooled = torch.stack([p.float() for p in per_layer])
        else:
            rule = "reference" if self.last_token == "reference" else "true"
            pooled = torch.stack([pool(h, mask, self.pooling, rule) for h in hidden])
        if final is None:  # a plain model's own output: its last state pooled, as the layers are
            final = pooled[-1] if hidden[-1] is own_last else pool(own_last, mask, self.pooling, rule)
        return pooled.cpu(), final.float().cpu()

    def _forward_sentence_transformer(self, batch: list[str], prompt: str | None) -> tuple[Any, ...]:
        from sentence_transformers.util import batch_to_device

        st = self.loaded.model
        features = batch_to_device(st.preprocess(batch, prompt=prompt), self.device)
        out = st(features)
        if "all_layer_embeddings" not in out:
            raise RuntimeError("the SentenceTransformer's first module returned no all_layer_embeddings")
        return out["all_layer_embeddings"], out["attention_mask"], out["sentence_embedding"], out

    def _forward_transformers(self, batch: list[str], prompt: str | None) -> tuple[Any, torch.Tensor]:
        enc, kwargs = self._tokenized(batch, prompt)
        out = self.loaded.model(**enc, **kwargs, output_hidden_states=True, return_dict=True)
        return out.hidden_states, enc["attention_mask"]

    def _tokenized(
        self, batch: list[str], prompt: str | None
    ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """A plain model's inputs for ``batch`` (already templated): the tokenizer's tensors on the
        device, and the forward keywords (no KV cache; positions counted from each text's first token)."""
        tokenizer = self.loaded.tokenizer
        causal = self.loaded.architecture.spec.causal
        no_pad = causal and tokenizer.pad_token is None
        if no_pad:  # for this call only: the caller's tokenizer is left as it was
            tokenizer.pad_token = tokenizer.eos_token
        texts = [prompt + t for t in batch] if prompt else batch
        padding_side = tokenizer.padding_side
        tokenizer.padding_side = "left" if causal else padding_side
        try:
            enc = tokenizer(
                texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
            )
        finally:
            tokenizer.padding_side = padding_side
            if no_pad:
                tokenizer.pad_token = None
        enc = {
            k: v.to(self.device)
            for k, v in enc.items()
            if k in ("input_ids", "attention_mask", "token_type_ids")
        }
        kwargs: dict[str, Any] = {}
        if causal:
            kwargs["use_cache"] = False
        if causal and self.last_token != "reference":
            # Left padding shifts absolute positions: count them from each text's first real token
            # so that a text's vectors do not depend on its batch (GPT-2 learns absolute positions).
            kwargs["position_ids"] = (enc["attention_mask"].cumsum(-1) - 1).clamp(min=0)
        return enc, kwargs

    def batch_order(self, texts: Sequence[str]) -> np.ndarray:
        """The order in which :meth:`extract` batches ``texts`` (longest first; the given order for the
        authors' last-token rule)."""
        return self._length_order(list(texts))

    def embedding_pass(self, batch: Sequence[str], prompt: str | None = None) -> Callable[[], torch.Tensor]:
        """``batch`` prepared once (template, prompt, tokenisation) for a plain transformers model; each
        call of the result runs the model's base on it and returns the final embeddings ``(B, D)`` fp32
        that :meth:`extract` gives for a batch of these texts, without any per-layer state, so that
        blocks can be skipped or resumed between calls (:mod:`mteb_lrd.pruning.shared_prefix`).

        Raises:
            TypeError: for a SentenceTransformer (its own ``preprocess`` and modules embed it).
        """
        if self.is_sentence_transformer:
            raise TypeError(
                "embedding_pass is for plain transformers models; a SentenceTransformer embeds itself"
            )
        enc, kwargs = self._tokenized(apply_template(list(batch), self.template), prompt)
        rule = "reference" if self.last_token == "reference" else "true"
        model = self.loaded.architecture.model
        base = getattr(model, "base_model", model)  # a task head (a language model's) is not needed

        def run() -> torch.Tensor:
            with torch.inference_mode():
                out = base(**enc, **kwargs, return_dict=True)
            return pool(out.last_hidden_state, enc["attention_mask"], self.pooling, rule).float()

        return run

    @contextlib.contextmanager
    def _truncation(self) -> Iterator[None]:
        """A SentenceTransformer truncates at ``self.max_length`` during extraction; restored after."""
        if not self.is_sentence_transformer:
            yield
            return
        st = self.loaded.model
        previous = st.max_seq_length
        st.max_seq_length = self.max_length
        try:
            yield
        finally:
            st.max_seq_length = previous

    @contextlib.contextmanager
    def _hidden_states_enabled(self) -> Iterator[None]:
        """Make the SentenceTransformer's backbone return all hidden states, and restore the config."""
        config: Any = self.loaded.architecture.model.config
        previous = getattr(config, "output_hidden_states", False)
        if self.is_sentence_transformer:
            config.output_hidden_states = True
        try:
            yield
        finally:
            config.output_hidden_states = previous

    def _find_pooling_module(self) -> Any:
        from sentence_transformers.sentence_transformer.modules import Pooling

        for module in self.loaded.model:
            if isinstance(module, Pooling):
                return module
        raise ValueError(
            "this SentenceTransformer has no Pooling module; per-layer pooling needs one "
            f"(modules: {[type(m).__name__ for m in self.loaded.model]})"
        )

    def describe(self) -> dict[str, Any]:
        """What the extraction used, for result files (JSON-serialisable)."""
        return {
            "model": self.loaded.name,
            "num_layers": self.num_layers,
            "hidden_size": self.hidden_size,
            "pooling": self.pooling,
            "pooling_source": self.pooling_source,
            "last_token": self.last_token,
            "final_norm": self.final_norm,
            "max_length": self.max_length,
            "template": self.template,
            "batch_size": self.batch_size,
            "dtype": str(self.dtype or next(self.loaded.architecture.model.parameters()).dtype),
            "device": str(self.device),
        }


def extract_layer_states(
    model: object, texts: Sequence[str], *, prompt: str | None = None, **kwargs: Any
) -> LayerStates:
    """One-call form: ``LayerExtractor(model, **kwargs).extract(texts, prompt=prompt)``."""
    return LayerExtractor(model, **kwargs).extract(texts, prompt=prompt)
