"""The layer-pruning study (spec §6): LRD-guided rules against baselines, scored by MTEB.

For every (model, task) cell: one extraction pass on the task's texts (label-free; each family on its
own sub-sample, caps 1000 / 1000 / 5000 by default) gives the LRD profiles → rule scores (Frenet,
NRS, GFMI, composite); the angular-distance matrix and a token-level pass for ShortGPT block
influence use the Frenet sub-sample. Every method chooses hidden-state ids among the candidates
(protect 3 at each end) at every budget; ids become blocks by the chosen mapping (the reference's by
default) and each distinct block set is removed physically (:func:`mteb_lrd.prune`) and scored with
``mteb.evaluate``. Cells are recorded as JSON; until a cell's record is written its scratch folder
keeps the profile's extraction shards and the finished variants' scores, so an interrupted cell
resumes where it stopped and a finished one leaves nothing behind.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mteb_lrd.adapter.provenance import run_provenance
from mteb_lrd.pruning.choose import method_choices
from mteb_lrd.pruning.rules import (
    RULES,
    angular_distance_matrix,
    block_key,
    candidate_block_sets,
    rule_scores,
)
from mteb_lrd.studies.options import CellOptions, PruneStudyOptions
from mteb_lrd.studies.records import read_record, scratch_path, write_record
from mteb_lrd.studies.runner import (
    StudyModel,
    lrd_prompt,
    mteb_encoder,
    mteb_score,
    profile_cell,
    run_cells,
    task_texts,
)

__all__ = [
    "METHODS",
    "measure_pruning_cell",
    "measure_speedup",
    "run_prune_study",
]

logger = logging.getLogger(__name__)

METHODS: tuple[str, ...] = (*RULES, "random", "last-k", "shortgpt", "angular")


def _encode_once(model: StudyModel, texts: list[str], batch_size: int) -> float:
    import torch

    start = time.perf_counter()
    with torch.no_grad():
        if model.tokenizer is None:
            model.model.encode(texts, batch_size=batch_size, show_progress_bar=False)
        else:
            for i in range(0, len(texts), batch_size):
                enc = model.tokenizer(
                    texts[i : i + batch_size],
                    padding=True,
                    truncation=True,
                    max_length=model.max_length,
                    return_tensors="pt",
                )
                model.model(**{k: v for k, v in enc.items() if k in ("input_ids", "attention_mask")})
    return time.perf_counter() - start


def measure_speedup(
    base: StudyModel, pruned: StudyModel, texts: list[str], batch_size: int, rounds: int = 3
) -> float:
    """Encode speed-up of ``pruned`` over ``base``: best-of-``rounds`` times, measured interleaved.

    Interleaving (base, pruned, base, pruned, ...) keeps both under the same machine load, which
    matters on a shared machine where the load drifts within minutes.
    """
    base_times, pruned_times = [], []
    for _ in range(rounds):
        base_times.append(_encode_once(base, texts, batch_size))
        pruned_times.append(_encode_once(pruned, texts, batch_size))
    return min(base_times) / min(pruned_times)


def _pruned(model: StudyModel, blocks: list[int]) -> tuple[StudyModel, Any]:
    """The pruned model (for timing) and what mteb scores: the pruned copy (a SentenceTransformer or a
    transformers model, its pruning record on the config)."""
    from mteb_lrd.pruning.pruned import pruned_copy

    if not blocks:
        return model, model.model
    pruned = pruned_copy(model.model, blocks)
    return dataclasses.replace(model, model=pruned, layers=model.layers - len(blocks)), pruned


def measure_pruning_cell(
    model: StudyModel,
    task: Any,
    options: CellOptions,
    pruning: PruneStudyOptions,
    speed_cache: dict[int, float],
    scratch: Path,
) -> dict[str, Any]:
    """Profiles, choices and the MTEB score of every distinct pruned variant of one cell.

    Args:
        model / task: the cell.
        options / pruning: how the cell is measured and what is compared.
        speed_cache: speed-up per number of removed blocks of this model (timed once per count).
        scratch: the cell's :func:`~mteb_lrd.studies.records.scratch_path`: its profile's extraction
            shards (``profile/``), the finished variants' scores (``variants.json``) and shared-prefix
            vectors (``vectors/``) wait there, so an interrupted cell resumes them.
    """
    texts = task_texts(task(), options.text_order)
    policy = "none" if options.reproduce == "authors" else options.prompt_policy
    prompt = lrd_prompt(model, task.metadata, policy)
    cell = profile_cell(model, texts, caps=options.caps, seed=options.seed, batch_size=options.batch_size,
                        reproduce=options.reproduce, prompt=prompt,
                        cache_dir=scratch / "profile")  # fmt: skip
    measured = cell.dynamics.result
    if cell.dynamics.reproduce == "authors":  # uninformative states read like the others, as theirs do
        measured = measured.unmasked()
    rules = rule_scores(measured.frenet, measured.nrs, measured.gfmi)
    influence, choices = _choices(model, cell, rules, options, pruning)
    subsets = {size: candidate_block_sets(cell.states.shape[0], size, pruning.protect, pruning.mapping)  # type: ignore[arg-type]
               for size in pruning.all_subsets}  # fmt: skip
    block_sets = [c["blocks"] for c in choices] + [b for sets in subsets.values() for b in sets]
    done = _score_variants(model, task, texts, block_sets, scratch, options.batch_size, speed_cache, pruning)
    base = done[""]
    for choice in choices:
        scored_variant = done[block_key(choice["blocks"])]
        choice["main_score"] = scored_variant["main_score"]
        choice["delta"] = scored_variant["main_score"] - base["main_score"]
        choice["speedup"] = scored_variant["speedup"]
    caps = options.caps
    return {
        "model": model.info(),
        "task": task.metadata.name,
        "main_score_name": task.metadata.main_score,
        "base_score": base["main_score"],
        "n_texts": len(texts),
        "n_used": len(cell.texts),
        "n_per_family": {name: int(rows.size) for name, rows in cell.rows.items()},
        "settings": {
            "protect": pruning.protect,
            "mapping": pruning.mapping,
            "budgets": list(pruning.budgets),
            "seed": options.seed,
            "random_seeds": list(pruning.random_seeds),
            "caps": {"frenet": caps.frenet, "nrs": caps.nrs, "gfmi": caps.gfmi},
            "text_order": options.text_order,
            "reproduce": options.reproduce,
            "prompt": prompt,
            "template": model.template,
            "variant_encoding": "shared prefix" if pruning.shared_prefix else "separate",
        },
        "reproduce": options.reproduce,
        "extraction": cell.dynamics.extraction,
        "run": run_provenance(),
        "profiles": {name: values for name, values in rules.items()},
        "block_influence": influence,
        "choices": choices,
        "subsets": {
            str(size): {block_key(b): done[block_key(b)]["main_score"] - base["main_score"] for b in sets}
            for size, sets in subsets.items()
        },
    }


def _choices(
    model: StudyModel, cell: Any, rules: dict[str, Any], options: CellOptions, pruning: PruneStudyOptions
) -> tuple[Any, list[dict[str, Any]]]:
    """ShortGPT block influence on the Frenet sample, and every method's blocks at every budget."""
    from mteb_lrd.pruning.block_influence import block_influence

    calibration = model.texts([cell.texts[i] for i in cell.rows["frenet"]])
    influence = block_influence(model.model, calibration, tokenizer=model.tokenizer,
                                batch_size=options.batch_size, max_length=model.max_length)  # fmt: skip
    angular = angular_distance_matrix(cell.states[:, cell.rows["frenet"]])
    choices = method_choices(rules, influence, angular, budgets=pruning.budgets, protect=pruning.protect,
                             mapping=pruning.mapping, random_seeds=pruning.random_seeds)  # fmt: skip
    return influence, choices


def _score_variants(
    model: StudyModel,
    task: Any,
    texts: Sequence[str],
    block_sets: Sequence[Sequence[int]],
    scratch: Path,
    batch_size: int,
    speed_cache: dict[int, float],
    pruning: PruneStudyOptions,
) -> dict[str, dict[str, float]]:
    """The MTEB score and speed-up of the base and of every distinct block set, resuming from (and
    recording to) ``scratch/variants.json`` after each; the first ``pruning.speed_texts`` of the
    task's distinct ``texts`` are timed.

    With ``pruning.shared_prefix`` the variants are encoded together
    (:class:`~mteb_lrd.studies.pruned_variants.PrunedVariants`, vectors kept in
    ``scratch/vectors`` until the cell is done; the task's ``texts`` are encoded together; a
    decoder's in its template); otherwise each variant is a pruned copy encoded on its own.
    """
    from mteb_lrd.studies.pruned_variants import PrunedVariants

    progress = scratch / "variants.json"
    done: dict[str, dict[str, float]] = (read_record(progress) or {}).get("variants", {})
    distinct = [()] + sorted({tuple(b) for b in block_sets})
    speed_sample = model.texts(list(texts[: pruning.speed_texts]))
    shared = None
    if pruning.shared_prefix:
        pending = [b for b in distinct if block_key(b) not in done]
        plain = {} if model.tokenizer is None else {
            "full_encoder": mteb_encoder(model), "tokenizer": model.tokenizer, "template": model.template,
            "max_length": model.max_length,
        }  # fmt: skip
        shared = PrunedVariants(model.model, pending, scratch / "vectors", batch_size=batch_size, texts=texts,
                                **plain)  # fmt: skip
    for blocks in distinct:
        key = block_key(blocks)
        if key in done:
            continue
        variant = None
        if shared is not None:
            encoder = shared.encoder(blocks)
        else:
            variant, pruned = _pruned(model, list(blocks))
            encoder = mteb_encoder(model, pruned)
            del pruned
        score = mteb_score(encoder, task(), batch_size=batch_size)
        # Blocks of one stack cost the same: the speed-up depends on how many are removed, so it is
        # timed once per count and model (timing every variant would double the study's time).
        if len(blocks) not in speed_cache:
            variant = _pruned(model, list(blocks))[0] if variant is None else variant
            speed_cache[len(blocks)] = (
                measure_speedup(model, variant, speed_sample, batch_size) if blocks else 1.0
            )
        done[key] = {"main_score": score["main_score"], "speedup": speed_cache[len(blocks)]}
        write_record(progress, {"variants": done})
        logger.info(f"  blocks [{key}] → {score['main_score']:.4f}")
        # A pruned SentenceTransformer sits in a reference cycle (its model card points back at it),
        # which only the cyclic collector frees; without this every variant's copy stayed in memory
        # (all-mpnet-base-v2: +0.4 GB per variant, 18 GB after 35 variants).
        del variant, encoder
        gc.collect()
    if shared is not None:
        shared.clear()
    return done


def run_prune_study(
    models: Sequence[str | StudyModel],
    tasks: Mapping[str, type],
    out_dir: str | Path,
    options: CellOptions | None = None,
    pruning: PruneStudyOptions | None = None,
) -> Path:
    """Run every (model, task) cell not recorded yet in ``out_dir/records``; returns ``out_dir``.

    Args:
        models / tasks / out_dir: as :func:`mteb_lrd.studies.selection.run_selection_study`.
        options: how each cell is measured (:class:`~mteb_lrd.studies.options.CellOptions`).
        pruning: budgets, protected layers, layer-to-block mapping, Random seeds, speed texts.

    Progress goes to this module's logger, one INFO line per cell and variant.
    """
    options = CellOptions() if options is None else options
    pruning = PruneStudyOptions() if pruning is None else pruning
    speed_caches: dict[str, dict[int, float]] = {}

    def measure(model: StudyModel, task_name: str, task: type) -> dict[str, Any]:
        return measure_pruning_cell(model, task, options, pruning, speed_caches.setdefault(model.name, {}),
                                    scratch_path(out_dir, model.name, task_name))  # fmt: skip

    return run_cells(models, tasks, out_dir, measure, max_length=options.max_length,
                     decoder_template=options.decoder_template)  # fmt: skip
