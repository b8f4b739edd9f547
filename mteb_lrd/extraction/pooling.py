"""Pooling of token states into one vector per text, the same at every layer."""

from __future__ import annotations

import torch

__all__ = ["POOLINGS", "pool"]

POOLINGS: tuple[str, ...] = ("mean", "cls", "last")


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, mode: str) -> torch.Tensor:
    """Pool ``(B, T, H)`` token states into ``(B, H)`` fp32 vectors.

    Args:
        hidden: token states of one layer.
        attention_mask: ``(B, T)``, 1 for real tokens.
        mode: ``"mean"`` (mask-weighted), ``"cls"`` (first token) or ``"last"`` (last real token;
            correct for left and right padding).

    Raises:
        ValueError: for an unknown mode.
    """
    hidden = hidden.float()
    mask = attention_mask.to(hidden.device)
    if mode == "mean":
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
    if mode == "cls":
        return hidden[:, 0]
    if mode == "last":
        # Position of the last 1 in each mask row: works whatever side the padding is on.
        positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
        last = (
            torch.where(mask.bool(), positions, torch.full_like(positions, -1)).max(dim=1).values.clamp(min=0)
        )
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    raise ValueError(f"pooling must be one of {POOLINGS}; got {mode!r}")
