"""The label-free model-selection study: measure, score with MTEB, correlate (spec §5).

For every (model, task): the task's texts (spec §1 rule, capped with seed 42) go through one
extraction pass → LRD summaries and the final layer's RankMe / α-ReQ; the model is scored by
``mteb.evaluate`` through the layer-dynamics wrapper. Each cell is written as its own JSON record,
so an interrupted study resumes where it stopped. :func:`analyse_selection` then computes the
per-task Spearman ρ, the over-task summaries, partial correlations and leave-one-family-out.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mteb_lrd.metrics.spectrum import alpha_req, rankme
from mteb_lrd.studies.runner import StudyModel, mteb_encoder, mteb_score, profile_cell, run_cells, task_texts

__all__ = ["HEADLINE_SCORES", "measure_cell", "run_selection_study"]

HEADLINE_SCORES: tuple[str, ...] = (
    "frenet_d0L",
    "frenet_total_arc_length",
    "nrs_mean_jaccard",
    "nrs_jaccard_first_last",
    "gfmi_mean_auc",
    "gfmi_late_auc",
    "rankme",
    "alpha_req",
)


def _say(message: str) -> None:
    print(f"[mteb-lrd select] {message}", file=sys.stderr, flush=True)


def measure_cell(
    model: StudyModel, task: type, *, text_cap: int, seed: int, batch_size: int, lrd_kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """LRD summaries, RankMe / α-ReQ of the final layer, and the MTEB main score of one cell."""
    instance = task()
    texts = task_texts(instance)
    chosen, states, result = profile_cell(
        model, texts, text_cap=text_cap, seed=seed, batch_size=batch_size, **lrd_kwargs
    )
    scores = dict(result.summary())
    scores["rankme"] = rankme(states[-1])
    scores["alpha_req"] = alpha_req(states[-1])
    score = mteb_score(mteb_encoder(model), instance, batch_size=batch_size)
    return {
        "model": model.info(),
        "task": task.metadata.name,
        "task_type": task.metadata.type,
        "main_score": score["main_score"],
        "main_score_name": task.metadata.main_score,
        "mteb_seconds": score["seconds"],
        "n_texts": len(texts),
        "n_used": len(chosen),
        "lrd_params": result.params,
        "scores": scores,
        "profiles": {
            "speed": result.frenet.speed,
            "curvature": result.frenet.curvature,
            "jaccard": result.nrs.jaccard,
            "gfmi_auc": result.gfmi.auc,
        },
    }


def run_selection_study(
    models: Sequence[str | StudyModel],
    tasks: Mapping[str, type],
    out_dir: str | Path,
    *,
    text_cap: int = 500,
    seed: int = 42,
    batch_size: int = 32,
    max_length: int = 512,
    lrd_kwargs: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] | None = _say,
) -> Path:
    """Measure and score every (model, task) cell not recorded yet in ``out_dir/records``.

    Args:
        models: panel names, model folders or loaded :class:`StudyModel` objects.
        tasks: ``{name: task class}`` (e.g. from :func:`mteb_lrd.studies.tasks.study_tasks`).
        out_dir: the study folder (records, then the report).
        text_cap: at most this many texts per task for the LRD metrics and RankMe / α-ReQ.
        seed: sub-sampling / anchor seed.
        batch_size: encode batch size.
        max_length: token truncation for every model.
        lrd_kwargs: metric parameters (:class:`mteb_lrd.parameters.MetricParams` fields).
        progress: called with one line per cell; ``None`` for silence.

    Returns:
        ``out_dir``.
    """
    if isinstance(text_cap, bool) or not isinstance(text_cap, int) or text_cap < 4:
        raise ValueError(f"text_cap must be an integer >= 4, got {text_cap!r}")
    say = progress or (lambda _message: None)

    def measure(model: StudyModel, _name: str, task: type) -> dict[str, Any]:
        record = measure_cell(
            model, task, text_cap=text_cap, seed=seed, batch_size=batch_size, lrd_kwargs=lrd_kwargs or {}
        )
        say(f"  main {record['main_score']:.4f}, d0L {record['scores']['frenet_d0L']:.3f}")
        return record

    return run_cells(models, tasks, out_dir, measure, max_length=max_length, progress=say)
