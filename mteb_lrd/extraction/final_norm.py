"""Decoders' final norm: which hidden states it touches (``as_is``, ``all`` or ``none``).

transformers returns ``h_L`` after the final norm and every other hidden state raw (``as_is``).
``all`` applies the norm to every hidden state; ``none`` keeps the raw ``h_L`` (the norm's input).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["FINAL_NORMS", "apply_final_norm", "capture_pre_norm"]

FINAL_NORMS: tuple[str, ...] = ("as_is", "all", "none")


@contextlib.contextmanager
def capture_pre_norm(norm: torch.nn.Module | None, convention: str) -> Iterator[dict[str, torch.Tensor]]:
    """With ``convention="none"``, keep the input of the final ``norm`` (the raw ``h_L``) during a forward."""
    captured: dict[str, torch.Tensor] = {}
    if convention != "none" or norm is None:
        yield captured
        return

    def hook(_module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        captured["raw_last"] = args[0]

    handle = norm.register_forward_pre_hook(hook)
    try:
        yield captured
    finally:
        handle.remove()


def apply_final_norm(
    hidden: list[torch.Tensor],
    norm: torch.nn.Module | None,
    convention: str,
    captured: dict[str, torch.Tensor],
) -> list[torch.Tensor]:
    """The hidden states under ``convention`` (``captured`` from :func:`capture_pre_norm`)."""
    if convention == "none" and norm is not None:
        hidden[-1] = captured["raw_last"]
    elif convention == "all" and norm is not None:
        hidden = [norm(h) for h in hidden[:-1]] + [hidden[-1]]
    return hidden
