"""Models → the pooled, L2-normalised vector of every hidden state ``h_0 .. h_L``, in one pass.

One forward pass per batch yields every layer (the reference re-runs the model once per 8
layers). SentenceTransformers go through their own pipeline (same tokenisation, same length-sorted
batches, same modules) so the final embedding is the one ``encode`` returns, and each layer is
pooled with the model's own pooling module. Plain transformers models pool with mean (encoders)
or the last token (decoders, left padding). Results can be cached on disk in shards, so an
interrupted run resumes where it stopped.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from mteb_lrd import _compat
from mteb_lrd.extraction.cache import ArrayCache
from mteb_lrd.extraction.identity import model_identity
from mteb_lrd.extraction.loading import load_model, resolve_device, resolve_dtype
from mteb_lrd.extraction.pooling import POOLINGS, pool
from mteb_lrd.io import content_key, texts_digest

__all__ = [
    "FINAL_NORMS",
    "LayerStates",
    "LayerExtractor",
    "extract_layer_states",
    "clean_texts",
]

FINAL_NORMS: tuple[str, ...] = ("as_is", "all", "none")
_CACHE_FORMAT = 1


@dataclass(frozen=True)
class LayerStates:
    """Pooled vectors of every hidden state for a list of texts.

    Attributes:
        states: ``(L+1, N, d)`` float32, rows L2-normalised; index 0 is the embedding output.
        embeddings: ``(N, D)`` float32, the model's own output for the texts (what
            ``SentenceTransformer.encode`` returns; the unnormalised last-layer pooled vector for a
            plain transformers model).
        pooling: the pooling used at every layer.
        final_norm: the decoder final-norm convention (``as_is``: only ``h_L`` normed, as
            transformers returns it; ``all``; ``none``); ``n/a`` for models without one.
        n_empty_replaced: empty or whitespace-only texts replaced by ``" "``.
        n_duplicates: texts equal to an earlier text (kept; metrics exclude self by index).
        texts_sha256: digest of the texts as given.
    """

    states: np.ndarray
    embeddings: np.ndarray
    pooling: str
    final_norm: str
    n_empty_replaced: int
    n_duplicates: int
    texts_sha256: str

    @property
    def num_layers(self) -> int:
        """``L``: number of blocks; there are ``L+1`` hidden states."""
        return self.states.shape[0] - 1


def clean_texts(texts: Sequence[str]) -> tuple[list[str], int]:
    """Replace empty / whitespace-only texts by ``" "`` as the reference does; count them.

    Raises:
        TypeError: when ``texts`` is a single string or holds non-strings.
    """
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings, not a single string")
    out, replaced = [], 0
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] is {type(text).__name__}, expected str")
        if not text.strip():
            replaced += 1
            text = " "
        out.append(text)
    return out, replaced


class LayerExtractor:
    """Extracts pooled vectors of every layer with one forward pass per batch.

    Args:
        model: a SentenceTransformer, a transformers model, or a path / name of either.
        tokenizer: the tokenizer of a plain transformers model (loaded from the model when omitted).
        pooling: ``"auto"`` (the SentenceTransformer's own pooling; mean for plain encoders; last
            token for decoders) or one of ``"mean"``, ``"cls"``, ``"last"`` for plain models.
        final_norm: decoders only: ``"as_is"`` (default, as transformers returns it: the final norm
            on ``h_L`` only), ``"all"`` (final norm on every hidden state) or ``"none"`` (no final
            norm, ``h_L`` is the raw last block output).
        batch_size: texts per forward pass.
        device: ``None`` → cuda when available, else cpu.
        dtype: compute dtype (``None`` keeps the model's).
        max_length: truncation length for plain transformers models.
        show_progress_bar: a tqdm bar over batches.
        cache_dir: folder for the resumable on-disk cache; ``None`` disables it.
        shard_size: texts per cache shard (a resumed run recomputes at most one shard).

    Raises:
        ValueError: for invalid options. UnsupportedArchitectureError: for unknown architectures.
    """

    def __init__(
        self,
        model: object,
        tokenizer: object = None,
        *,
        pooling: str = "auto",
        final_norm: str = "as_is",
        batch_size: int = 32,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype | None = None,
        max_length: int = 512,
        show_progress_bar: bool = True,
        cache_dir: str | None = None,
        shard_size: int = 1024,
    ) -> None:
        if pooling != "auto" and pooling not in POOLINGS:
            raise ValueError(f"pooling must be 'auto' or one of {POOLINGS}; got {pooling!r}")
        if final_norm not in FINAL_NORMS:
            raise ValueError(f"final_norm must be one of {FINAL_NORMS}; got {final_norm!r}")
        for name, value in (
            ("batch_size", batch_size),
            ("max_length", max_length),
            ("shard_size", shard_size),
        ):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer; got {value!r}")
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype)
        self.loaded = load_model(model, tokenizer, device=self.device, dtype=self.dtype)
        if self.loaded.is_sentence_transformer:
            if pooling != "auto":
                raise ValueError("a SentenceTransformer uses its own pooling module: leave pooling='auto'")
            self._pooling_module = self._find_pooling_module()
            self.pooling = f"sentence-transformers:{self._pooling_module.pooling_mode}"
        else:
            self._pooling_module = None
            default = "last" if self.loaded.architecture.spec.causal else "mean"
            self.pooling = default if pooling == "auto" else pooling
        self.final_norm = final_norm if self.loaded.architecture.final_norm is not None else "n/a"
        self.batch_size = batch_size
        self.max_length = max_length
        self.show_progress_bar = show_progress_bar
        self.cache = ArrayCache(os.path.expanduser(cache_dir)) if cache_dir is not None else None
        self.shard_size = shard_size
        self._identity: str | None = None

    # -- properties -------------------------------------------------------------------------
    @property
    def num_layers(self) -> int:
        """``L``: the number of transformer blocks."""
        return self.loaded.architecture.num_blocks

    @property
    def hidden_size(self) -> int:
        """Width ``d`` of the hidden states."""
        return int(self.loaded.architecture.model.config.hidden_size)

    @property
    def is_sentence_transformer(self) -> bool:
        """Whether the model is a SentenceTransformer."""
        return self.loaded.is_sentence_transformer

    @property
    def identity(self) -> str:
        """A digest of the model (name, config, sampled weights, pipeline) for cache keys."""
        if self._identity is None:
            self._identity = model_identity(self.loaded)
        return self._identity

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
        if not cleaned:
            raise ValueError("texts is empty: nothing to extract")
        if prompt is None and self.is_sentence_transformer:
            st = self.loaded.model
            prompt = st.prompts.get(st.default_prompt_name) if st.default_prompt_name else None
        order = self._length_order(cleaned)
        sorted_texts = [cleaned[i] for i in order]
        key = self._cache_key(sorted_texts, prompt) if self.cache is not None else None
        shards = []
        starts = range(0, len(sorted_texts), self.shard_size)
        bar = tqdm(total=len(sorted_texts), desc="layers", unit="text", disable=not self.show_progress_bar)
        with bar, self._hidden_states_enabled():
            for shard_index, start in enumerate(starts):
                chunk = sorted_texts[start : start + self.shard_size]
                shard = self.cache.load(f"{key}-{shard_index}") if key else None
                if shard is None:
                    shard = self._run_shard(chunk, prompt, bar)
                    if key:
                        self.cache.save(f"{key}-{shard_index}", shard)
                else:
                    bar.update(len(chunk))
                shards.append(shard)
        inverse = np.argsort(order)
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

    def _length_order(self, texts: list[str]) -> np.ndarray:
        # The SentenceTransformer's own order makes our batches — and so its embeddings — identical
        # to those of ``encode``.
        length = _compat.input_length(self.loaded.model) if self.is_sentence_transformer else None
        return np.argsort([-(length(t) if length else len(t)) for t in texts])

    def _cache_key(self, sorted_texts: list[str], prompt: str | None) -> str:
        return content_key(
            {
                "format": _CACHE_FORMAT,
                "model": self.identity,
                "layers": "all",
                "pooling": self.pooling,
                "final_norm": self.final_norm,
                "max_length": self.max_length,
                "batch_size": self.batch_size,
                "dtype": str(self.dtype),
                "prompt": prompt,
                "shard_size": self.shard_size,
                "texts": texts_digest(sorted_texts),
            }
        )

    def _run_shard(self, texts: list[str], prompt: str | None, bar: tqdm) -> dict[str, np.ndarray]:
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
        with self._capture_pre_norm() as captured:
            if self.is_sentence_transformer:
                hidden, mask, final, features = self._forward_sentence_transformer(batch, prompt)
            else:
                hidden, mask = self._forward_transformers(batch, prompt)
                final, features = None, None
        hidden = self._apply_final_norm(list(hidden), captured)
        if self._pooling_module is not None:
            pooled = [
                self._pooling_module({**features, "token_embeddings": h})["sentence_embedding"]
                for h in hidden
            ]
            pooled = torch.stack([p.float() for p in pooled])
        else:
            pooled = torch.stack([pool(h, mask, self.pooling) for h in hidden])
        if final is None:
            final = pooled[-1]
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
        tokenizer = self.loaded.tokenizer
        causal = self.loaded.architecture.spec.causal
        if causal and tokenizer.pad_token is None:
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
        enc = {
            k: v.to(self.device)
            for k, v in enc.items()
            if k in ("input_ids", "attention_mask", "token_type_ids")
        }
        kwargs: dict[str, Any] = {"output_hidden_states": True, "return_dict": True}
        if causal:
            kwargs["use_cache"] = False
            # Left padding shifts absolute positions: count them from each text's first real token
            # so that a text's vectors do not depend on its batch (GPT-2 learns absolute positions).
            kwargs["position_ids"] = (enc["attention_mask"].cumsum(-1) - 1).clamp(min=0)
        out = self.loaded.model(**enc, **kwargs)
        return out.hidden_states, enc["attention_mask"]

    # -- final norm conventions ---------------------------------------------------------------
    @contextlib.contextmanager
    def _capture_pre_norm(self) -> Iterator[dict[str, torch.Tensor]]:
        """With ``final_norm="none"``, keep the input of the final norm (the raw ``h_L``)."""
        captured: dict[str, torch.Tensor] = {}
        norm = self.loaded.architecture.final_norm
        if self.final_norm != "none" or norm is None:
            yield captured
            return

        def hook(_module: torch.nn.Module, args: tuple[Any, ...]) -> None:
            captured["raw_last"] = args[0]

        handle = norm.register_forward_pre_hook(hook)
        try:
            yield captured
        finally:
            handle.remove()

    def _apply_final_norm(
        self, hidden: list[torch.Tensor], captured: dict[str, torch.Tensor]
    ) -> list[torch.Tensor]:
        norm = self.loaded.architecture.final_norm
        if self.final_norm == "none" and norm is not None:
            hidden[-1] = captured["raw_last"]
        elif self.final_norm == "all" and norm is not None:
            hidden = [norm(h) for h in hidden[:-1]] + [hidden[-1]]
        return hidden

    @contextlib.contextmanager
    def _hidden_states_enabled(self) -> Iterator[None]:
        """Make the SentenceTransformer's backbone return all hidden states, and restore the config."""
        config = self.loaded.architecture.model.config
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
            "final_norm": self.final_norm,
            "max_length": self.max_length,
            "dtype": str(self.dtype or next(self.loaded.architecture.model.parameters()).dtype),
            "device": str(self.device),
        }


def extract_layer_states(
    model: object, texts: Sequence[str], *, prompt: str | None = None, **kwargs: Any
) -> LayerStates:
    """One-call form: ``LayerExtractor(model, **kwargs).extract(texts, prompt=prompt)``."""
    return LayerExtractor(model, **kwargs).extract(texts, prompt=prompt)
