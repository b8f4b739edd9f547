"""The metrics' parameters as one validated object (spec §2–§4 defaults), accepted by :func:`mteb_lrd.lrd`
and built by every front end (through :mod:`mteb_lrd.parameters`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from mteb_lrd.metrics.knn import BACKENDS
from mteb_lrd.metrics.on_device import metrics_device

__all__ = ["MetricParams", "is_int"]


def is_int(value: object) -> bool:
    """An integer (Python or numpy), not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


@dataclass(frozen=True)
class MetricParams:
    """The metrics' parameters (spec defaults).

    Attributes:
        rank / var_threshold: Frenet subspace rank (``None``: the explained-variance rule).
        nrs_k / n_anchors: NRS neighbourhood size and anchor count.
        gfmi_k / percentiles: GFMI graph degree and percentile grid (``None``: ``linspace(5, 95, 20)``).
        backend: the kNN backend of the numpy path (:data:`mteb_lrd.metrics.knn.BACKENDS`).
        device: where the metrics run (:func:`~mteb_lrd.metrics.on_device.metrics_device`):
            ``"auto"`` (a CUDA device when torch sees one, else numpy), ``None`` (numpy, or the
            device of a GPU tensor) or a torch device name.

    Raises:
        ValueError: for a non-positive size, a threshold outside (0, 1] or an unknown backend or device.
    """

    rank: int | None = None
    var_threshold: float = 0.95
    nrs_k: int = 20
    n_anchors: int = 500
    gfmi_k: int = 30
    percentiles: tuple[float, ...] | None = None
    backend: str = "auto"
    device: str | None = "auto"

    def __post_init__(self) -> None:
        for name in ("nrs_k", "n_anchors", "gfmi_k"):
            value = getattr(self, name)
            if not is_int(value) or value < 1:
                raise ValueError(f"{name} must be a positive integer; got {value!r}")
        if self.rank is not None and (not is_int(self.rank) or self.rank < 1):
            raise ValueError(f"rank must be a positive integer or None; got {self.rank!r}")
        if isinstance(self.var_threshold, bool) or not 0 < self.var_threshold <= 1:
            raise ValueError(f"var_threshold must be in (0, 1]; got {self.var_threshold!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}; got {self.backend!r}")
        if self.device is not None:
            metrics_device(self.device)

    def clamped(self, n_nrs: int, n_gfmi: int) -> MetricParams:
        """These parameters with the neighbourhood sizes cut to ``N - 1`` of each family's sample
        (tiny tasks); the result records what was used."""
        return replace(
            self, nrs_k=max(1, min(self.nrs_k, n_nrs - 1)), gfmi_k=max(1, min(self.gfmi_k, n_gfmi - 1))
        )
