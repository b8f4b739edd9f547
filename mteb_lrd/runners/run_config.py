"""What every model run of ``mteb-lrd run`` shares, whichever executor runs it (sequential, or one
Ray unit per model and task): the options object of :func:`~mteb_lrd.runners.model_evaluation.evaluate_model`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mteb_lrd.adapter.options import LAYER_KEYS
from mteb_lrd.adapter.provenance import process_command

__all__ = ["UnitConfig"]


@dataclass(frozen=True)
class UnitConfig:
    """What every unit of a run shares.

    Attributes:
        results: the results folder (mteb ``ResultCache`` layout), shared by every node.
        options: :func:`~mteb_lrd.with_layer_dynamics` options (caps, ``per_layer``, ...).
        batch_size: texts per forward pass. device: ``None`` = CUDA when the unit got a GPU.
        overwrite: re-run units that already have results.
        cache: keep a resumable extraction cache (``options["cache_dir"]``, a folder every node
            reaches, kept; else :func:`unit_cache_dir`, removed once the unit is done); ``False``:
            none (a big task's unit saves that disk; a retried unit starts over).
        command: the command line recorded with every result (the driver's, not a worker's).
        name / revision: the name and revision results are stored under (``--name``,
            ``--revision``), as a sequential run stores them.
    """

    results: str
    options: dict[str, Any] = field(default_factory=dict)
    batch_size: int = 32
    device: str | None = None
    overwrite: bool = False
    cache: bool = True
    command: str = field(default_factory=process_command)
    name: str | None = None
    revision: str | None = None

    @property
    def wanted_keys(self) -> tuple[str, ...]:
        """The layer keys every result row of a finished unit has."""
        return tuple(key for key in LAYER_KEYS if self.options.get(key, True))
