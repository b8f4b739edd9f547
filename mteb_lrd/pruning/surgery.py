"""Removing or skipping transformer blocks of a torch model (plain torch: no metrics, no mteb).

Block ``i`` is the module ``blocks[i]`` (``model.encoder.layer[i]``, ``model.layers[i]``, ...), the
block that *produces* hidden state ``h_{i+1}``. Removing a block deletes it from its ``ModuleList``
and keeps the model self-consistent: ``config.num_hidden_layers``, the per-layer config lists
(:data:`PER_LAYER_CONFIG`) and every ``layer_idx`` attribute (which indexes the KV cache) follow
the kept blocks. Replacing a block by a pass-through module instead would silently shift
hidden-state indices, and changing only ``num_hidden_layers`` silently truncates Qwen2-style
models (see the integration spec).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from torch import nn

from mteb_lrd import _compat
from mteb_lrd.extraction.architectures import locate

__all__ = [
    "PER_LAYER_CONFIG",
    "remove_blocks",
    "skip_blocks",
    "validate_blocks",
]


PER_LAYER_CONFIG: tuple[str, ...] = ("layer_types", "no_rope_layers")
"""Config lists with one entry per block (attention kind; SmolLM3's RoPE flags), filtered to the kept
blocks: a saved pruned model rebuilds each block from them."""


def validate_blocks(blocks: Sequence[int], num_blocks: int) -> list[int]:
    """Check a list of block indices against a model with ``num_blocks`` blocks.

    Args:
        blocks: indices of the blocks to remove, ``0 <= i < num_blocks``.
        num_blocks: number of transformer blocks ``L`` of the model.

    Returns:
        The indices, sorted ascending.

    Raises:
        ValueError: on an empty list, a non-integer, an index out of range, a duplicate, or a list
            that would remove every block.
    """
    if isinstance(blocks, (str, bytes)) or not isinstance(blocks, Sequence):
        raise ValueError(f"blocks must be a list of block indices, got {type(blocks).__name__}")
    if len(blocks) == 0:
        raise ValueError("blocks is empty: name at least one block index to remove")
    bad = [b for b in blocks if isinstance(b, bool) or not isinstance(b, int)]
    if bad:
        raise ValueError(f"blocks must be integers, got {bad!r}")
    out_of_range = sorted({b for b in blocks if not 0 <= b < num_blocks})
    if out_of_range:
        raise ValueError(
            f"block indices {out_of_range} are out of range: this model has {num_blocks} blocks, "
            f"allowed indices are 0..{num_blocks - 1}"
        )
    duplicates = sorted({b for b in blocks if blocks.count(b) > 1})
    if duplicates:
        raise ValueError(f"block indices {duplicates} are listed more than once")
    if len(blocks) >= num_blocks:
        raise ValueError(f"cannot remove all {num_blocks} blocks: keep at least one")
    return sorted(int(b) for b in blocks)


def _renumber(block: nn.Module, index: int) -> list[tuple[nn.Module, int]]:
    """Set every ``layer_idx`` inside ``block`` to ``index``; return the old values for undo."""
    previous = []
    for module in block.modules():
        value = getattr(module, "layer_idx", None)
        if isinstance(value, int) and not isinstance(value, bool):
            previous.append((module, value))
            setattr(module, "layer_idx", index)  # noqa: B010 - typed as Tensor | Module by torch
    return previous


def remove_blocks(model: object, blocks: Sequence[int]) -> tuple[list[int], Callable[[], None]]:
    """Remove ``blocks`` from ``model`` in place; return the sorted indices and an undo function.

    Raises:
        ValueError: on an invalid block list (see :func:`validate_blocks`).
    """
    located = locate(model)
    removed = validate_blocks(list(blocks), located.num_blocks)
    _compat.install_output_capturing_hooks(model)  # while every block is there (see there)
    config = getattr(located.model, "config", None)
    original_blocks = located.blocks
    kept = [i for i in range(located.num_blocks) if i not in set(removed)]
    new_list = nn.ModuleList([original_blocks[i] for i in kept])
    old_indices: list[tuple[nn.Module, int]] = []
    for new_index, block in enumerate(new_list):
        old_indices.extend(_renumber(block, new_index))
    setattr(located.blocks_parent, located.blocks_attribute, new_list)

    old_config: dict[str, Any] = {}
    if config is not None:
        old_config["num_hidden_layers"] = config.num_hidden_layers
        config.num_hidden_layers = len(kept)
        for name in PER_LAYER_CONFIG:
            per_layer = getattr(config, name, None)
            if isinstance(per_layer, list) and len(per_layer) == located.num_blocks:
                old_config[name] = per_layer
                setattr(config, name, [per_layer[i] for i in kept])

    def undo() -> None:
        setattr(located.blocks_parent, located.blocks_attribute, original_blocks)
        for module, value in old_indices:
            setattr(module, "layer_idx", value)  # noqa: B010 - typed as Tensor | Module by torch
        for key, value in old_config.items():
            setattr(config, key, value)

    return removed, undo


@contextmanager
def skip_blocks(model: object, blocks: Sequence[int]) -> Iterator[object]:
    """Temporarily remove transformer blocks from ``model`` (in place) and restore them on exit.

    Meant for quick scans (score the model with each block skipped) without copying weights.

    Args:
        model: a SentenceTransformer or a transformers model.
        blocks: indices of the blocks to skip, ``0 <= i < L``.

    Yields:
        The same ``model`` object, with the blocks removed.

    Raises:
        ValueError: on an invalid block list (see :func:`validate_blocks`).

    Example:
        >>> with skip_blocks(st, [2, 3]):
        ...     pruned_vectors = st.encode(texts)
    """
    _, undo = remove_blocks(model, blocks)
    try:
        yield model
    finally:
        undo()
