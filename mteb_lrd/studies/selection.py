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

import numpy as np

from mteb_lrd.studies.selection_analysis import (
    CONTROLS,
    correlate_per_task,
    leave_one_family_out,
    panel_caveats,
    partial_per_task,
    summarise_tasks,
)
from mteb_lrd.studies.runner import (
    StudyModel,
    load_records,
    load_study_model,
    mteb_encoder,
    mteb_score,
    read_record,
    task_texts,
    write_record,
)

__all__ = ["HEADLINE_SCORES", "analyse_selection", "load_records", "measure_cell", "run_selection_study"]

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


def _record_path(out_dir: Path, model: str, task: str) -> Path:
    return out_dir / "records" / model.replace("/", "__") / f"{task}.json"


def measure_cell(
    model: StudyModel, task: type, *, text_cap: int, seed: int, batch_size: int, lrd_kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """LRD summaries, RankMe / α-ReQ of the final layer, and the MTEB main score of one cell."""
    from mteb_lrd.extraction.extractor import LayerExtractor
    from mteb_lrd.metrics import lrd, subsample
    from mteb_lrd.studies.selection_analysis import alpha_req, rankme

    instance = task()
    texts = task_texts(instance)
    index = subsample(len(texts), text_cap, seed)
    chosen = [texts[i] for i in index]
    extractor = LayerExtractor(
        model.model,
        model.tokenizer,
        batch_size=batch_size,
        max_length=model.max_length,
        show_progress_bar=False,
    )
    states = extractor.extract(chosen).states
    k_limit = len(chosen) - 1
    kwargs = {"seed": seed, **lrd_kwargs}
    kwargs["nrs_k"] = min(int(kwargs.get("nrs_k", 20)), k_limit)
    kwargs["gfmi_k"] = min(int(kwargs.get("gfmi_k", 30)), k_limit)
    result = lrd(states, **kwargs)
    scores = dict(result.summary())
    scores["rankme"] = rankme(states[-1])
    scores["alpha_req"] = alpha_req(states[-1])
    encoder = mteb_encoder(model)
    score = mteb_score(encoder, instance, batch_size=batch_size)
    return {
        "model": model.info(),
        "task": task.metadata.name,
        "task_type": task.metadata.type,
        "main_score": score["main_score"],
        "main_score_name": task.metadata.main_score,
        "mteb_seconds": score["seconds"],
        "n_texts": len(texts),
        "n_used": len(chosen),
        "lrd_params": kwargs,
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
        lrd_kwargs: extra parameters of :func:`mteb_lrd.metrics.lrd` (``nrs_k``, ``gfmi_k``, ...).
        progress: called with one line per cell; ``None`` for silence.

    Returns:
        ``out_dir``.
    """
    if isinstance(text_cap, bool) or not isinstance(text_cap, int) or text_cap < 4:
        raise ValueError(f"text_cap must be an integer >= 4, got {text_cap!r}")
    if not models or not tasks:
        raise ValueError("need at least one model and one task")
    say = progress or (lambda _message: None)
    out = Path(out_dir)
    for spec in models:
        name = spec.name if isinstance(spec, StudyModel) else str(spec)
        label = Path(name).name if Path(name).is_dir() else name
        missing = [t for t in tasks if read_record(_record_path(out, label, t)) is None]
        if not missing:
            say(f"{label}: all {len(tasks)} tasks recorded")
            continue
        model = spec if isinstance(spec, StudyModel) else load_study_model(str(spec), max_length=max_length)
        for task_name in missing:
            say(f"{model.name} × {task_name}")
            record = measure_cell(
                model,
                tasks[task_name],
                text_cap=text_cap,
                seed=seed,
                batch_size=batch_size,
                lrd_kwargs=lrd_kwargs or {},
            )
            write_record(_record_path(out, model.name, task_name), record)
            say(f"  main {record['main_score']:.4f}, d0L {record['scores']['frenet_d0L']:.3f}")
    return out


def analyse_selection(records: Sequence[Mapping[str, Any]], *, min_models: int = 4) -> dict[str, Any]:
    """Per-task correlations, over-task summaries, controls and caveats from cell records.

    Returns:
        A JSON-serialisable dict with ``models``, ``tasks``, ``table`` (per cell), ``per_task``
        (score → task → ρ, p, n), ``summary`` (score → over-task summary), ``partial``
        (control → score → summary), ``lofo`` (score → family → summary) and ``caveats``.
    """
    scores: dict[str, dict[str, dict[str, float]]] = {}
    main: dict[str, dict[str, float]] = {}
    models: dict[str, dict[str, Any]] = {}
    for rec in records:
        model, task = rec["model"]["name"], rec["task"]
        values = {k: float(v) for k, v in rec["scores"].items() if v is not None and np.isfinite(v)}
        scores.setdefault(task, {})[model] = values
        main.setdefault(task, {})[model] = float(rec["main_score"])
        models[model] = rec["model"]
    per_task = correlate_per_task(scores, main, min_models=min_models)
    summary = {name: summarise_tasks(per).to_dict() for name, per in per_task.items()}
    partial = {
        control: {
            name: summarise_tasks(per).to_dict()
            for name, per in partial_per_task(scores, main, models, control, min_models=min_models).items()
        }
        for control in CONTROLS
    }
    lofo = {
        name: {family: s.to_dict() for family, s in per.items()}
        for name, per in leave_one_family_out(scores, main, models, min_models=min_models).items()
    }
    return {
        "models": models,
        "tasks": sorted(main),
        "main": main,
        "scores": scores,
        "per_task": {
            name: {task: {"rho": c.rho, "p": c.p, "n": c.n} for task, c in per.items()}
            for name, per in per_task.items()
        },
        "summary": summary,
        "partial": partial,
        "lofo": lofo,
        "caveats": panel_caveats(models, len(main)),
    }
