"""The layer-pruning study (spec §6): LRD-guided rules against baselines, scored by MTEB.

For every (model, task) cell: one extraction pass on the task's texts (label-free) gives the LRD
profiles → rule scores (Frenet, NRS, GFMI, composite) and the angular-distance matrix; one token-level
pass gives ShortGPT block influence. Every method chooses hidden-state ids among the candidates
(protect 3 at each end) at every budget; ids become blocks by the chosen mapping (the reference's by
default) and each distinct block set is removed physically (:func:`mteb_lrd.prune`) and scored with
``mteb.evaluate``. Cells are recorded as JSON (a partial file keeps finished variants of a cell
that was interrupted), so the study resumes.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mteb_lrd.pruning.rules import (
    RULES,
    angular_distance_layers,
    angular_distance_matrix,
    blocks_for,
    last_k_layers,
    random_layers,
    rule_scores,
    select_layers,
)
from mteb_lrd.studies.runner import (
    StudyModel,
    load_study_model,
    mteb_encoder,
    mteb_score,
    read_record,
    task_texts,
    write_record,
)

__all__ = [
    "BUDGETS",
    "METHODS",
    "RANDOM_SEEDS",
    "choose_blocks",
    "measure_cell",
    "measure_speedup",
    "run_prune_study",
]

BUDGETS: tuple[float, ...] = (0.05, 0.10, 0.15, 0.20, 0.25)
RANDOM_SEEDS: tuple[int, ...] = (0, 1, 2)
METHODS: tuple[str, ...] = (*RULES, "random", "last-k", "shortgpt", "angular")


def _say(message: str) -> None:
    print(f"[mteb-lrd prune-study] {message}", file=sys.stderr, flush=True)


def _block_influence_scores(influence: np.ndarray, mapping: str) -> np.ndarray:
    """Per-id prunability from ShortGPT block influence: minus the BI of the block the id maps to."""
    num_blocks = influence.size
    scores = np.full(num_blocks + 1, -np.inf)
    if mapping == "reference":
        scores[:num_blocks] = -influence
    else:
        scores[1:] = -influence
    low = np.min(scores[np.isfinite(scores)]) - 1.0
    return np.where(np.isfinite(scores), scores, low)  # the unmapped end id is never preferred


def choose_blocks(
    rules: Mapping[str, np.ndarray],
    influence: np.ndarray,
    angular: np.ndarray,
    *,
    budgets: Sequence[float] = BUDGETS,
    protect: int = 3,
    mapping: str = "reference",
    random_seeds: Sequence[int] = RANDOM_SEEDS,
) -> list[dict[str, Any]]:
    """Every method's choice at every budget.

    Args:
        rules: output of :func:`mteb_lrd.pruning.rule_scores` (L+1 scores per rule).
        influence: ``(L,)`` ShortGPT block influence.
        angular: ``(L+1, L+1)`` angular-distance matrix.
        budgets / protect / mapping / random_seeds: the study settings.

    Returns:
        ``[{"method", "seed", "budget", "ids", "blocks"}, ...]``; the angular baseline removes the
        contiguous blocks ``l*..l*+n-1`` (Gromov et al.'s definition) whatever the mapping.
    """
    num_states = influence.size + 1
    bi_scores = _block_influence_scores(np.asarray(influence, dtype=np.float64), mapping)
    choices = []
    for budget in budgets:
        picks: list[tuple[str, int | None, list[int]]] = [
            (rule, None, select_layers(rules[rule], budget, protect)) for rule in RULES
        ]
        picks += [("random", seed, random_layers(num_states, budget, seed, protect)) for seed in random_seeds]
        picks.append(("last-k", None, last_k_layers(num_states, budget, protect)))
        picks.append(("shortgpt", None, select_layers(bi_scores, budget, protect)))
        for method, seed, ids in picks:
            blocks = blocks_for(ids, mapping)  # type: ignore[arg-type]
            choices.append({"method": method, "seed": seed, "budget": budget, "ids": ids, "blocks": blocks})
        ids = angular_distance_layers(angular, budget, protect)
        choices.append({"method": "angular", "seed": None, "budget": budget, "ids": ids, "blocks": ids})
    return choices


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
    """The pruned model (for timing) and what mteb scores: B's ``PrunedModel`` wrapper for a
    SentenceTransformer (experiment metadata included), the pruned transformers model otherwise."""
    from mteb_lrd.pruning.surgery import prune

    if not blocks:
        return model, model.model
    pruned = prune(model.model, blocks, name=model.name)
    inner = pruned.model if model.tokenizer is None else pruned
    variant = StudyModel(
        model.name,
        inner,
        model.tokenizer,
        model.family,
        model.params,
        model.dim,
        model.layers - len(blocks),
        model.kind,
        model.max_length,
    )
    return variant, pruned


def measure_cell(
    model: StudyModel,
    task: type,
    partial_path: Path,
    *,
    budgets: Sequence[float],
    protect: int,
    mapping: str,
    random_seeds: Sequence[int],
    text_cap: int,
    seed: int,
    batch_size: int,
    speed_texts: int,
    speed_cache: dict[int, float],
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Profiles, choices and the MTEB score of every distinct pruned variant of one cell."""
    from mteb_lrd.pruning.block_influence import block_influence
    from mteb_lrd.extraction.extractor import LayerExtractor
    from mteb_lrd.metrics import lrd, subsample

    instance = task()
    texts = task_texts(instance)
    chosen = [texts[i] for i in subsample(len(texts), text_cap, seed)]
    states = (
        LayerExtractor(
            model.model,
            model.tokenizer,
            batch_size=batch_size,
            max_length=model.max_length,
            show_progress_bar=False,
        )
        .extract(chosen)
        .states
    )
    k_limit = len(chosen) - 1
    result = lrd(states, nrs_k=min(20, k_limit), gfmi_k=min(30, k_limit), seed=seed)
    rules = rule_scores(result.frenet, result.nrs, result.gfmi)
    influence = block_influence(
        model.model, chosen, tokenizer=model.tokenizer, batch_size=batch_size, max_length=model.max_length
    )
    angular = angular_distance_matrix(states)
    choices = choose_blocks(
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
    speed_sample = texts[:speed_texts]
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
        variant = done[",".join(map(str, choice["blocks"]))]
        choice["main_score"] = variant["main_score"]
        choice["delta"] = variant["main_score"] - base["main_score"]
        choice["speedup"] = variant["speedup"]
    return {
        "model": model.info(),
        "task": task.metadata.name,
        "main_score_name": task.metadata.main_score,
        "base_score": base["main_score"],
        "n_texts": len(texts),
        "n_used": len(chosen),
        "settings": {"protect": protect, "mapping": mapping, "budgets": list(budgets), "seed": seed},
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
    text_cap: int = 300,
    seed: int = 42,
    batch_size: int = 32,
    max_length: int = 512,
    speed_texts: int = 64,
    progress: Callable[[str], None] | None = _say,
) -> Path:
    """Run every (model, task) cell not recorded yet in ``out_dir/records``; returns ``out_dir``.

    Raises:
        ValueError: bad mapping, budgets, caps, or no model / task.
    """
    if mapping not in ("reference", "producer"):
        raise ValueError(f"mapping must be 'reference' or 'producer', got {mapping!r}")
    if not budgets or any(not 0 < b <= 1 for b in budgets):
        raise ValueError(f"budgets must be fractions in (0, 1], got {list(budgets)}")
    if isinstance(text_cap, bool) or not isinstance(text_cap, int) or text_cap < 4:
        raise ValueError(f"text_cap must be an integer >= 4, got {text_cap!r}")
    if not models or not tasks:
        raise ValueError("need at least one model and one task")
    say = progress or (lambda _message: None)
    out = Path(out_dir)
    for spec in models:
        label = spec.name if isinstance(spec, StudyModel) else Path(str(spec)).name
        missing = [t for t in tasks if read_record(out / "records" / label / f"{t}.json") is None]
        if not missing:
            say(f"{label}: all {len(tasks)} tasks recorded")
            continue
        model = spec if isinstance(spec, StudyModel) else load_study_model(str(spec), max_length=max_length)
        speed_cache: dict[int, float] = {}
        for task_name in missing:
            say(f"{model.name} × {task_name}")
            folder = out / "records" / model.name
            record = measure_cell(
                model,
                tasks[task_name],
                folder / f"{task_name}.partial.json",
                budgets=budgets,
                protect=protect,
                mapping=mapping,
                random_seeds=random_seeds,
                text_cap=text_cap,
                seed=seed,
                batch_size=batch_size,
                speed_texts=speed_texts,
                speed_cache=speed_cache,
                say=say,
            )
            write_record(folder / f"{task_name}.json", record)
    return out
