"""How :class:`~mteb_lrd.dysem.representation.RepresentationExtractor` runs the model: one frozen,
validated options object, the extractor's keywords one to one."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["RepresentationOptions"]


@dataclass(frozen=True)
class RepresentationOptions:
    """The run options of :class:`~mteb_lrd.dysem.representation.RepresentationExtractor`.

    Attributes:
        batch_size: texts per forward pass (texts are sorted by length first).
        max_length: truncation length in tokens (at least 2).
        dtype: torch dtype of the model's weights (``None``: float32; vectors are always float32).
        cache_dir: folder of the on-disk vector store (``None``: vectors in memory only).
        show_progress_bar: a tqdm bar over batches.
        prefetch: components (names or ``Component`` objects) computed alongside any request that needs a forward pass.
        checkpoint_texts: with a ``cache_dir``, new vectors are written about every this many texts.

    Raises:
        ValueError: for an invalid value (the message names the field).
    """

    batch_size: int = 16
    max_length: int = 512
    dtype: torch.dtype | None = None
    cache_dir: str | os.PathLike[str] | None = None
    show_progress_bar: bool = False
    prefetch: tuple[Any, ...] = ()
    checkpoint_texts: int = 512

    def __post_init__(self) -> None:
        for name, least in (("batch_size", 1), ("checkpoint_texts", 1), ("max_length", 2)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
        if self.dtype is not None and not isinstance(self.dtype, torch.dtype):
            raise ValueError(f"dtype must be a torch dtype or None, got {self.dtype!r}")
        if isinstance(self.prefetch, str):
            raise ValueError(
                f"prefetch must be a sequence of component names, got the string {self.prefetch!r}"
            )
        object.__setattr__(self, "prefetch", tuple(self.prefetch))
