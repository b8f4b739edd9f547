"""DySem's representation: sub-layer outputs of a decoder at the last prompt token, in one pass.

Forward hooks on every block's self-attention (after its output projection, before the residual
add) and MLP sum those outputs over the layers at the last non-padding token; hidden states come
from the same pass. Texts are run through the decoder's base model, not the LM head: logits over
a 262k vocabulary would cost more than the blocks of a small model. Each unique (prompted text,
component) is computed once and kept in a content-addressed on-disk store.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from mteb_lrd.dysem.representation_options import RepresentationOptions
from mteb_lrd.dysem.representation_store import RepresentationStore, text_key
from mteb_lrd.extraction.architectures import UnsupportedArchitectureError, locate
from mteb_lrd.extraction.identity import tokenizer_digest, weights_digest
from mteb_lrd.extraction.loading import load_pretrained, resolve_device
from mteb_lrd.keywords import options_or_keywords
from mteb_lrd.progress import Progress

__all__ = ["Component", "RepresentationExtractor", "COMPONENT_KINDS"]

COMPONENT_KINDS: tuple[str, ...] = ("attention", "mlp", "hidden", "mean")


@dataclass(frozen=True)
class Component:
    """What vector to take from the forward pass.

    Attributes:
        kind: ``"attention"`` — self-attention outputs summed over blocks, last token;
            ``"mlp"`` — MLP outputs summed over blocks, last token; ``"hidden"`` — the hidden
            state ``h_layer`` at the last token (``h_0`` = embeddings, ``h_L`` = after the final
            norm, as transformers returns it); ``"mean"`` — the attention-mask weighted mean over
            tokens of ``h_layer``.
        layer: for ``hidden`` / ``mean``: the hidden-state index, negative from the end
            (``-1`` = ``h_L``); ignored otherwise.
    """

    kind: str
    layer: int = -1

    @classmethod
    def parse(cls, spec: str | Component) -> Component:
        """Parse ``"attention"``, ``"mlp"``, ``"hidden"``, ``"hidden:12"``, ``"mean"`` or ``"mean:-2"``."""
        if isinstance(spec, Component):
            return spec
        kind, _, layer = str(spec).strip().partition(":")
        if kind not in COMPONENT_KINDS:
            raise ValueError(
                f"component must be one of {COMPONENT_KINDS} (optionally 'hidden:<layer>'), got {spec!r}"
            )
        if layer and kind in ("attention", "mlp"):
            raise ValueError(f"component {kind!r} is a sum over all blocks and takes no layer, got {spec!r}")
        try:
            index = int(layer) if layer else -1
        except ValueError:
            raise ValueError(f"the layer of component {spec!r} must be an integer") from None
        return cls(kind, index if kind in ("hidden", "mean") else -1)

    @property
    def key(self) -> str:
        """Canonical spelling (``"attention"``, ``"hidden:-1"``)."""
        return self.kind if self.kind in ("attention", "mlp") else f"{self.kind}:{self.layer}"


def _base_model(located: Any) -> nn.Module:
    """The decoder without its LM head: the parent of the block list's parent path."""
    parent_path = located.spec.blocks.rpartition(".")[0]
    module: Any = located.model
    for part in filter(None, parent_path.split(".")):
        module = getattr(module, part)
    return module


def _first_tensor(output: Any) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output


class RepresentationExtractor:
    """Sub-layer and hidden-state vectors of a causal LM at the last token, one forward pass per batch.

    Args:
        model: a transformers causal LM (Llama / Qwen2 / Mistral / Gemma / Phi / GPT-2 style), or
            a path to one.
        tokenizer: its tokenizer; loaded from ``model`` when it is a path. Padding is on the left;
            a missing pad token becomes the EOS token (the reference's rule).
        batch_size: texts per forward pass (texts are sorted by length first).
        max_length: truncation length in tokens.
        device: torch device; default: a model object's own device (it is not moved), for a path
            cuda when available, else cpu.
        dtype: torch dtype of the model's weights; default float32 (vectors are always float32).
        cache_dir: folder of the on-disk vector store; ``None`` keeps vectors in memory only.
        show_progress_bar: show a tqdm bar over batches.
        prefetch: components computed alongside any request that needs a forward pass, so one
            pass serves several models of a comparison (e.g. ``("attention", "hidden")`` for
            DySem, the attention-sum and PromptEOL baselines on the same prompts).
        checkpoint_texts: with a ``cache_dir``, new vectors are written to the store about every
            this many texts (rounded down to a multiple of ``batch_size``, at least one batch),
            so an interrupted run resumes from there.
        options: ``batch_size`` … ``checkpoint_texts`` as one
            :class:`~mteb_lrd.dysem.representation_options.RepresentationOptions` (then leave those
            keywords at their defaults).

    Raises:
        UnsupportedArchitectureError: for an encoder or a decoder whose blocks have no known
            attention / MLP sub-layer.
    """

    def __init__(
        self,
        model: nn.Module | str | os.PathLike[str],
        tokenizer: Any | None = None,
        *,
        batch_size: int = 16,
        max_length: int = 512,
        device: str | torch.device | None = None,
        dtype: torch.dtype | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        show_progress_bar: bool = False,
        prefetch: Sequence[str | Component] = (),
        checkpoint_texts: int = 512,
        options: RepresentationOptions | None = None,
    ) -> None:
        opts = options_or_keywords(
            RepresentationOptions, options, batch_size=batch_size, max_length=max_length, dtype=dtype,
            cache_dir=cache_dir, show_progress_bar=show_progress_bar, prefetch=tuple(prefetch),
            checkpoint_texts=checkpoint_texts,
        )  # fmt: skip
        self.options = opts
        """The run options as given (:class:`~mteb_lrd.dysem.representation_options.RepresentationOptions`)."""
        device = resolve_device(device, model)
        dtype = opts.dtype or torch.float32
        if isinstance(model, (str, os.PathLike)):
            model, tokenizer = load_pretrained(os.fspath(model), head="causal-lm", dtype=dtype, tokenizer=tokenizer,
                                               sentence_transformer=False)  # fmt: skip
        if tokenizer is None:
            raise ValueError("a tokenizer is required when the model is given as an object")
        self.located = locate(model)
        spec = self.located.spec
        if not spec.causal or spec.attention is None or spec.mlp is None:
            raise UnsupportedArchitectureError(
                f"DySem needs a decoder whose blocks expose self-attention and MLP sub-layers; "
                f"{type(self.located.model).__name__} matched layout {spec.name!r} "
                f"(causal={spec.causal}). Supported: Llama/Qwen2/Mistral/Gemma/Phi-style and GPT-2-style decoders."
            )
        for block in self.located.blocks:
            for attribute in (spec.attention, spec.mlp):
                if not isinstance(getattr(block, attribute, None), nn.Module):
                    raise UnsupportedArchitectureError(
                        f"block {type(block).__name__} has no sub-module {attribute!r} (layout {spec.name!r})"
                    )
        self.model = self.located.model.to(device=device, dtype=dtype).eval()
        self.base = _base_model(self.located)
        self.tokenizer = tokenizer
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.batch_size = opts.batch_size
        self.max_length = opts.max_length
        self.device = device
        self.dtype = dtype
        self.show_progress_bar = opts.show_progress_bar
        self.prefetch = [Component.parse(c) for c in opts.prefetch]
        self.identity = self._identity()
        self.store = (
            RepresentationStore(os.path.join(opts.cache_dir, self.identity))
            if opts.cache_dir is not None
            else None
        )
        self._memory: dict[str, np.ndarray] = {}
        self.forward_texts = 0
        self.forward_batches = 0
        self.checkpoint_texts = opts.checkpoint_texts

    @property
    def num_layers(self) -> int:
        """Number of decoder blocks ``L``."""
        return self.located.num_blocks

    @property
    def hidden_size(self) -> int:
        """Width ``d`` of every vector."""
        return int(self.model.get_input_embeddings().weight.shape[1])  # type: ignore[operator]

    def _identity(self) -> str:
        """What decides the vectors, wherever the model lies: its config (without the folder it
        was loaded from and the transformers version that wrote it), class, weights, tokenizer,
        dtype and truncation."""
        config = getattr(self.model, "config", None)
        settings = config.to_dict() if config is not None else {}
        for key in ("_name_or_path", "transformers_version"):
            settings.pop(key, None)
        digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
        digest.update(type(self.model).__name__.encode())
        digest.update(f"{self.dtype}|{self.max_length}".encode())
        digest.update(weights_digest(self.model).encode())  # every byte of every tensor
        digest.update(tokenizer_digest(self.tokenizer).encode())  # every rule that decides the ids
        return digest.hexdigest()[:32]

    def _key(self, component: Component, text: str) -> str:
        return text_key(self.identity, component.key, text)

    def extract(self, texts: Sequence[str], components: Sequence[str | Component]) -> dict[str, np.ndarray]:
        """Vectors of ``texts`` (already prompted) for each component.

        Args:
            texts: the exact strings to feed the model.
            components: component specs (see :class:`Component`).

        Returns:
            ``{component.key: (N, d) float32}``.
        """
        parsed = [Component.parse(c) for c in components]
        if not parsed:
            raise ValueError("ask for at least one component")
        for component in [*parsed, *self.prefetch]:
            if (
                component.kind in ("hidden", "mean")
                and not -self.num_layers - 1 <= component.layer <= self.num_layers
            ):
                raise ValueError(
                    f"layer {component.layer} of {component.key!r} is out of range for {self.num_layers} blocks "
                    f"(hidden states 0..{self.num_layers}, or negative from the end)"
                )
        texts = [str(t) for t in texts]
        unique = list(dict.fromkeys(texts))
        found: dict[str, np.ndarray] = {}
        keys = [self._key(c, t) for t in unique for c in parsed]
        found.update({k: self._memory[k] for k in keys if k in self._memory})
        if self.store is not None:
            found.update(self.store.get([k for k in keys if k not in found]))
        missing = [t for t in unique if any(self._key(c, t) not in found for c in parsed)]
        if missing:
            todo = list({c.key: c for c in [*parsed, *self.prefetch]}.values())
            # longest first (as _compute batches them); stored every `chunk` texts, so an
            # interrupted run keeps what it computed (chunk is a multiple of the batch size: the
            # batches, hence the vectors, are the same as in one pass)
            missing.sort(key=lambda t: -len(t))
            chunk = self.batch_size * max(1, self.checkpoint_texts // self.batch_size)
            for start in range(0, len(missing), chunk):
                part = missing[start : start + chunk]
                computed = self._compute(part, todo)
                new_keys = [self._key(c, t) for c in todo for t in part]
                new_values = np.concatenate([computed[c.key] for c in todo], axis=0)
                if self.store is not None:
                    self.store.put(new_keys, new_values)
                else:
                    self._memory.update(zip(new_keys, new_values, strict=True))
                found.update(zip(new_keys, new_values, strict=True))
        return {
            c.key: np.stack([found[self._key(c, t)] for t in texts]).astype(np.float32, copy=False)
            if texts
            else np.zeros((0, self.hidden_size), dtype=np.float32)
            for c in parsed
        }

    def _compute(self, texts: list[str], components: list[Component]) -> dict[str, np.ndarray]:
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = {c.key: np.empty((len(texts), self.hidden_size), dtype=np.float32) for c in components}
        starts = range(0, len(order), self.batch_size)
        for start in Progress(starts, desc="DySem forward", unit="batch", show=self.show_progress_bar):
            rows = order[start : start + self.batch_size]
            vectors = self._forward([texts[i] for i in rows], components)
            for key, value in vectors.items():
                out[key][rows] = value
        return out

    def _forward(self, texts: list[str], components: list[Component]) -> dict[str, np.ndarray]:
        """One forward pass over a batch, hooks attached only for its duration."""
        spec = self.located.spec
        batch = self.tokenizer(
            texts,
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
            padding_side="left",
        )
        input_ids = batch["input_ids"].to(self.device)
        attention_mask = batch["attention_mask"].to(self.device)
        seq_len = attention_mask.shape[1]
        last = seq_len - 1 - attention_mask.flip(dims=[1]).argmax(dim=1)  # last real token, any padding side
        rows = torch.arange(len(texts), device=self.device)
        sums: dict[str, torch.Tensor] = {}
        handles = []

        def summing_hook(name: str) -> Callable[[nn.Module, Any, Any], None]:
            def hook(_module: nn.Module, _inputs: Any, output: Any) -> None:
                value = _first_tensor(output)[rows, last].float()
                sums[name] = sums[name] + value if name in sums else value

            return hook

        wanted = {c.kind for c in components}
        try:
            for block in self.located.blocks:
                if "attention" in wanted:
                    handles.append(
                        getattr(block, str(spec.attention)).register_forward_hook(summing_hook("attention"))
                    )
                if "mlp" in wanted:
                    handles.append(getattr(block, str(spec.mlp)).register_forward_hook(summing_hook("mlp")))
            need_states = bool(wanted & {"hidden", "mean"})
            with torch.inference_mode():
                output = self.base(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    # positions count real tokens only, so a left-padded text is encoded as alone
                    # (RoPE models are shift-invariant anyway; GPT-2's absolute positions are not)
                    position_ids=(attention_mask.cumsum(dim=1) - 1).clamp_min(0),
                    use_cache=False,
                    output_hidden_states=need_states,
                    return_dict=True,
                )
        finally:
            for handle in handles:
                handle.remove()
        self.forward_batches += 1
        self.forward_texts += len(texts)
        result: dict[str, np.ndarray] = {}
        weights = attention_mask.unsqueeze(-1).float()
        for component in components:
            if component.kind in ("attention", "mlp"):
                value = sums[component.kind]
            else:
                states = output.hidden_states[component.layer].float()
                if component.kind == "hidden":
                    value = states[rows, last]
                else:
                    value = (states * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)
            result[component.key] = value.cpu().numpy().astype(np.float32, copy=False)
        return result
