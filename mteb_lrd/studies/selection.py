"""The label-free model-selection study: measure, score with MTEB, correlate (spec §5).

For every (model, task): the task's texts (spec §1 rule, rows interleaved like the authors'; each
family on its own seed-42 sub-sample, caps 1000 / 1000 / 5000 by default) go through one extraction
pass over the union of the sub-samples → LRD summaries and the final layer's RankMe / α-ReQ (on the
GFMI sub-sample, the largest); the model is scored by
``mteb.evaluate`` through the layer-dynamics wrapper. Each cell is written as its own JSON record,
so an interrupted study resumes where it stopped. :func:`analyse_selection` then computes the
per-task Spearman ρ, the over-task summaries, partial correlations and leave-one-family-out.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mteb_lrd.adapter.provenance import run_provenance
from mteb_lrd.metrics.spectrum import alpha_req, rankme
from mteb_lrd.studies.known_vectors import KnownVectors
from mteb_lrd.studies.options import CellOptions
from mteb_lrd.studies.records import read_record, record_path, scratch_path
from mteb_lrd.studies.runner import (
    StudyModel,
    lrd_prompt,
    mteb_encoder,
    mteb_score,
    profile_cell,
    profile_outputs,
    run_cells,
    task_texts,
)

__all__ = ["HEADLINE_SCORES", "borrowed_score", "measure_selection_cell", "run_selection_study"]

logger = logging.getLogger(__name__)

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


def _source_record(source: Path, model: str, task: str) -> dict[str, Any] | None:
    """The record of the cell (``model``, ``task``) in a study folder or a tidy record file."""
    if source.suffix == ".csv":
        from mteb_lrd.studies.tidy import read_rows, records_from_rows

        cells = records_from_rows(r for r in read_rows(source) if r["model"] == model and r["task"] == task)
        if cells and "main_score" not in cells[0]:
            raise ValueError(f"--scores-from {source}: not a selection study's records")
        return cells[0] if cells else None
    return read_record(record_path(source, model, task))


def borrowed_score(source: str | Path, model: StudyModel, task: Any, n_texts: int) -> dict[str, Any] | None:
    """The MTEB main score another study recorded for the same cell, or ``None``.

    ``source`` is a study folder or its tidy record file (``mteb-lrd report --export-records``:
    a study whose folder is gone). The score does not depend on the LRD options (caps, prompt
    policy, ``reproduce``), so a second study over the same cells can read it. It is taken only
    when that record scored the same task texts with the same main score, template and truncation
    (a tidy file written before it kept the truncation is trusted on it, with a warning); otherwise
    the cell is scored.
    """
    record = _source_record(Path(source), model.name, task.metadata.name)
    if record is None:
        return None
    truncation = record.get("model", {}).get("max_length")  # None: the model's own limit
    unrecorded = (
        "max_length" not in record.get("model", {}) and Path(source).suffix == ".csv"
    )  # older tidy files
    same = (
        record.get("n_texts") == n_texts
        and record.get("main_score_name") == task.metadata.main_score
        and record.get("model", {}).get("template") == model.template
        and (truncation == model.max_length or unrecorded)
    )
    if same and unrecorded:
        logger.warning(f"  {source}: the truncation of {model.name} × {task.metadata.name} is not recorded; "
                       f"its score is taken as made with {model.max_length} tokens")  # fmt: skip
    if not same:
        logger.warning(
            f"  {source}: {model.name} × {task.metadata.name} was scored on other settings; scoring"
        )
        return None
    return {"main_score": record["main_score"], "seconds": record.get("mteb_seconds"), "from": str(source)}


def measure_selection_cell(
    model: StudyModel,
    task: Any,
    options: CellOptions,
    scores_from: str | Path | None = None,
    scratch: Path | None = None,
) -> dict[str, Any]:
    """LRD summaries, RankMe / α-ReQ of the final layer, and the MTEB main score of one cell.

    ``reproduce="authors"`` also means no prompt for LRD (the authors use none). With
    ``scores_from`` (a study folder or its tidy CSV), the main score is read from its record of the cell when it
    scored the same texts (:func:`borrowed_score`). With ``scratch`` (the cell's
    :func:`~mteb_lrd.studies.records.scratch_path`), the extraction passes keep their shards there, so
    an interrupted cell resumes them.
    """
    instance = task()
    texts = task_texts(instance, options.text_order)
    policy = "none" if options.reproduce == "authors" else options.prompt_policy
    prompt = lrd_prompt(model, task.metadata, policy)
    cell = profile_cell(
        model,
        texts,
        caps=options.caps,
        seed=options.seed,
        batch_size=options.batch_size,
        reproduce=options.reproduce,
        prompt=prompt,
        cache_dir=None if scratch is None else scratch / "profile",
        **options.lrd_kwargs,
    )
    result = cell.dynamics.result
    scores = dict(cell.dynamics.summary())
    final = cell.states[-1][cell.rows["gfmi"]]
    scores["rankme"] = rankme(final)
    scores["alpha_req"] = alpha_req(final)
    score = borrowed_score(scores_from, model, task, len(texts)) if scores_from is not None else None
    encoder = None
    if score is None:
        encoder = mteb_encoder(model, cache_dir=None if scratch is None else scratch / "scoring")
        if options.reproduce == "ours":  # the authors' last-token rule makes the profile's outputs differ
            encoder = KnownVectors(encoder, profile_outputs(cell, prompt))
        score = mteb_score(encoder, instance, batch_size=options.batch_size)
    caps = options.caps
    return {
        "model": model.info(),
        "task": task.metadata.name,
        "task_type": task.metadata.type,
        "main_score": score["main_score"],
        "main_score_name": task.metadata.main_score,
        "mteb_seconds": score["seconds"],
        "main_score_from": score.get("from"),
        "outputs_reused": encoder.served if isinstance(encoder, KnownVectors) else 0,
        "n_texts": len(texts),
        "n_used": len(cell.texts),
        "n_per_family": {name: int(rows.size) for name, rows in cell.rows.items()},
        "caps": {"frenet": caps.frenet, "nrs": caps.nrs, "gfmi": caps.gfmi},
        "text_order": options.text_order,
        "reproduce": options.reproduce,
        # scores that read an uninformative state: null under ours, as computed under the authors'
        "undefined_states": "null" if options.reproduce == "ours" else "as computed",
        "undefined": result.undefined if options.reproduce == "ours" else {},
        "prompt": prompt,
        "extraction": cell.dynamics.extraction,
        "lrd_params": result.params,
        "run": run_provenance(),
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
    options: CellOptions | None = None,
    scores_from: str | Path | None = None,
) -> Path:
    """Measure and score every (model, task) cell not recorded yet in ``out_dir/records``.

    Args:
        models: panel names, model folders or loaded :class:`StudyModel` objects.
        tasks: ``{name: task class}`` (e.g. from :func:`mteb_lrd.studies.tasks.study_tasks`).
        out_dir: the study folder (records, then the report).
        options: how each cell is measured (:class:`~mteb_lrd.studies.options.CellOptions`;
            RankMe / α-ReQ use the GFMI sub-sample).
        scores_from: a study folder whose records give the main scores of the same cells
            (:func:`borrowed_score`), e.g. the ``reproduce="ours"`` study beside an authors' one.

    Progress goes to this module's logger, one INFO line per cell.

    Returns:
        ``out_dir``.
    """
    options = CellOptions() if options is None else options

    def measure(model: StudyModel, name: str, task: type) -> dict[str, Any]:
        record = measure_selection_cell(
            model, task, options, scores_from, scratch_path(out_dir, model.name, name)
        )
        logger.info(f"  main {record['main_score']:.4f}, d0L {record['scores']['frenet_d0L']:.3f}")
        return record

    return run_cells(
        models,
        tasks,
        out_dir,
        measure,
        max_length=options.max_length,
        decoder_template=options.decoder_template,
    )
