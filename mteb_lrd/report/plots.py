"""Per-variant figures: speed, curvature, Jaccard retention, GFMI and per-layer main score against depth."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from mteb_lrd.integration.results import ModelVariant
from mteb_lrd.io import atomic_write_bytes

__all__ = ["PANELS", "plot_profiles"]

PANELS = ("Frenet speed", "Frenet curvature", "NRS Jaccard", "GFMI AUC", "Per-layer main score")


def _depths(count: int, first: float, last: float) -> np.ndarray:
    return np.linspace(first, last, count) if count > 1 else np.array([first])


def _profiles(dynamics: dict, per_layer: dict | None) -> list[tuple[np.ndarray, np.ndarray] | None]:
    """(relative depth, values) per panel; transitions sit between layers, curvature at inner layers."""

    def series(values: list | None, first: float, last: float):
        if not values:
            return None
        array = np.array([np.nan if v is None else v for v in values], dtype=float)
        return _depths(array.size, first, last), array

    num_layers = int(
        dynamics.get("num_layers") or len((dynamics.get("frenet") or {}).get("speed") or []) or 1
    )
    half = 0.5 / num_layers
    frenet = dynamics.get("frenet") or {}
    return [
        series(frenet.get("speed"), half, 1 - half),
        series(frenet.get("curvature"), 1 / num_layers, 1 - 1 / num_layers),
        series((dynamics.get("nrs") or {}).get("jaccard"), half, 1 - half),
        series((dynamics.get("gfmi") or {}).get("auc"), 0.0, 1.0),
        series(per_layer.get("scores") if per_layer else None, 0.0, 1.0),
    ]


def plot_profiles(variant: ModelVariant, path: str | Path) -> Path | None:
    """Draw the five layer profiles of ``variant`` (one line per task) to a PNG at ``path``.

    Returns:
        The path, or ``None`` when the variant has no ``layer_dynamics`` / ``per_layer`` entries.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = []
    for task, record in sorted(variant.tasks.items()):
        per_layer = record.per_layer
        for index, dynamics in enumerate(record.layer_dynamics):
            label = (
                task if len(record.layer_dynamics) == 1 else f"{task}/{record.subsets[index]['hf_subset']}"
            )
            lines.append((label, _profiles(dynamics, per_layer[index] if index < len(per_layer) else None)))
        if not record.layer_dynamics and per_layer:
            lines.append((task, _profiles({"num_layers": len(per_layer[0]["scores"]) - 1}, per_layer[0])))
    if not lines:
        return None
    figure, axes = plt.subplots(1, len(PANELS), figsize=(4 * len(PANELS), 3.4), constrained_layout=True)
    for axis, title in zip(axes, PANELS, strict=True):
        axis.set_title(title, fontsize=10)
        axis.set_xlabel("relative depth")
        axis.set_xlim(0, 1)
        axis.grid(alpha=0.3)
    for label, profiles in lines:
        for axis, profile in zip(axes, profiles, strict=True):
            if profile is not None:
                axis.plot(*profile, marker="o", markersize=3, label=label)
    axes[-1].legend(fontsize=7, loc="best")
    figure.suptitle(variant.label, fontsize=11)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return atomic_write_bytes(path, buffer.getvalue())
