"""Report figures of the layer profiles (matplotlib, Agg): one variant's Frenet, NRS, GFMI and
per-layer score panels, and the variants of a task overlaid, with bootstrap bands where the result
files hold intervals. Layers are placed at their index in the base model, as in :mod:`~mteb_lrd.report.plots`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from mteb_lrd.report.plots import (
    BASE_LAYER,
    PANEL_TEXT_SIZE,
    RELATIVE_DEPTH,
    VariantKey,
    panel_grid,
    point_label,
    variant_palette,
)
from mteb_lrd.report.result_files import ModelVariant, entry_states
from mteb_lrd.report.tables import variant_description

__all__ = ["PROFILE_PANELS", "profile_figure", "profiles_overlay_figure"]

# (title, y-axis label with unit) of the per-variant profile panels, in drawing order
PROFILE_PANELS: tuple[tuple[str, str], ...] = (
    ("Frenet speed", r"Grassmann distance $d(h_\ell, h_{\ell+1})$ [rad]"),
    ("Frenet curvature", r"Menger curvature $\kappa_\ell$ [1/rad]"),
    ("NRS retention", "kNN Jaccard retention, adjacent layers [0–1]"),
    ("GFMI", r"AUC of MI with $h_L$ [nat × percentile]"),
    ("Per-layer main score", "main score × 100"),
)


def _profiles(
    variant: ModelVariant, dynamics: dict[str, Any], scored: tuple[np.ndarray, np.ndarray] | None
) -> list[Any]:
    """(x, values) per profile panel, x on the base model's layer index (``scored``: the per-layer
    scores' layers and values, already so)."""
    frenet = dynamics.get("frenet") or {}
    speed = frenet.get("speed") or []
    num_states = int(dynamics.get("num_layers") or len(speed)) + 1
    layers = variant.original_layers(num_states).astype(float)
    between = (layers[:-1] + layers[1:]) / 2  # transitions h_j -> h_{j+1}

    def series(values: list | None, x: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        if not values or len(values) != x.size:
            return None
        return x, np.array([np.nan if v is None else v for v in values], dtype=float)

    return [
        series(speed, between),
        series(frenet.get("curvature"), layers[1:-1]),
        series((dynamics.get("nrs") or {}).get("jaccard"), between),
        series((dynamics.get("gfmi") or {}).get("auc"), layers),
        scored,
    ]


def profile_figure(variant: ModelVariant) -> Figure | None:
    """The five layer profiles of one variant (one line per task / subset), or ``None`` without any."""
    lines = []
    for task, record in sorted(variant.tasks.items()):
        subsets = [row for row in record.subsets if isinstance(row.get("layer_dynamics"), dict)]
        for row in subsets:
            entry = row.get("per_layer")
            scored = None
            if isinstance(entry, dict) and entry.get("scores"):
                states, num_states = entry_states(entry)
                values = np.array([np.nan if s is None else s for s in entry["scores"]], dtype=float)
                scored = (variant.original_layers(num_states)[states].astype(float), values * 100)
            label = task if len(subsets) == 1 else f"{task}/{row.get('hf_subset')}"
            lines.append((label, _profiles(variant, row["layer_dynamics"], scored)))
        curve, layers = record.per_layer_scores(), variant.scored_layers(record)
        if not subsets and curve is not None and layers is not None:
            lines.append((task, [None] * 4 + [(layers.astype(float), curve * 100)]))
    if not lines:
        return None
    figure, axes = panel_grid(len(PROFILE_PANELS), 4.8, 3.5)
    for axis, (title, ylabel) in zip(axes, PROFILE_PANELS, strict=True):
        axis.set_title(title, fontsize=PANEL_TEXT_SIZE)
        axis.set_xlabel(BASE_LAYER, fontsize=PANEL_TEXT_SIZE)
        axis.set_ylabel(ylabel, fontsize=PANEL_TEXT_SIZE)
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.grid(alpha=0.3)
        for block in variant.removed_blocks:
            axis.axvspan(
                block + 0.6, block + 1.4, color="grey", alpha=0.15, gid=f"removed:{variant.label}:{block}"
            )
    for label, profiles in lines:
        for axis, profile in zip(axes, profiles, strict=True):
            if profile is not None:
                axis.plot(*profile, marker="o", markersize=3, label=label)
    for axis in axes:
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize=7, loc="best")
    removed = f"\nshaded: removed blocks {variant.removed_blocks}" if variant.removed_blocks else ""
    figure.suptitle(
        f"{variant.model} ({variant_description(variant)}): layer profiles (transitions drawn between the two "
        f"layers){removed}",
        fontsize=10,
    )
    return figure


def _band(interval: Any, x: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    if not isinstance(interval, dict):
        return None
    low, high = interval.get("low") or [], interval.get("high") or []
    if len(low) != x.size or len(high) != x.size:
        return None
    as_float = [
        np.array([np.nan if v is None else v for v in values], dtype=float) * scale for values in (low, high)
    ]
    return x, as_float[0], as_float[1]


def _task_profiles(variant: ModelVariant, task: str) -> tuple[list[Any], list[Any], int] | None:
    """(profiles, bands, blocks of the base model) of one variant on one task, per
    :data:`PROFILE_PANELS` panel, x on the base layer index: profiles averaged over subsets; bands
    (bootstrap intervals: NRS over anchors, per-layer STS scores over pairs) only for a single
    subset. ``None`` without layer dynamics."""
    record = variant.tasks.get(task)
    rows = [row for row in (record.subsets if record else []) if isinstance(row.get("layer_dynamics"), dict)]
    if not rows or any("error" in row["layer_dynamics"] for row in rows):
        return None
    curve = record.per_layer_scores() if record else None
    layers = variant.scored_layers(record) if record else None
    scored = (layers.astype(float), curve * 100) if curve is not None and layers is not None else None
    per_row = [_profiles(variant, row["layer_dynamics"], scored) for row in rows]
    profiles = []
    for panel in zip(*per_row, strict=True):
        usable = [p for p in panel if p is not None]
        same = len(usable) == len(panel) and len({p[0].size for p in usable}) == 1
        profiles.append((usable[0][0], np.mean([p[1] for p in usable], axis=0)) if usable and same else None)
    bands: list[Any] = [None] * len(PROFILE_PANELS)
    if len(rows) == 1:
        nrs, score = profiles[2], profiles[4]
        bands[2] = nrs and _band(rows[0]["layer_dynamics"].get("nrs", {}).get("jaccard_ci"), nrs[0], 1.0)
        entry = rows[0].get("per_layer")
        bands[4] = score and isinstance(entry, dict) and _band(entry.get("interval"), score[0], 100.0) or None
    num_states = int(rows[0]["layer_dynamics"].get("num_layers") or 0) + 1
    return profiles, bands, variant.base_num_blocks(num_states)


def profiles_overlay_figure(
    variants: Sequence[ModelVariant],
    task: str,
    relative: bool,
    colours: Mapping[VariantKey, Any] | None = None,
) -> Figure | None:
    """The layer profiles of several models / variants on one task, overlaid, with bootstrap bands.

    Args:
        variants: the lines (pruned variants dashed, their removed blocks shaded when ``relative`` is
            false).
        task: the task whose profiles are drawn.
        relative: x is the relative depth in the base model (models of different depth) instead of
            the base model's layer index (a model and its pruned variants).

    Returns:
        Five panels (:data:`PROFILE_PANELS`); a shaded band around NRS and per-layer STS scores is
        their 95 % bootstrap interval (NRS over anchors, scores over pairs) where recorded. ``None``
        when fewer than two variants have layer dynamics on ``task``.
    """
    drawn = [(v, found) for v in variants if (found := _task_profiles(v, task)) is not None]
    if len(drawn) < 2:
        return None
    figure, axes = panel_grid(len(PROFILE_PANELS), 4.8, 3.5, legend_right=True)
    for axis, (title, ylabel) in zip(axes, PROFILE_PANELS, strict=True):
        axis.set_title(title, fontsize=PANEL_TEXT_SIZE)
        axis.set_xlabel(RELATIVE_DEPTH if relative else BASE_LAYER, fontsize=PANEL_TEXT_SIZE)
        axis.set_ylabel(ylabel, fontsize=PANEL_TEXT_SIZE)
        axis.grid(alpha=0.3)
        if not relative:
            axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    palette = variant_palette([variant for variant, _ in drawn], colours)
    for colour, (variant, (profiles, bands, blocks)) in zip(palette, drawn, strict=True):
        scale = 1.0 / max(blocks, 1) if relative else 1.0
        style = "--" if variant.experiment else "-"
        for axis, profile, band in zip(axes, profiles, bands, strict=True):
            if profile is None:
                continue
            axis.plot(profile[0] * scale, profile[1], marker="o", markersize=3, color=colour, linestyle=style,
                      label=point_label(variant))  # fmt: skip
            if band:
                axis.fill_between(band[0] * scale, band[1], band[2], color=colour, alpha=0.15, linewidth=0,
                                  gid=f"interval:{variant.label}")  # fmt: skip
            if not relative:
                for block in variant.removed_blocks:
                    axis.axvspan(block + 0.6, block + 1.4, color=colour, alpha=0.1,
                                 gid=f"removed:{variant.label}:{block}")  # fmt: skip
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside right upper", fontsize=8, title="solid: base, dashed: pruned",
                  title_fontsize=8)  # fmt: skip
    where = "relative depth" if relative else "the base model's layer index"
    figure.suptitle(f"{task}: layer profiles on {where}\nbands: 95 % bootstrap intervals (NRS over anchors, "
                    "STS scores over pairs)", fontsize=PANEL_TEXT_SIZE)  # fmt: skip
    return figure
