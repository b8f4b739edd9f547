"""Report figures (matplotlib, Agg): every function returns a ``matplotlib.figure.Figure`` (or
``None`` when the results hold nothing to draw) and :func:`save_png` writes one atomically.

Layers are placed at their index in the *base* model (``h_0`` = embeddings … ``h_L``), so a pruned
variant's curve lines up with its base model's and the removed blocks show as gaps. Block ``b``
produces ``h_{b+1}``; removed blocks are marked at ``ℓ = b + 1``.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory
from scipy import stats

from mteb_lrd.io import atomic_write_bytes
from mteb_lrd.report.comparison import mean_over, shared_tasks
from mteb_lrd.report.result_files import ModelVariant
from mteb_lrd.report.tables import variant_description

__all__ = [
    "BASE_LAYER",
    "MIN_SCATTER_POINTS",
    "PANEL_TEXT_SIZE",
    "RELATIVE_DEPTH",
    "variant_palette",
    "d0l_figure",
    "label_points",
    "panel_grid",
    "per_layer_figure",
    "point_label",
    "pruning_figure",
    "save_png",
    "score_axis_label",
]

BASE_LAYER = r"layer $\ell$ of the base model (hidden state $h_\ell$; 0 = embeddings)"
RELATIVE_DEPTH = r"relative depth $\ell / L$ in the base model (0 = embeddings, 1 = last layer)"
# fewest models / variants for a d0L scatter panel with its rank correlation
MIN_SCATTER_POINTS = 4
D0L = r"$d_{0L}$: Grassmann distance between the $h_0$ and $h_L$ subspaces [rad]"

# units of model-level scores, by name pattern (first match wins)
_UNITS: tuple[tuple[str, str], ...] = (
    ("curvature", "1/rad"),
    ("frenet_d0L", "rad"),
    ("arc_length", "rad"),
    ("speed", "rad"),
    ("jaccard", "0–1"),
    ("gfmi", "nat × percentile"),
    ("rankme", "effective rank"),
    ("alpha_req", "power-law exponent"),
)


PANEL_TEXT_SIZE = 10
"""Font size of panel titles and axis labels, readable at the page's width."""


def score_axis_label(name: str) -> str:
    """An axis label for a model-level score: its name and, where known, its unit in brackets."""
    unit = next((u for pattern, u in _UNITS if pattern in name), None)
    if name.endswith(("ratio", "_cv", "straightness", "_depth", "slope")) or "peak_mi" in name:
        unit = None if "peak_mi" not in name else "nat"
    return name if unit is None else f"{name} [{unit}]"


def _colours(count: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if count <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(count)]


VariantKey = tuple[str, str, str | None]
"""``(model, revision, experiment)``: one model or variant, whatever figure draws it."""


def variant_key(variant: ModelVariant) -> VariantKey:
    """The key :func:`variant_colours` gives each model or variant its colour under."""
    return (variant.model, variant.revision, variant.experiment)


def variant_colours(variants: Sequence[ModelVariant]) -> dict[VariantKey, Any]:
    """One colour per model or variant, assigned once for a page, so that a variant has the same
    colour in every figure whatever else the figure draws."""
    return dict(zip(map(variant_key, variants), _colours(len(variants)), strict=True))


def variant_palette(drawn: Sequence[ModelVariant], colours: Mapping[VariantKey, Any] | None) -> list[Any]:
    """The colours of ``drawn``, in order: from the page's ``colours``, else assigned here."""
    page = colours if colours is not None else variant_colours(drawn)
    return [page[variant_key(v)] for v in drawn]


def panel_grid(
    count: int, width: float, height: float, legend_right: bool = False
) -> tuple[Figure, list[Any]]:
    """A figure with ``count`` panels, at most 3 per row (room on the right for a legend); unused
    panels removed."""
    ncols = min(3, count)
    nrows = math.ceil(count / ncols)
    extra = 3.0 if legend_right else 0.0
    figure = Figure(figsize=(max(width * ncols, 7.0) + extra, height * nrows + 0.9), layout="constrained")
    FigureCanvasAgg(figure)
    axes = list(np.atleast_1d(figure.subplots(nrows, ncols, squeeze=False)).ravel())
    for extra in axes[count:]:
        extra.remove()
    return figure, axes[:count]


def point_label(variant: ModelVariant) -> str:
    """A short name for a point or line: the model name without its organisation, plus the variant."""
    name = variant.model.split("/")[-1]
    if variant.removed_blocks:
        return f"{name} −{variant.removed_blocks}"
    return name if variant.experiment is None else f"{name} [{variant_description(variant)}]"


def _score_label(variants: Sequence[ModelVariant], task: str) -> str:
    for variant in variants:
        record = variant.tasks.get(task)
        for entry in record.per_layer if record else []:
            if entry.get("main_score"):
                return f"{entry['main_score']} × 100"
    return "main score × 100"


def _curve(variant: ModelVariant, task: str) -> tuple[np.ndarray, np.ndarray, int] | None:
    """The per-layer scores × 100 of ``variant`` on ``task``, their base-model layers and the base
    model's number of blocks."""
    record = variant.tasks.get(task)
    if record is None:
        return None
    curve, found = record.per_layer_scores(), record.per_layer_states()
    if curve is None or found is None:
        return None
    states, num_states = found
    return variant.original_layers(num_states)[states], curve * 100, variant.base_num_blocks(num_states)


def per_layer_figure(
    variants: Sequence[ModelVariant],
    tasks: Sequence[str],
    colours: Mapping[VariantKey, Any] | None = None,
) -> Figure | None:
    """Per-layer main score of every model and variant, overlaid: one panel per task.

    x is the relative depth in the base model (so models of different depth share an axis and a
    pruned variant's points sit at their base positions); pruned variants are dashed.
    """
    tasks = [t for t in tasks if any(_curve(v, t) is not None for v in variants)]
    if not tasks:
        return None
    figure, axes = panel_grid(len(tasks), 5.2, 3.8, legend_right=True)
    palette = variant_palette(variants, colours)
    for axis, task in zip(axes, tasks, strict=True):
        for colour, variant in zip(palette, variants, strict=True):
            curve = _curve(variant, task)
            if curve is None:
                continue
            layers, scores, blocks = curve
            depth = layers / max(blocks, 1)
            axis.plot(
                depth,
                scores,
                marker="o",
                markersize=3,
                color=colour,
                linestyle="--" if variant.experiment else "-",
                label=point_label(variant),
            )
        axis.set_title(task, fontsize=PANEL_TEXT_SIZE)
        axis.set_xlabel(RELATIVE_DEPTH, fontsize=PANEL_TEXT_SIZE)
        axis.set_ylabel(_score_label(variants, task))
        axis.set_xlim(-0.03, 1.03)
        axis.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    for axis in axes[1:]:
        for handle, label in zip(*axis.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    figure.legend(
        handles,
        labels,
        loc="outside right upper",
        fontsize=8,
        title="solid: base, dashed: pruned",
        title_fontsize=8,
    )
    figure.suptitle("Per-layer main score of every model and variant")
    return figure


def pruning_figure(
    group: Sequence[ModelVariant], tasks: Sequence[str], colours: Mapping[VariantKey, Any] | None = None
) -> Figure | None:
    """A model and its pruned variants on the base model's layer index, removed blocks marked.

    Each removed block ``b`` of a variant is a shaded band (``gid`` ``removed:<label>:<b>``) centred
    on ``ℓ = b + 1``, labelled ``block b removed``, in the variant's colour. ``None`` unless the group
    holds a pruned variant with per-layer scores.
    """
    pruned = [v for v in group if v.removed_blocks]
    tasks = [t for t in tasks if any(_curve(v, t) is not None for v in pruned)]
    if not tasks:
        return None
    ordered = [v for v in group if not v.removed_blocks] + pruned
    figure, axes = panel_grid(len(tasks), 6.0, 4.0)
    palette = variant_palette(ordered, colours)
    num_blocks = 0
    for axis, task in zip(axes, tasks, strict=True):
        top = blended_transform_factory(axis.transData, axis.transAxes)
        for rank, (colour, variant) in enumerate(zip(palette, ordered, strict=True)):
            curve = _curve(variant, task)
            if curve is None:
                continue
            layers, scores, blocks = curve
            num_blocks = max(num_blocks, blocks)
            removed = variant.removed_blocks
            label = (
                "base"
                if not removed
                else f"removed blocks {removed} (no " + ", ".join(f"$h_{{{b + 1}}}$" for b in removed) + ")"
            )
            axis.plot(
                layers, scores, marker="o", color=colour, linestyle="--" if removed else "-", label=label
            )
            for block in removed:
                axis.axvspan(
                    block + 0.6, block + 1.4, color=colour, alpha=0.15, gid=f"removed:{variant.label}:{block}"
                )
                axis.text(
                    block + 1 + 0.22 * (rank - (len(pruned) + 1) / 2),
                    0.98,
                    f"block {block} removed",
                    transform=top,
                    rotation=90,
                    ha="center",
                    va="top",
                    fontsize=7,
                    color=colour,
                )
        axis.set_title(task, fontsize=PANEL_TEXT_SIZE)
        axis.set_xlabel(BASE_LAYER, fontsize=PANEL_TEXT_SIZE)
        axis.set_ylabel(_score_label(group, task))
        axis.set_xticks(range(num_blocks + 1))
        axis.set_xlim(-0.5, num_blocks + 0.5)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7, loc="best")
    figure.suptitle(
        f"{group[0].model}: base vs pruned\nshaded: a removed block b, at the layer $h_{{b+1}}$ it produced",
        fontsize=10,
    )
    return figure


def label_points(axis: Any, points: Sequence[tuple[str, float, float]]) -> None:
    """Write each point's label next to it; labels that would overlap are stacked downwards and
    joined to their point by a thin line (positions in axes fractions, ~0.014 per character)."""
    axis.autoscale_view()
    (x0, x1), (y0, y1) = axis.get_xlim(), axis.get_ylim()
    height = 0.055
    placed: list[tuple[float, float, float]] = []
    for label, x, y in sorted(points, key=lambda p: (-p[2], p[1])):
        fx, fy = (x - x0) / ((x1 - x0) or 1), (y - y0) / ((y1 - y0) or 1)
        width = 0.014 * len(label)
        tx = fx + 0.02 if fx + 0.02 + width <= 1 else fx - 0.02 - width
        ty = fy
        for _ in range(len(points) + 1):
            clash = [p for p in placed if p[0] < tx + width and tx < p[0] + p[2] and abs(p[1] - ty) < height]
            if not clash:
                break
            ty = min(p[1] for p in clash) - height
        placed.append((tx, ty, width))
        moved = abs(ty - fy) > height / 2
        axis.annotate(
            label,
            (x, y),
            xytext=(tx, ty),
            textcoords="axes fraction",
            fontsize=7,
            va="center",
            arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.5} if moved else None,
        )


def _spearman_caption(points: Sequence[tuple[str, float, float]]) -> str:
    xs, ys = [p[1] for p in points], [p[2] for p in points]
    if len(set(xs)) < 2 or len(set(ys)) < 2:
        return f"Spearman ρ undefined (constant), n = {len(points)}"
    return f"Spearman ρ = {stats.spearmanr(xs, ys).statistic:+.2f}, n = {len(points)}"


def d0l_figure(variants: Sequence[ModelVariant], tasks: Sequence[str]) -> Figure | None:
    """d0L against the main score, one labelled point per model / variant, Spearman ρ and n in each
    title: one panel per task and, with several shared tasks, one for the means over the tasks every
    variant has. A panel needs :data:`MIN_SCATTER_POINTS` points (a rank correlation of fewer says
    nothing); ``None`` when no panel has them."""
    panels: list[tuple[str, list[tuple[str, float, float]]]] = []
    for task in tasks:
        points = []
        for variant in variants:
            record = variant.tasks.get(task)
            d0l = record.lrd_summary().get("frenet_d0L") if record else None
            if record is not None and d0l is not None and np.isfinite(d0l):
                points.append((point_label(variant), d0l, record.main_score * 100))
        panels.append((task, points))
    shared = shared_tasks(variants, tasks)
    if len(shared) > 1:
        points = []
        for variant in variants:
            d0l = mean_over([variant.tasks[t].lrd_summary().get("frenet_d0L") for t in shared])
            if d0l is not None:
                score = float(np.mean([variant.tasks[t].main_score for t in shared])) * 100
                points.append((point_label(variant), d0l, score))
        panels.append((f"mean over the {len(shared)} shared tasks", points))
    panels = [(f"{title}\n{_spearman_caption(points)}", points) for title, points in panels
              if len(points) >= MIN_SCATTER_POINTS]  # fmt: skip
    if not panels:
        return None
    figure, axes = panel_grid(len(panels), 5.2, 4.0)
    for axis, (title, points) in zip(axes, panels, strict=True):
        xs = [p[1] for p in points]
        ys = [p[2] for p in points]
        axis.scatter(xs, ys, s=30, color="C0", zorder=3)
        axis.margins(0.25)
        label_points(axis, points)
        axis.set_title(title, fontsize=PANEL_TEXT_SIZE)
        axis.set_xlabel(D0L, fontsize=PANEL_TEXT_SIZE)
        axis.set_ylabel("main score × 100")
        axis.grid(alpha=0.3)
    figure.suptitle("End-to-end displacement d0L vs main score (the paper's selection score)")
    return figure


def save_png(figure: Figure, path: str | Path) -> Path:
    """Render ``figure`` to PNG (110 dpi, title in the PNG metadata) and write it atomically."""
    buffer = io.BytesIO()
    title = figure.get_suptitle() or "mteb-lrd figure"
    figure.savefig(buffer, format="png", dpi=110, metadata={"Title": title, "Software": "mteb-lrd"})
    return atomic_write_bytes(path, buffer.getvalue())
