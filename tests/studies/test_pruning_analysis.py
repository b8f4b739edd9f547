"""The pruning study's statistics: Random's spread over seeds next to every method, hand-computed."""

from __future__ import annotations

import math

import pytest

from mteb_lrd.studies.pruning_analysis import analyse_pruning, random_seed_spread


def _record(model: str, gfmi: float, random_by_seed: dict[int, float]) -> dict:
    choices = [{"method": "gfmi", "seed": None, "budget": 0.2, "delta": gfmi, "speedup": 1.1}]
    choices += [
        {"method": "random", "seed": s, "budget": 0.2, "delta": d, "speedup": 1.1}
        for s, d in random_by_seed.items()
    ]
    return {"model": {"name": model}, "task": "T", "base_score": 0.5, "choices": choices}


def test_random_seed_spread_hand_computed():
    spread = random_seed_spread({0: -0.01, 1: -0.03, 2: -0.05})
    assert spread["n_seeds"] == 3
    assert spread["mean"] == pytest.approx(-0.03)
    assert spread["std"] == pytest.approx(math.sqrt((0.02**2 + 0 + 0.02**2) / 3))
    assert (spread["min"], spread["max"]) == (-0.05, -0.01)
    assert math.isnan(random_seed_spread({})["mean"])


def test_analysis_reports_random_range_and_membership():
    records = [
        _record("a", -0.02, {0: 0.0, 1: -0.02, 2: -0.04}),
        _record("b", -0.04, {0: -0.02, 1: -0.04, 2: -0.06}),
    ]
    analysis = analyse_pruning(records, n_resamples=100)
    spread = analysis["random_seeds"]["0.2"]
    # per-seed means over the two cells: seed 0 -0.01, seed 1 -0.03, seed 2 -0.05
    assert spread["n_seeds"] == 3
    assert spread["min"] == pytest.approx(-0.05) and spread["max"] == pytest.approx(-0.01)
    assert spread["mean"] == pytest.approx(-0.03)
    assert analysis["table"]["gfmi"]["0.2"]["mean"] == pytest.approx(-0.03)
    assert analysis["table"]["gfmi"]["0.2"]["within_random_range"] is True
    outside = [
        _record("a", 0.05, {0: 0.0, 1: -0.02, 2: -0.04}),
        _record("b", 0.05, {0: -0.02, 1: -0.04, 2: -0.06}),
    ]
    assert analyse_pruning(outside, n_resamples=100)["table"]["gfmi"]["0.2"]["within_random_range"] is False


def test_a_seed_missing_in_some_cell_is_left_out_of_the_range():
    records = [_record("a", 0.0, {0: 0.0, 1: -0.1}), _record("b", 0.0, {0: -0.02})]
    assert analyse_pruning(records, n_resamples=100)["random_seeds"]["0.2"]["n_seeds"] == 1


def test_the_model_is_the_unit_of_the_test_against_random():
    """Three cells of model a and one of b: two units, not four. Per model, the mean over its
    tasks of gfmi's Δ minus Random's; then all 2^2 sign assignments."""
    records = []
    for task, gfmi in (("T1", 0.01), ("T2", 0.03), ("T3", -0.01)):
        records.append({**_record("a", gfmi, {0: 0.0, 1: 0.0}), "task": task})
    records.append(_record("b", 0.02, {0: 0.01, 1: 0.01}))
    entry = analyse_pruning(records, n_resamples=100)["table"]["gfmi"]["0.2"]
    per_model = [(0.01 + 0.03 - 0.01) / 3, 0.02 - 0.01]  # a: 0.01, b: 0.01
    assert entry["n_models"] == 2
    flips = [abs(s1 * per_model[0] + s2 * per_model[1]) / 2 for s1 in (1, -1) for s2 in (1, -1)]
    assert entry["model_p_vs_random"] == pytest.approx(sum(f >= 0.01 - 1e-12 for f in flips) / 4)  # 0.5
    assert math.isnan(
        analyse_pruning(records, n_resamples=100)["table"]["random"]["0.2"]["model_p_vs_random"]
    )
