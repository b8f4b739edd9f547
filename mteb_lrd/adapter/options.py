"""What the layer-dynamics wrapper computes, for which tasks, and on which of a task's texts."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from mteb_lrd.adapter.layer_choice import DEFAULT_LAYER_CHOICE, check_layer_choice, covers
from mteb_lrd.metrics.params import MetricParams
from mteb_lrd.parameters import DEFAULT_SEED, Caps
from mteb_lrd.storage.vector_store import check_store_options

__all__ = [
    "DOCUMENT_TYPES",
    "LAYER_KEYS",
    "SUPPORTED_TASK_TYPES",
    "LayerDynamicsOptions",
    "is_lrd_call",
    "row_is_complete",
    "texts_rule",
]

SUPPORTED_TASK_TYPES: tuple[str, ...] = (
    "STS",
    "Classification",
    "PairClassification",
    "Clustering",
    "Retrieval",
    "Reranking",
)
DOCUMENT_TYPES: tuple[str, ...] = ("Retrieval", "Reranking")
LAYER_KEYS: tuple[str, ...] = ("layer_dynamics", "per_layer")


def texts_rule(task_type: str) -> str:
    """The spec's rule for which texts of a task the layer dynamics use (recorded with them)."""
    if task_type in DOCUMENT_TYPES:
        return "corpus documents"
    if task_type in ("STS", "PairClassification"):
        return "unique sentences of both columns, first-appearance order"
    return "unique texts of the evaluation split"


def is_lrd_call(task_type: str, prompt_type: object) -> bool:
    """Whether the texts of an ``encode`` call are among those the layer dynamics use (retrieval and
    reranking: the corpus documents only; other types: every call)."""
    return task_type not in DOCUMENT_TYPES or str(getattr(prompt_type, "value", prompt_type)) == "document"


def row_is_complete(row: Mapping[str, Any], wanted_keys: Sequence[str], layer_choice: object) -> bool:
    """Whether a result row (one subset's scores) has every wanted layer key, and, when
    ``per_layer`` is wanted, a score for every hidden state ``layer_choice`` names (a rerun with
    states not scored yet is not skipped)."""
    if any(key not in row for key in wanted_keys):
        return False
    per_layer = row.get("per_layer")
    if "per_layer" not in wanted_keys or not isinstance(per_layer, Mapping) or "error" in per_layer:
        return True  # an error is recorded once, not retried forever
    return covers(per_layer, layer_choice)


@dataclass(frozen=True)
class LayerDynamicsOptions:
    """What the wrapper computes per task subset.

    Attributes:
        layer_dynamics / per_layer: compute the ``layer_dynamics`` and ``per_layer`` keys.
        per_layer_layers: which hidden states get a per-layer score (``"auto"``: all of models with
            up to 13 states, else 9 evenly spaced from ``h_0`` to ``h_L``; ``"all"``, ``"every:N"``,
            ``"last:N"``, or indices; ``h_L`` always). Only these states of every text are kept;
            the layer dynamics use every state of the texts they sample.
        background_lrd: measure the layer dynamics in a worker thread while mteb scores the task
            (once every expected text is encoded; same numbers), instead of after it.
        frenet_cap / nrs_cap / gfmi_cap: at most this many texts per metric (reference 1000, 1000,
            5000), drawn with ``RandomState(seed).choice``; ``None`` = all.
        seed: sub-sampling and NRS anchor seed.
        rank / var_threshold: Frenet subspace rank (``None``: explained-variance rule).
        nrs_k / n_anchors / gfmi_k: neighbourhood sizes (clamped to ``N - 1`` on tiny tasks, recorded).
        default_batch_size: used when mteb passes no ``batch_size`` (mteb issue #3547).
        memory_budget_mb: megabytes per task for the per-layer vectors kept in RAM and the largest
            read out of them (:class:`~mteb_lrd.storage.memory_plan.MemoryPlan`); vectors
            above their share go to a memory-mapped temporary file (``0``: always on disk; ``math.inf``: never).
        store_dtype: ``"float32"`` (per-layer scores identical to keeping them in RAM) or
            ``"float16"`` (half the bytes; scores change in about the 4th digit).
        spill_dir: folder of that temporary file (default: the system temporary folder, ``TMPDIR``;
            a local disk, not the results folder nor a tmpfs).
        shard_size: texts per extraction shard, the unit a resumed run recomputes at most once
            (``None``: at most 1024 texts and about 64 MB of vectors, a multiple of the batch size).

    Raises:
        ValueError: for an invalid value (the message names the field).
    """

    layer_dynamics: bool = True
    per_layer: bool = True
    per_layer_layers: str | tuple[int, ...] = DEFAULT_LAYER_CHOICE
    background_lrd: bool = True
    frenet_cap: int | None = Caps.frenet
    nrs_cap: int | None = Caps.nrs
    gfmi_cap: int | None = Caps.gfmi
    seed: int = DEFAULT_SEED
    rank: int | None = MetricParams.rank
    var_threshold: float = MetricParams.var_threshold
    nrs_k: int = MetricParams.nrs_k
    n_anchors: int = MetricParams.n_anchors
    gfmi_k: int = MetricParams.gfmi_k
    default_batch_size: int = 32
    memory_budget_mb: float = 1024
    store_dtype: str = "float32"
    spill_dir: str | os.PathLike[str] | None = None
    shard_size: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.per_layer_layers, list):  # a list from JSON / Python: kept hashable
            object.__setattr__(self, "per_layer_layers", tuple(self.per_layer_layers))
        check_layer_choice(self.per_layer_layers)
        self.caps  # noqa: B018 - validates the caps
        self.params  # noqa: B018 - validates the metric parameters
        size = self.default_batch_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"default_batch_size must be a positive integer; got {size!r}")
        check_store_options(self.memory_budget_mb, self.store_dtype)
        shard = self.shard_size
        if shard is not None and (isinstance(shard, bool) or not isinstance(shard, int) or shard < 1):
            raise ValueError(f"shard_size must be a positive integer or None; got {shard!r}")
        if self.spill_dir is not None and not isinstance(self.spill_dir, (str, os.PathLike)):
            raise ValueError(f"spill_dir must be a folder path or None; got {self.spill_dir!r}")
        if not (self.layer_dynamics or self.per_layer):
            raise ValueError("layer_dynamics and per_layer are both off: nothing for the wrapper to add")

    @property
    def caps(self) -> Caps:
        """The sampling caps."""
        return Caps(frenet=self.frenet_cap, nrs=self.nrs_cap, gfmi=self.gfmi_cap)

    @property
    def params(self) -> MetricParams:
        """The metric parameters."""
        return MetricParams(
            rank=self.rank,
            var_threshold=self.var_threshold,
            nrs_k=self.nrs_k,
            n_anchors=self.n_anchors,
            gfmi_k=self.gfmi_k,
        )

    @property
    def wanted_keys(self) -> tuple[str, ...]:
        """The score keys this configuration writes."""
        return tuple(
            key for key, on in zip(LAYER_KEYS, (self.layer_dynamics, self.per_layer), strict=True) if on
        )

    @classmethod
    def from_kwargs(cls, options: dict[str, object]) -> LayerDynamicsOptions:
        """Build from keyword options, naming unknown ones and what is allowed.

        Raises:
            ValueError: for an unknown option or an invalid value.
        """
        allowed = sorted(f.name for f in fields(cls))
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            raise ValueError(f"unknown options {unknown}; allowed: {', '.join(allowed)}")
        return cls(**options)  # type: ignore[arg-type]
