"""Which hidden states get a ``per_layer`` score: a choice, validated up front, resolved per model.

Per-layer scoring re-runs the task's evaluator once per chosen state and keeps that state's vector
of every text, so its cost grows with the number of states chosen; the layer dynamics always use
every state. Choices:

* ``"auto"`` (default): every state up to :data:`AUTO_ALL_UP_TO` states (all BERT-base and
  smaller models), else :data:`AUTO_EVENLY` evenly spaced states from ``h_0`` to ``h_L``
  (``h_0, h_4, ..., h_32`` for a 32-block 7B decoder);
* ``"all"``; ``"every:N"`` (``h_0, h_N, h_2N, ...``); ``"last:N"`` (the last ``N`` states);
* explicit indices: a list of ints or a comma-separated text (``"0,8,16,24"``).

The last state ``h_L`` (whose score equals the ordinary main score) is always included.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "AUTO_ALL_UP_TO",
    "AUTO_EVENLY",
    "DEFAULT_LAYER_CHOICE",
    "check_layer_choice",
    "choice_label",
    "covers",
    "resolve_layers",
]

DEFAULT_LAYER_CHOICE = "auto"
AUTO_ALL_UP_TO = 13
"""``"auto"`` scores every state of models with at most this many hidden states (12 blocks)."""
AUTO_EVENLY = 9
"""``"auto"`` scores this many evenly spaced states (``h_0`` and ``h_L`` included) of deeper models."""

_FORM = re.compile(r"^(every|last):(\d+)$")
_HELP = (
    "'auto', 'all', 'every:N', 'last:N', or layer indices (a list of ints or a text like '0,8,16'); "
    "h_L is always added"
)


def _indices(choice: object) -> list[int] | None:
    """The explicit indices of ``choice``, ``None`` when it is a named form."""
    if isinstance(choice, str):
        if choice in ("auto", "all") or _FORM.match(choice):
            return None
        parts = [part.strip() for part in choice.split(",")]
        if not all(re.fullmatch(r"\d+", part) for part in parts):
            raise ValueError(f"per_layer_layers must be {_HELP}; got {choice!r}")
        return [int(part) for part in parts]
    if isinstance(choice, Sequence) and not isinstance(choice, (bytes, bytearray)):
        items = list(choice)
        bad = [i for i in items if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or i < 0]
        if not items or bad:
            raise ValueError(
                f"per_layer_layers indices must be integers >= 0 (a non-empty list); got {choice!r}"
            )
        return [int(i) for i in items]
    raise ValueError(f"per_layer_layers must be {_HELP}; got {choice!r}")


def check_layer_choice(choice: object) -> None:
    """Validate the form of a layer choice (the range is checked once the model is known).

    Raises:
        ValueError: for anything but the forms the module docstring lists, or ``N < 1``.
    """
    if _indices(choice) is None and isinstance(choice, str):
        match = _FORM.match(choice)
        if match and int(match.group(2)) < 1:
            raise ValueError(f"per_layer_layers {choice!r}: N must be >= 1")


def choice_label(choice: object) -> str:
    """The choice as recorded in results and compared by the "already done" checks."""
    indices = _indices(choice)
    return str(choice) if indices is None else ",".join(str(i) for i in sorted(set(indices)))


def resolve_layers(choice: object, num_states: int) -> tuple[int, ...]:
    """The sorted hidden-state indices ``choice`` names for a model with ``num_states`` = ``L + 1``.

    Raises:
        ValueError: for an invalid choice or an index outside ``0..L``.
    """
    check_layer_choice(choice)
    last = num_states - 1
    if num_states < 1:
        raise ValueError(f"num_states must be >= 1; got {num_states}")
    indices = _indices(choice)
    if indices is not None:
        outside = sorted({i for i in indices if i > last})
        if outside:
            raise ValueError(
                f"per_layer_layers names hidden states {outside}, but the model has h_0 .. h_{last}"
            )
        chosen = set(indices)
    elif choice == "all" or (choice == "auto" and num_states <= AUTO_ALL_UP_TO):
        chosen = set(range(num_states))
    elif choice == "auto":
        chosen = {int(i) for i in np.round(np.linspace(0, last, AUTO_EVENLY))}
    else:
        form, n = _FORM.match(str(choice)).groups()  # type: ignore[union-attr]
        step = int(n)
        chosen = (
            set(range(0, num_states, step))
            if form == "every"
            else set(range(max(0, num_states - step), num_states))
        )
    return tuple(sorted(chosen | {last}))


def covers(per_layer: Mapping[str, Any], choice: object) -> bool:
    """Whether a recorded ``per_layer`` entry has a score for every state ``choice`` names.

    The entry's own ``num_states`` (or, for entries that predate it, its ``layers`` running
    ``0..L``) resolves the choice; an entry with an error or without layers covers nothing.
    """
    layers = per_layer.get("layers")
    if not isinstance(layers, list) or not layers or "error" in per_layer:
        return False
    num_states = per_layer.get("num_states", max(layers) + 1)
    try:
        wanted = resolve_layers(choice, int(num_states))
    except (ValueError, TypeError):
        return False
    return set(wanted) <= set(layers)
