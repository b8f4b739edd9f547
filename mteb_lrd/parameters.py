"""The one source of LRD's sampling caps and metric parameters (spec §1–§4 defaults).

Every front end (the MTEB wrapper, ``mteb-lrd profile``, rule-based pruning, the studies) builds a
:class:`Caps` and a :class:`MetricParams` and hands them to :mod:`mteb_lrd.pipeline`; nothing else
re-states a default or clamps a neighbourhood size.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

from mteb_lrd.metrics.knn import BACKENDS
from mteb_lrd.metrics.states import subsample

__all__ = ["DEFAULT_CAPS", "DEFAULT_PARAMS", "DEFAULT_SEED", "Caps", "MetricParams", "rows_union"]

DEFAULT_SEED = 42


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Caps:
    """Most texts each family uses (the reference's caps: 1000 / 1000 / 5000); ``None`` = no cap.

    Each family draws its own sorted ``RandomState(seed).choice(N, cap, replace=False)`` sub-sample.

    Raises:
        ValueError: for a cap that is not an integer >= 3 or ``None``.
    """

    frenet: int | None = 1000
    nrs: int | None = 1000
    gfmi: int | None = 5000

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value is not None and (not _is_int(value) or value < 3):
                raise ValueError(f"{name}_cap must be an integer >= 3 or None (all texts); got {value!r}")

    def rows(self, n: int, seed: int = DEFAULT_SEED) -> dict[str, np.ndarray]:
        """Each family's sorted sub-sample of ``range(n)``."""
        return {name: subsample(n, cap, seed) for name, cap in asdict(self).items()}


def rows_union(rows: dict[str, np.ndarray]) -> np.ndarray:
    """The sorted rows some family samples (the union of :meth:`Caps.rows`), the texts whose every
    state the layer dynamics read."""
    return np.unique(np.concatenate(list(rows.values())))


@dataclass(frozen=True)
class MetricParams:
    """The metrics' parameters (spec defaults).

    Attributes:
        rank / var_threshold: Frenet subspace rank (``None``: the explained-variance rule).
        nrs_k / n_anchors: NRS neighbourhood size and anchor count.
        gfmi_k / percentiles: GFMI graph degree and percentile grid (``None``: ``linspace(5, 95, 20)``).
        backend: the kNN backend (:data:`mteb_lrd.metrics.knn.BACKENDS`).

    Raises:
        ValueError: for a non-positive size, a threshold outside (0, 1] or an unknown backend.
    """

    rank: int | None = None
    var_threshold: float = 0.95
    nrs_k: int = 20
    n_anchors: int = 500
    gfmi_k: int = 30
    percentiles: tuple[float, ...] | None = None
    backend: str = "auto"

    def __post_init__(self) -> None:
        for name in ("nrs_k", "n_anchors", "gfmi_k"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise ValueError(f"{name} must be a positive integer; got {value!r}")
        if self.rank is not None and (not _is_int(self.rank) or self.rank < 1):
            raise ValueError(f"rank must be a positive integer or None; got {self.rank!r}")
        if isinstance(self.var_threshold, bool) or not 0 < self.var_threshold <= 1:
            raise ValueError(f"var_threshold must be in (0, 1]; got {self.var_threshold!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}; got {self.backend!r}")

    def clamped(self, n_nrs: int, n_gfmi: int) -> MetricParams:
        """These parameters with the neighbourhood sizes cut to ``N - 1`` of each family's sample
        (tiny tasks); the result records what was used."""
        return replace(
            self, nrs_k=max(1, min(self.nrs_k, n_nrs - 1)), gfmi_k=max(1, min(self.gfmi_k, n_gfmi - 1))
        )


DEFAULT_CAPS = Caps()
"""The reference caps: Frenet 1000, NRS 1000, GFMI 5000 texts."""
DEFAULT_PARAMS = MetricParams()
"""The spec's metric parameters."""
