"""The one source of LRD's sampling caps and metric parameters (spec §1–§4 defaults).

Every front end (the MTEB wrapper, ``mteb-lrd profile``, rule-based pruning, the studies) builds a
:class:`Caps` and a :class:`MetricParams` and hands them to :mod:`mteb_lrd.pipeline`; nothing else
re-states a default or clamps a neighbourhood size.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from mteb_lrd.metrics.params import MetricParams, is_int
from mteb_lrd.metrics.states import subsample

__all__ = ["DEFAULT_CAPS", "DEFAULT_PARAMS", "DEFAULT_SEED", "Caps", "rows_union"]

DEFAULT_SEED = 42


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
            if value is not None and (not is_int(value) or value < 3):
                raise ValueError(f"{name}_cap must be an integer >= 3 or None (all texts); got {value!r}")

    def rows(self, n: int, seed: int = DEFAULT_SEED) -> dict[str, np.ndarray]:
        """Each family's sorted sub-sample of ``range(n)``."""
        return {name: subsample(n, cap, seed) for name, cap in asdict(self).items()}


def rows_union(rows: dict[str, np.ndarray]) -> np.ndarray:
    """The sorted rows some family samples (the union of :meth:`Caps.rows`), the texts whose every
    state the layer dynamics read."""
    return np.unique(np.concatenate(list(rows.values())))


DEFAULT_CAPS = Caps()
"""The reference caps: Frenet 1000, NRS 1000, GFMI 5000 texts."""
DEFAULT_PARAMS = MetricParams()
"""The spec's metric parameters."""
