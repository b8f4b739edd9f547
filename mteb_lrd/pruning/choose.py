"""Choosing the blocks to remove: LRD rules on a model's own profiles, and every method of the study.

:func:`choose_blocks` profiles a model on label-free texts (one extraction pass, the reference caps),
scores every layer by a rule (:func:`mteb_lrd.pruning.rules.rule_scores`) and maps the chosen
hidden-state ids to blocks. :func:`method_choices` gives the choice of every rule and baseline at
every budget from precomputed profiles (the pruning study's input).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mteb_lrd.pruning.rules import (
    RULES,
    angular_distance_layers,
    blocks_for,
    last_k_layers,
    random_layers,
    rule_scores,
    select_layers,
)

__all__ = ["BUDGETS", "RANDOM_SEEDS", "block_influence_scores", "choose_blocks", "method_choices"]

BUDGETS: tuple[float, ...] = (0.05, 0.10, 0.15, 0.20, 0.25)
RANDOM_SEEDS: tuple[int, ...] = tuple(range(10))
"""Seeds of the Random baseline: 10 (the paper used 0-2, whose spread exceeds the differences it reports)."""


def choose_blocks(
    model: object,
    rule: str,
    budget: float,
    texts: Sequence[str],
    *,
    tokenizer: object = None,
    mapping: str = "reference",
    batch_size: int = 32,
) -> list[int]:
    """Blocks to remove by an LRD rule (spec §6): profile ``texts``, score every layer, take the budget.

    The profiles use the reference caps (Frenet 1000, NRS 1000, GFMI 5000 texts, seed 42; k clamped
    to ``N - 1`` for short text lists); selection and the id → block mapping are
    :func:`mteb_lrd.pruning.select_layers` and :func:`mteb_lrd.pruning.blocks_for`.

    Args:
        model: a SentenceTransformer or a transformers model (pruned already or not).
        rule: ``frenet``, ``nrs``, ``gfmi`` or ``composite``.
        budget: fraction of the candidate layers (ids ``3 .. L-3``) to prune, in (0, 1].
        texts: profiling texts (e.g. :func:`mteb_lrd.defaults.demo_texts`).
        tokenizer: for a plain transformers decoder.
        mapping: ``reference`` (id ``l`` → block ``l``) or ``producer`` (id ``l`` → block ``l-1``).
        batch_size: texts per forward pass.

    Raises:
        ValueError: for an unknown rule, a bad budget, too few layers or texts.
    """
    from mteb_lrd.extraction.extractor import extract_layer_states
    from mteb_lrd.pipeline import layer_dynamics

    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}; got {rule!r}")
    states = extract_layer_states(
        model, list(texts), tokenizer=tokenizer, batch_size=batch_size, show_progress_bar=False
    ).states
    result = layer_dynamics(states)
    scores = rule_scores(result.frenet, result.nrs, result.gfmi)
    return blocks_for(select_layers(scores[rule], budget), mapping)  # type: ignore[arg-type]


def block_influence_scores(influence: np.ndarray, mapping: str) -> np.ndarray:
    """Per-id prunability from ShortGPT block influence: minus the BI of the block the id maps to."""
    num_blocks = influence.size
    scores = np.full(num_blocks + 1, -np.inf)
    if mapping == "reference":
        scores[:num_blocks] = -influence
    else:
        scores[1:] = -influence
    low = np.min(scores[np.isfinite(scores)]) - 1.0
    return np.where(np.isfinite(scores), scores, low)  # the unmapped end id is never preferred


def method_choices(
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
        rules: output of :func:`mteb_lrd.pruning.rules.rule_scores` (L+1 scores per rule).
        influence: ``(L,)`` ShortGPT block influence.
        angular: ``(L+1, L+1)`` angular-distance matrix.
        budgets / protect / mapping / random_seeds: the study settings.

    Returns:
        ``[{"method", "seed", "budget", "ids", "blocks"}, ...]``; the angular baseline removes the
        contiguous blocks ``l*..l*+n-1`` (Gromov et al.'s definition) whatever the mapping.
    """
    num_states = influence.size + 1
    bi_scores = block_influence_scores(np.asarray(influence, dtype=np.float64), mapping)
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
