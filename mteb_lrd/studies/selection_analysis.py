"""Label-free model selection (spec §5): correlate model-level scores with task performance.

Pure numpy. The inputs are plain nested dicts so that studies, tests and notebooks can fill them:

* ``scores[task][model][score_name]`` — label-free, model-level scores measured on the task's texts
  (``frenet_d0L``, NRS / GFMI summaries, ``rankme``, ``alpha_req``);
* ``main[task][model]`` — the model's MTEB main score on the task;
* ``models[model]`` — covariates: ``params``, ``dim``, ``family``.

RankMe and α-ReQ, the final-layer baselines, are in :mod:`mteb_lrd.metrics.spectrum`.

Beyond the paper: partial Spearman correlations controlling for log(parameters), log(embedding
dimension), dimension and family, and leave-one-family-out correlations. ``reproduce="authors"``
computes the partial correlations as the authors' code does (Pearson on residuals of the raw values,
:func:`~mteb_lrd.metrics.statistics.partial_pearson`; they control for log(dim)) and recomputes the
Frenet summaries with their definitions from the recorded profiles. With a panel this small most controlled statistics
are undefined or weak; :func:`panel_caveats` says so in words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mteb_lrd.metrics.bootstrap import bootstrap_median_spearman
from mteb_lrd.metrics.permutation import holm, joint_permutation, spearman_difference
from mteb_lrd.metrics.statistics import Correlation, partial_pearson, partial_spearman, spearman
from mteb_lrd.metrics.summaries import REPRODUCE_MODES, authors_frenet_summary

__all__ = [
    "CONTROLS",
    "TaskSummary",
    "analyse_selection",
    "correlate_per_task",
    "STRONGEST_RIVALS",
    "leave_one_family_out",
    "model_level_tests",
    "panel_caveats",
    "partial_per_task",
    "record_scores",
    "records_reproduce",
    "score_tables",
    "strongest_tests",
    "summarise_tasks",
]

CONTROLS: tuple[str, ...] = ("log_params", "log_dim", "dim", "family")
MIN_MODELS = 4
STRONGEST_RIVALS: tuple[str, ...] = (
    "frenet_total_arc_length",
    "nrs_mean_jaccard",
    "nrs_jaccard_first_last",
    "gfmi_mean_auc",
    "gfmi_late_auc",
)
"""The LRD scores d0L is compared with before the paper's "d0L is the strongest" is judged."""


def _aligned(
    task_scores: Mapping[str, Mapping[str, float]], task_main: Mapping[str, float], name: str
) -> tuple[list[str], np.ndarray, np.ndarray]:
    models = sorted(
        m for m in task_scores if m in task_main and np.isfinite(task_scores[m].get(name, np.nan))
    )
    x = np.array([task_scores[m][name] for m in models], dtype=np.float64)
    y = np.array([task_main[m] for m in models], dtype=np.float64)
    return models, x, y


def correlate_per_task(
    scores: Mapping[str, Mapping[str, Mapping[str, float]]],
    main: Mapping[str, Mapping[str, float]],
    *,
    min_models: int = MIN_MODELS,
) -> dict[str, dict[str, Correlation]]:
    """Spearman ρ across models of every score against the main score, per task.

    A task is skipped for a score (absent from the result) with fewer than ``min_models`` models or
    a constant vector, as the spec says.

    Returns:
        ``{score_name: {task: Correlation}}``.
    """
    out: dict[str, dict[str, Correlation]] = {}
    for task, per_model in scores.items():
        names = sorted({name for values in per_model.values() for name in values})
        for name in names:
            models, x, y = _aligned(per_model, main.get(task, {}), name)
            if len(models) < min_models or np.ptp(x) == 0 or np.ptp(y) == 0:
                continue
            out.setdefault(name, {})[task] = spearman(x, y)
    return out


@dataclass(frozen=True)
class TaskSummary:
    """How one score correlates with performance over tasks (the paper's table)."""

    n_tasks: int
    median_rho: float
    mean_rho: float
    median_abs_rho: float
    n_p05: int
    n_p01: int
    n_positive: int
    n_negative: int

    def to_dict(self) -> dict[str, float | int]:
        """Plain-dict view (JSON / tables)."""
        return dict(self.__dict__)


def summarise_tasks(per_task: Mapping[str, Correlation]) -> TaskSummary:
    """Median / mean / median-|ρ| over tasks, tasks with p < .05 and < .01, signs."""
    rho = np.array([c.rho for c in per_task.values() if np.isfinite(c.rho)])
    p = np.array([c.p for c in per_task.values() if np.isfinite(c.rho)])
    if rho.size == 0:
        nan = float("nan")
        return TaskSummary(0, nan, nan, nan, 0, 0, 0, 0)
    return TaskSummary(
        n_tasks=int(rho.size),
        median_rho=float(np.median(rho)),
        mean_rho=float(rho.mean()),
        median_abs_rho=float(np.median(np.abs(rho))),
        n_p05=int(np.sum(p < 0.05)),
        n_p01=int(np.sum(p < 0.01)),
        n_positive=int(np.sum(rho > 0)),
        n_negative=int(np.sum(rho < 0)),
    )


def _covariates(models: list[str], info: Mapping[str, Mapping[str, Any]], control: str) -> np.ndarray:
    if control == "log_params":
        return np.log(np.array([[float(info[m]["params"])] for m in models]))
    if control == "log_dim":
        return np.log(np.array([[float(info[m]["dim"])] for m in models]))
    if control == "dim":
        return np.array([[float(info[m]["dim"])] for m in models])
    if control == "family":
        families = [str(info[m]["family"]) for m in models]
        levels = sorted(set(families))[1:]  # one-hot, first level dropped
        return np.array([[f == level for level in levels] for f in families], dtype=np.float64).reshape(
            len(models), len(levels)
        )
    raise ValueError(f"control must be one of {CONTROLS}, got {control!r}")


def partial_per_task(
    scores: Mapping[str, Mapping[str, Mapping[str, float]]],
    main: Mapping[str, Mapping[str, float]],
    models: Mapping[str, Mapping[str, Any]],
    control: str,
    *,
    min_models: int = MIN_MODELS,
    method: str = "spearman",
) -> dict[str, dict[str, Correlation]]:
    """Partial correlation per task and score, controlling for one of :data:`CONTROLS`.

    ``method``: ``"spearman"`` (ours, :func:`~mteb_lrd.metrics.statistics.partial_spearman`) or
    ``"pearson"`` (the authors', :func:`~mteb_lrd.metrics.statistics.partial_pearson`). NaN where
    the panel leaves no degree of freedom (e.g. five families among six models).
    """
    if control not in CONTROLS:
        raise ValueError(f"control must be one of {CONTROLS}, got {control!r}")
    if method not in ("spearman", "pearson"):
        raise ValueError(f"method must be 'spearman' or 'pearson', got {method!r}")
    partial = partial_spearman if method == "spearman" else partial_pearson
    out: dict[str, dict[str, Correlation]] = {}
    for task, per_model in scores.items():
        names = sorted({name for values in per_model.values() for name in values})
        for name in names:
            ids, x, y = _aligned(per_model, main.get(task, {}), name)
            if len(ids) < min_models or np.ptp(x) == 0 or np.ptp(y) == 0:
                continue
            z = _covariates(ids, models, control)
            if z.shape[1] == 0 or np.all(np.ptp(z, axis=0) == 0):
                out.setdefault(name, {})[task] = Correlation(float("nan"), float("nan"), len(ids))
                continue
            out.setdefault(name, {})[task] = partial(x, y, z)
    return out


def leave_one_family_out(
    scores: Mapping[str, Mapping[str, Mapping[str, float]]],
    main: Mapping[str, Mapping[str, float]],
    models: Mapping[str, Mapping[str, object]],
    *,
    min_models: int = MIN_MODELS,
) -> dict[str, dict[str, TaskSummary]]:
    """Task summaries recomputed with each family's models left out.

    Returns:
        ``{score_name: {left_out_family: TaskSummary}}``; a family whose removal leaves fewer than
        ``min_models`` models yields an empty summary (``n_tasks = 0``).
    """
    families = sorted({str(info["family"]) for info in models.values()})
    out: dict[str, dict[str, TaskSummary]] = {}
    for family in families:
        keep = {m for m, info in models.items() if str(info["family"]) != family}
        reduced = {t: {m: v for m, v in per.items() if m in keep} for t, per in scores.items()}
        per_score = correlate_per_task(reduced, main, min_models=min_models)
        names = {n for per in scores.values() for values in per.values() for n in values}
        for name in sorted(names):
            out.setdefault(name, {})[family] = summarise_tasks(per_score.get(name, {}))
    return out


def panel_caveats(models: Mapping[str, Mapping[str, object]], n_tasks: int) -> list[str]:
    """Plain-words limits of what a panel of this size can show."""
    n = len(models)
    families = {str(info["family"]) for info in models.values()}
    notes = []
    if n < MIN_MODELS:
        notes.append(
            f"only {n} models: per-task correlations need at least {MIN_MODELS}; nothing can be claimed."
        )
    elif n < 10:
        # With n models, |ρ| must exceed the two-sided .05 critical value to be significant (n=6: 0.886).
        notes.append(
            f"{n} models: a single task's Spearman ρ is significant at p < .05 only when |ρ| is very large "
            "(0.886 for n = 6); per-task significance counts are therefore low by construction, and signs "
            "and medians over tasks carry the evidence."
        )
    if len(families) >= n - 2:
        notes.append(
            f"{len(families)} families among {n} models: controlling for family leaves no degree of freedom; "
            "the family-controlled partial correlation is undefined (reported as NaN)."
        )
    if n_tasks < 5:
        notes.append(f"only {n_tasks} tasks: the over-task summaries are indicative, not tests.")
    return notes


def record_scores(rec: Mapping[str, Any], reproduce: str) -> dict[str, float]:
    """A cell's finite scores under ``reproduce``'s definitions: the authors' Frenet summaries are
    recomputed from the recorded profiles; a record without profiles (rebuilt from a tidy file)
    holds them in its mode's definitions already."""
    values = dict(rec["scores"])
    if reproduce == "authors" and "profiles" in rec:
        profiles = rec["profiles"]
        frenet = authors_frenet_summary(
            np.asarray(profiles["speed"], dtype=np.float64),
            np.asarray(profiles["curvature"], dtype=np.float64),
            float(values["frenet_d0L"]),
        )
        values.update({f"frenet_{k}": v for k, v in frenet.items()})
    return {k: float(v) for k, v in values.items() if v is not None and np.isfinite(v)}


def records_reproduce(records: Sequence[Mapping[str, Any]]) -> str:
    """The ``reproduce`` mode the records were measured in (``"ours"`` for records without one).

    Raises:
        ValueError: when the records mix modes (their extraction differs: not comparable).
    """
    modes = {str(rec.get("reproduce", "ours")) for rec in records}
    if len(modes) > 1:
        raise ValueError(f"the records mix reproduce modes {sorted(modes)}: analyse each folder separately")
    return modes.pop() if modes else "ours"


ALPHA = 0.05
"""The one significance level of the studies' reports."""


def model_level_tests(
    scores: Mapping[str, Mapping[str, Mapping[str, float]]], main: Mapping[str, Mapping[str, float]]
) -> dict[str, dict[str, Any]]:
    """Per score: the median ρ over tasks tested by relabelling the models jointly across tasks
    (:func:`~mteb_lrd.metrics.permutation.joint_permutation`, exact up to 10 models), on the models
    and tasks where every model has the score and neither it nor the main score is constant across
    the models (spec §5), then Holm's adjustment over the scores tested.

    Returns:
        ``{score: {"median_rho", "p", "p_holm", "exact", "n_models", "n_tasks", "ci_low", "ci_high"}}``
        (the interval: a bootstrap over models, the same draw for every task).
    """
    tasks = sorted(main)
    models = sorted(set.intersection(*(set(main[t]) for t in tasks))) if tasks else []
    names = sorted({name for t in tasks for values in scores.get(t, {}).values() for name in values})
    tested: dict[str, dict[str, Any]] = {}
    for name in names:
        usable = [t for t in tasks if all(np.isfinite(scores.get(t, {}).get(m, {}).get(name, np.nan))
                                          for m in models)]  # fmt: skip
        x = np.array([[scores[t][m][name] for m in models] for t in usable]).reshape(len(usable), len(models))
        y = np.array([[main[t][m] for m in models] for t in usable]).reshape(len(usable), len(models))
        varies = (np.ptp(x, axis=1) > 0) & (
            np.ptp(y, axis=1) > 0
        )  # spec §5: a constant vector skips its task
        usable, x, y = [t for t, keep in zip(usable, varies, strict=True) if keep], x[varies], y[varies]
        if len(models) < MIN_MODELS or not usable:
            continue
        test = joint_permutation(x, y)
        interval = bootstrap_median_spearman(x, y)
        tested[name] = {"median_rho": test.statistic, "p": test.p, "exact": test.exact, "n_models": test.n,
                        "n_tasks": len(usable), "ci_low": float(interval.low[0]),
                        "ci_high": float(interval.high[0])}  # fmt: skip
    if tested:
        adjusted = holm([entry["p"] for entry in tested.values()])
        for entry, p_holm in zip(tested.values(), adjusted, strict=True):
            entry["p_holm"] = float(p_holm)
    return tested


def strongest_tests(
    scores: Mapping[str, Mapping[str, Mapping[str, float]]],
    main: Mapping[str, Mapping[str, float]],
    reference: str,
    others: Sequence[str],
) -> dict[str, dict[str, Any]]:
    """Does ``reference`` predict the main score better than each of ``others``?

    Per comparison: ρ(reference) − ρ(other) averaged over the tasks where every model has both
    scores, with the permutation test that swaps each model's two ranks
    (:func:`~mteb_lrd.metrics.permutation.spearman_difference`), then Holm over the comparisons.

    Returns:
        ``{other: {"difference", "p", "p_holm", "exact", "n_models", "n_tasks"}}`` (only comparisons
        with at least :data:`MIN_MODELS` models and one task).
    """
    tasks = sorted(main)
    models = sorted(set.intersection(*(set(main[t]) for t in tasks))) if tasks else []
    tested: dict[str, dict[str, Any]] = {}
    for other in others:
        usable = [t for t in tasks if all(np.isfinite(scores.get(t, {}).get(m, {}).get(k, np.nan))
                                          for m in models for k in (reference, other))]  # fmt: skip
        if other == reference or len(models) < MIN_MODELS or not usable:
            continue
        a, b = (np.array([[scores[t][m][k] for m in models] for t in usable]) for k in (reference, other))
        y = np.array([[main[t][m] for m in models] for t in usable])
        test = spearman_difference(a, b, y)
        tested[other] = {"difference": test.statistic, "p": test.p, "exact": test.exact,
                         "n_models": test.n, "n_tasks": len(usable)}  # fmt: skip
    if tested:
        for entry, p_holm in zip(tested.values(), holm([e["p"] for e in tested.values()]), strict=True):
            entry["p_holm"] = float(p_holm)
    return tested


def score_tables(
    records: Sequence[Mapping[str, Any]], reproduce: str
) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, dict[str, float]], dict[str, dict[str, Any]]]:
    """The cells as ``(scores[task][model][name], main[task][model], models[model])``, scores under
    ``reproduce``'s definitions (:func:`record_scores`)."""
    scores: dict[str, dict[str, dict[str, float]]] = {}
    main: dict[str, dict[str, float]] = {}
    models: dict[str, dict[str, Any]] = {}
    for rec in records:
        model, task = rec["model"]["name"], rec["task"]
        scores.setdefault(task, {})[model] = record_scores(rec, reproduce)
        main.setdefault(task, {})[model] = float(rec["main_score"])
        models[model] = rec["model"]
    return scores, main, models


def analyse_selection(
    records: Sequence[Mapping[str, Any]], *, min_models: int = 4, reproduce: str | None = None
) -> dict[str, Any]:
    """Per-task correlations, over-task summaries, controls and caveats from cell records.

    Args:
        records: cell records of the selection study.
        min_models: fewest models a task needs for a correlation.
        reproduce: ``"ours"`` or ``"authors"`` (Frenet summaries recomputed with the authors'
            definitions from the recorded profiles, partial correlations as partial Pearson);
            ``None``: the mode the records were measured in.

    Returns:
        A JSON-serialisable dict with ``models``, ``tasks``, ``table`` (per cell), ``per_task``
        (score → task → ρ, p, n), ``summary`` (score → over-task summary), ``model_level`` (score →
        joint permutation test over models with its Holm-adjusted p, :func:`model_level_tests`), ``partial``
        (control → score → summary), ``lofo`` (score → family → summary) and ``caveats``.
    """
    mode = records_reproduce(records) if reproduce is None else reproduce
    if mode not in REPRODUCE_MODES:
        raise ValueError(f"reproduce must be one of {REPRODUCE_MODES}; got {mode!r}")
    method = "pearson" if mode == "authors" else "spearman"
    scores, main, models = score_tables(records, mode)
    per_task = correlate_per_task(scores, main, min_models=min_models)
    summary = {name: summarise_tasks(per).to_dict() for name, per in per_task.items()}
    partial = {
        control: {
            name: summarise_tasks(per).to_dict()
            for name, per in partial_per_task(
                scores, main, models, control, min_models=min_models, method=method
            ).items()
        }
        for control in CONTROLS
    }
    lofo = {
        name: {family: s.to_dict() for family, s in per.items()}
        for name, per in leave_one_family_out(scores, main, models, min_models=min_models).items()
    }
    return {
        "reproduce": mode,
        "partial_method": method,
        "models": models,
        "tasks": sorted(main),
        "main": main,
        "scores": scores,
        "per_task": {
            name: {task: {"rho": c.rho, "p": c.p, "n": c.n} for task, c in per.items()}
            for name, per in per_task.items()
        },
        "summary": summary,
        "model_level": model_level_tests(scores, main),
        "strongest": {
            "reference": "frenet_d0L",
            "against": strongest_tests(scores, main, "frenet_d0L", STRONGEST_RIVALS),
        },  # fmt: skip
        "alpha": ALPHA,
        "partial": partial,
        "lofo": lofo,
        "caveats": panel_caveats(models, len(main)),
    }
