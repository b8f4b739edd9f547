"""Layer dynamics over a training run: the evaluator's CSV or the trainer's ``trainer_state.json`` drawn
as LRD scores per checkpoint and per-layer STS curves per checkpoint."""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from mteb_lrd.report.plots import save_png

__all__ = [
    "SCORE_NAMES",
    "TrainingLog",
    "range_note",
    "read_training_log",
    "score_name",
    "training_figure",
    "write_training_figure",
]

_KEY = re.compile(r"(?:^|_)((?:frenet|nrs|gfmi)_\w+|spearman_cosine(?:_h\d+)?)$")
_LAYER = re.compile(r"^spearman_cosine_h(\d+)$")
_BAND = ("_low", "_high")

SCORE_NAMES: dict[str, str] = {
    "frenet_d0L": "d0L: Frenet end-to-end displacement [rad]",
    "frenet_total_arc_length": "Frenet arc length [rad]",
    "frenet_mean_speed": "Frenet mean speed [rad]",
    "frenet_mean_curvature": "Frenet mean curvature [1/rad]",
    "nrs_mean_jaccard": "NRS mean Jaccard retention",
    "nrs_jaccard_first_last": "NRS first→last Jaccard retention",
    "gfmi_mean_auc": "GFMI mean AUC [nats × percentile]",
    "spearman_cosine": "STS Spearman ρ (cosine vs gold)",
}
"""The papers' names of the logged scores, with units, for titles and axes."""

_FAMILIES = {"frenet": "Frenet", "nrs": "NRS", "gfmi": "GFMI"}


def score_name(key: str) -> str:
    """A logged score's name as the papers write it, with its unit where it has one."""
    if key in SCORE_NAMES:
        return SCORE_NAMES[key]
    family, _, rest = key.partition("_")
    return f"{_FAMILIES.get(family, family)} {rest.replace('_', ' ')}".strip()


def range_note(values: np.ndarray) -> str:
    """How far a score moved over the run, so a small change reads as small whatever the autoscaled
    axis: ``"range 11.00–11.12 (Δ 0.12, 1.1 % of the start)"``."""
    finite = values[np.isfinite(values)]
    if not finite.size:
        return "undefined at every evaluation"
    low, high = float(finite.min()), float(finite.max())
    share = f", {100 * (high - low) / abs(finite[0]):.1f} % of the start" if finite[0] else ""
    return f"range {low:.4g}–{high:.4g} (Δ {high - low:.3g}{share})"


@dataclass(frozen=True)
class TrainingLog:
    """The evaluator's metrics at each evaluation of a run.

    Attributes:
        steps: ``(n,)`` global step of each evaluation (the evaluation's number when steps are unknown).
        step_label: what ``steps`` counts (``"training step"`` or ``"evaluation"``).
        scores: LRD score name → ``(n,)`` values (``frenet_d0L``, …; ``spearman_cosine`` with pairs).
        layers: ``(n, L+1)`` per-layer Spearman of each evaluation, or ``None`` without pairs.
        bands: score name → ``(low, high)`` bootstrap bounds at each evaluation, for the scores the
            log has them for (the evaluator's ``bootstrap``: ``<score>_low`` / ``<score>_high``).
    """

    steps: np.ndarray
    step_label: str
    scores: dict[str, np.ndarray]
    layers: np.ndarray | None
    bands: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


def _rows_from_csv(path: Path) -> list[dict[str, float]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(fh)]


def _rows_from_trainer_state(path: Path) -> list[dict[str, float]]:
    history = json.loads(path.read_text(encoding="utf-8")).get("log_history")
    if not isinstance(history, list):
        raise ValueError(f"{path} has no log_history list: not a trainer_state.json")
    rows = []
    for entry in history:
        metrics = {k.removeprefix("eval_"): v for k, v in entry.items() if k.startswith("eval_")}
        if any(_KEY.search(k) for k in metrics):
            rows.append({"steps": float(entry.get("step", -1)), **metrics})
    return rows


def read_training_log(path: str | Path) -> TrainingLog:
    """Read the evaluator's CSV (``layer_dynamics_evaluation_*_results.csv``) or a
    ``trainer_state.json`` whose log history holds the evaluator's metrics.

    Raises:
        ValueError: a file without any layer-dynamics metric, or with unreadable values.
        FileNotFoundError: a missing file.
    """
    source = Path(path)
    if not source.is_file():
        raise FileNotFoundError(f"no such training log: {source}")
    try:
        rows = _rows_from_trainer_state(source) if source.suffix == ".json" else _rows_from_csv(source)
    except (ValueError, json.JSONDecodeError) as error:
        raise ValueError(f"{source}: not a layer-dynamics training log ({error})") from None
    columns = list(rows[0]) if rows else []
    bounds = {
        c for c in columns if c.endswith(_BAND) and all(c.rsplit("_", 1)[0] + e in columns for e in _BAND)
    }
    keys = {match.group(1): k for k in columns if k not in bounds and (match := _KEY.search(k))}
    if not keys:
        raise ValueError(
            f"{source} holds no layer-dynamics metric (frenet_*, nrs_*, gfmi_*, spearman_cosine*)"
        )
    steps = np.array([row.get("steps", -1.0) for row in rows])
    known = bool(np.all(steps >= 0))
    layer_keys = sorted((int(m.group(1)), k) for short, k in keys.items() if (m := _LAYER.match(short)))
    layers = np.array([[row[k] for _, k in layer_keys] for row in rows]) if layer_keys else None
    scores = {
        short: np.array([row[k] for row in rows]) for short, k in keys.items() if not _LAYER.match(short)
    }
    bands = {short: (np.array([row[k + "_low"] for row in rows]), np.array([row[k + "_high"] for row in rows]))
             for short, k in keys.items() if k + "_low" in bounds}  # fmt: skip
    return TrainingLog(steps if known else np.arange(1.0, len(rows) + 1), "training step" if known else "evaluation",
                       scores, layers, bands)  # fmt: skip


def training_figure(log: TrainingLog, title: str = "Layer dynamics during training") -> Figure:
    """One panel per score against the step, and (with pairs) the per-layer Spearman of every
    evaluation, coloured from the first (light) to the last (dark)."""
    panels = len(log.scores) + (log.layers is not None)
    columns = min(3, panels)
    rows = -(-panels // columns)
    fig = Figure(figsize=(4.2 * columns, 3.2 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for axis, (name, values) in zip(axes, log.scores.items(), strict=False):
        axis.plot(log.steps, values, marker="o", ms=3)
        if name in log.bands:
            low, high = log.bands[name]
            axis.fill_between(
                log.steps, low, high, alpha=0.25, linewidth=0, label="95 % bootstrap over pairs"
            )
            axis.legend(fontsize=7, loc="best")
        axis.set_xlabel(log.step_label, fontsize=9)
        axis.set_ylabel(score_name(name), fontsize=8)
        axis.set_title(
            f"{score_name(name)}\n{range_note(values)}", fontsize=9
        )  # the range: small moves read small
        axis.grid(alpha=0.3)
    if log.layers is not None:
        axis = axes[len(log.scores)]
        shades = np.linspace(0.25, 1.0, log.layers.shape[0])
        for shade, step, curve in zip(shades, log.steps, log.layers, strict=True):
            axis.plot(np.arange(curve.size), curve, color=(0.1, 0.3, 0.7, shade), label=f"{step:g}")
        axis.set_xlabel("hidden state h_l")
        axis.set_ylabel("Spearman ρ (cosine vs gold)")
        axis.set_title(
            f"per-layer STS, light → dark = {log.step_label} {log.steps[0]:g} → {log.steps[-1]:g}", fontsize=9
        )
        axis.grid(alpha=0.3)
    for axis in axes[panels:]:
        axis.set_visible(False)
    fig.suptitle(title)
    return fig


def write_training_figure(path: str | Path, output: str | Path) -> Path:
    """Read a training log (:func:`read_training_log`) and write ``<output>/training.png``; returns its path."""
    log = read_training_log(path)
    return save_png(
        training_figure(log, f"Layer dynamics during training ({Path(path).name})"),
        Path(output) / "training.png",
    )
