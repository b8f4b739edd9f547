"""The layer-pruning study (spec §6): LRD-guided rules against baselines, scored by MTEB.

For every (model, task) cell: one extraction pass on the task's texts (label-free; each family on its
own sub-sample, caps 1000 / 1000 / 5000 by default) gives the LRD profiles → rule scores (Frenet,
NRS, GFMI, composite); the angular-distance matrix and a token-level pass for ShortGPT block
influence use the Frenet sub-sample. Every method chooses hidden-state ids among the candidates
(protect 3 at each end) at every budget; ids become blocks by the chosen mapping (the reference's by
default) and each distinct block set is removed physically (:func:`mteb_lrd.prune`) and scored with
``mteb.evaluate``. Cells are recorded as JSON (a partial file keeps finished variants of a cell
that was interrupted), so the study resumes.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mteb_lrd.parameters import DEFAULT_CAPS, Caps
from mteb_lrd.pruning.choose import BUDGETS, RANDOM_SEEDS, method_choices
from mteb_lrd.pruning.rules import RULES, angular_distance_matrix, rule_scores
from mteb_lrd.studies.runner import (
    StudyModel,
    lrd_prompt,
    mteb_encoder,
    mteb_score,
    profile_cell,
    read_record,
    record_path,
    run_cells,
    task_texts,
    write_record,
)

__all__ = [
    "BUDGETS",
    "METHODS",
    "RANDOM_SEEDS",
    "measure_cell",
    "measure_speedup",
    "run_prune_study",
]

METHODS: tuple[str, ...] = (*RULES, "random", "last-k", "shortgpt", "angular")


def _say(message: str) -> None:
    print(f"[mteb-lrd prune-study] {message}", file=sys.stderr, flush=True)


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
    from mteb_lrd.pruning.pruned import prune

    if not blocks:
        return model, model.model
    pruned = prune(model.model, blocks)
    return dataclasses.replace(model, model=pruned, layers=model.layers - len(blocks)), pruned


def measure_cell(
    model: StudyModel,
    task: Any,
    partial_path: Path,
    *,
    budgets: Sequence[float],
    protect: int,
    mapping: str,
    random_seeds: Sequence[int],
    caps: Caps,
    seed: int,
    batch_size: int,
    speed_texts: int,
    speed_cache: dict[int, float],
    say: Callable[[str], None],
    reproduce: str = "ours",
    text_order: str = "interleaved",
    prompt_policy: str = "mteb",
) -> dict[str, Any]:
    """Profiles, choices and the MTEB score of every distinct pruned variant of one cell."""
    from mteb_lrd.pruning.block_influence import block_influence

    texts = task_texts(task(), text_order)
    prompt = lrd_prompt(model, task.metadata, "none" if reproduce == "authors" else prompt_policy)
    cell = profile_cell(
        model, texts, caps=caps, seed=seed, batch_size=batch_size, reproduce=reproduce, prompt=prompt
    )
    result = cell.dynamics.result
    rules = rule_scores(result.frenet, result.nrs, result.gfmi)
    calibration = model.texts([cell.texts[i] for i in cell.rows["frenet"]])
    influence = block_influence(
        model.model,
        calibration,
        tokenizer=model.tokenizer,
        batch_size=batch_size,
        max_length=model.max_length,
    )
    angular = angular_distance_matrix(cell.states[:, cell.rows["frenet"]])
    choices = method_choices(
        rules,
        influence,
        angular,
        budgets=budgets,
        protect=protect,
        mapping=mapping,
        random_seeds=random_seeds,
    )
    done: dict[str, dict[str, float]] = (read_record(partial_path) or {}).get("variants", {})
    block_sets = [()] + sorted({tuple(c["blocks"]) for c in choices})
    speed_sample = model.texts(texts[:speed_texts])
    for blocks in block_sets:
        key = ",".join(map(str, blocks))
        if key in done:
            continue
        variant, scored = _pruned(model, list(blocks))
        encoder = mteb_encoder(model, scored)
        score = mteb_score(encoder, task(), batch_size=batch_size)
        # Blocks of one stack cost the same: the speed-up depends on how many are removed, so it is
        # timed once per count and model (timing every variant would double the study's time).
        if len(blocks) not in speed_cache:
            speed_cache[len(blocks)] = (
                measure_speedup(model, variant, speed_sample, batch_size) if blocks else 1.0
            )
        done[key] = {"main_score": score["main_score"], "speedup": speed_cache[len(blocks)]}
        write_record(partial_path, {"variants": done})
        say(f"  blocks [{key}] → {score['main_score']:.4f}")
    base = done[""]
    for choice in choices:
        scored_variant = done[",".join(map(str, choice["blocks"]))]
        choice["main_score"] = scored_variant["main_score"]
        choice["delta"] = scored_variant["main_score"] - base["main_score"]
        choice["speedup"] = scored_variant["speedup"]
    return {
        "model": model.info(),
        "task": task.metadata.name,
        "main_score_name": task.metadata.main_score,
        "base_score": base["main_score"],
        "n_texts": len(texts),
        "n_used": len(cell.texts),
        "n_per_family": {name: int(rows.size) for name, rows in cell.rows.items()},
        "settings": {
            "protect": protect,
            "mapping": mapping,
            "budgets": list(budgets),
            "seed": seed,
            "random_seeds": list(random_seeds),
            "caps": {"frenet": caps.frenet, "nrs": caps.nrs, "gfmi": caps.gfmi},
            "text_order": text_order,
            "reproduce": reproduce,
            "prompt": prompt,
            "template": model.template,
        },
        "reproduce": reproduce,
        "extraction": cell.dynamics.extraction,
        "profiles": {name: values for name, values in rules.items()},
        "block_influence": influence,
        "choices": choices,
    }


def run_prune_study(
    models: Sequence[str | StudyModel],
    tasks: Mapping[str, type],
    out_dir: str | Path,
    *,
    budgets: Sequence[float] = BUDGETS,
    protect: int = 3,
    mapping: str = "reference",
    random_seeds: Sequence[int] = RANDOM_SEEDS,
    caps: Caps = DEFAULT_CAPS,
    seed: int = 42,
    batch_size: int = 32,
    max_length: int = 512,
    speed_texts: int = 64,
    reproduce: str = "ours",
    text_order: str = "interleaved",
    prompt_policy: str = "mteb",
    decoder_template: str | None = None,
    progress: Callable[[str], None] | None = _say,
) -> Path:
    """Run every (model, task) cell not recorded yet in ``out_dir/records``; returns ``out_dir``.

    ``caps``: per-family text caps of the profiles; ``reproduce``, ``text_order``,
    ``prompt_policy`` and ``decoder_template`` as in
    :func:`mteb_lrd.studies.selection.run_selection_study`.

    Raises:
        ValueError: bad mapping, budgets, caps, or no model / task.
    """
    if mapping not in ("reference", "producer"):
        raise ValueError(f"mapping must be 'reference' or 'producer', got {mapping!r}")
    if not budgets or any(not 0 < b <= 1 for b in budgets):
        raise ValueError(f"budgets must be fractions in (0, 1], got {list(budgets)}")
    if not isinstance(caps, Caps):
        raise ValueError(f"caps must be a mteb_lrd.parameters.Caps, got {type(caps).__name__}")
    say = progress or (lambda _message: None)
    speed_caches: dict[str, dict[int, float]] = {}

    def measure(model: StudyModel, task_name: str, task: type) -> dict[str, Any]:
        return measure_cell(
            model,
            task,
            record_path(out_dir, model.name, task_name, partial=True),
            budgets=budgets,
            protect=protect,
            mapping=mapping,
            random_seeds=random_seeds,
            caps=caps,
            seed=seed,
            batch_size=batch_size,
            speed_texts=speed_texts,
            speed_cache=speed_caches.setdefault(model.name, {}),
            say=say,
            reproduce=reproduce,
            text_order=text_order,
            prompt_policy=prompt_policy,
        )

    return run_cells(
        models,
        tasks,
        out_dir,
        measure,
        max_length=max_length,
        decoder_template=decoder_template,
        progress=say,
    )
