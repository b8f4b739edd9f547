"""Study-level fidelity options: the authors' text order, partial Pearson on log(dim), the switch."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from mteb_lrd.metrics.statistics import partial_pearson
from mteb_lrd.studies.runner import task_texts
from mteb_lrd.studies.selection_analysis import analyse_selection, partial_per_task
from tests.metrics.reference import ref_residualize_authors

PAIRS = [
    {"sentence1": "a b", "sentence2": "c d", "score": 1.0},
    {"sentence1": "e f", "sentence2": "a b", "score": 2.0},
    {"sentence1": "g h", "sentence2": "i j", "score": 3.0},
]


def test_task_texts_orders():
    from mteb_lrd.tasks.local_tasks import make_task

    task = make_task("STS", "OrderSTS", lambda: {"default": {"test": PAIRS}})()
    assert task_texts(task) == ["a b", "c d", "e f", "g h", "i j"]  # s1_0, s2_0, s1_1, (s2_1 dup), …
    assert task_texts(task, "columns") == ["a b", "e f", "g h", "c d", "i j"]
    with pytest.raises(ValueError, match="order"):
        task_texts(task, "random")


def test_partial_pearson_is_the_authors_residual_pearson():
    rng = np.random.default_rng(0)
    x, y = rng.random(9), rng.random(9)
    z = np.log(rng.choice([384.0, 768.0, 1024.0, 4096.0], 9))
    expected = stats.pearsonr(ref_residualize_authors(x, z), ref_residualize_authors(y, z))
    got = partial_pearson(x, y, z)
    assert got.rho == pytest.approx(expected.statistic) and got.p == pytest.approx(expected.pvalue)
    assert np.isnan(partial_pearson(x[:2], y[:2], z[:2]).rho)
    assert np.isnan(partial_pearson(z, y, z).rho)  # x fully explained by the covariate


def _residual(v: np.ndarray, covariates: np.ndarray) -> np.ndarray:
    """v minus its projection on [1, covariates] (hat matrix from the pseudo-inverse)."""
    design = np.column_stack([np.ones(len(v)), covariates])
    return v - design @ np.linalg.pinv(design) @ v


def test_partial_pearson_is_undefined_without_residual_freedom():
    # Six models in five families (one-hot, one level dropped): intercept + 4 dummies leave one
    # residual dimension, so any two residual vectors correlate +-1; that is no evidence.
    rng = np.random.default_rng(3)
    family = np.array([0, 0, 1, 2, 3, 4])
    dummies = (family[:, None] == np.arange(1, 5)).astype(float)
    for _ in range(5):
        x, y = rng.random(6), rng.random(6)
        residual = [_residual(v, dummies) for v in (x, y)]
        assert abs(stats.pearsonr(*residual).statistic) == pytest.approx(1.0)  # the degenerate value
        assert np.isnan(partial_pearson(x, y, dummies).rho)
        assert np.isnan(partial_pearson(x, y, dummies).p)
    # One residual dimension more (a seventh model) and the value is the authors' again.
    x, y = rng.random(7), rng.random(7)
    dummies7 = np.vstack([dummies, [0, 0, 0, 1]])
    expected = stats.pearsonr(_residual(x, dummies7), _residual(y, dummies7))
    assert partial_pearson(x, y, dummies7).rho == pytest.approx(expected.statistic)


def _records():
    rng = np.random.default_rng(1)
    dims = [384, 384, 768, 768, 1024, 4096]
    out = []
    for i, dim in enumerate(dims):
        speed = rng.random(7)
        out.append(
            {
                "model": {"name": f"m{i}", "family": f"f{i % 3}", "params": 1e6 * (i + 1), "dim": dim},
                "task": "T",
                "main_score": float(rng.random()),
                "scores": {"frenet_d0L": float(rng.random()), "frenet_late_speed": float(speed[-2:].mean())},
                "profiles": {"speed": speed.tolist(), "curvature": rng.random(6).tolist()},
            }
        )
    return out


def test_analyse_selection_authors_mode():
    records = _records()
    ours = analyse_selection(records)
    authors = analyse_selection(records, reproduce="authors")
    assert (ours["reproduce"], ours["partial_method"]) == ("ours", "spearman")
    assert (authors["reproduce"], authors["partial_method"]) == ("authors", "pearson")
    # late speed recomputed from the profiles over the last ceil(7/3) = 3 transitions
    late = {r["model"]["name"]: float(np.mean(r["profiles"]["speed"][-3:])) for r in records}
    assert authors["scores"]["T"] == {
        m: pytest.approx({**authors["scores"]["T"][m], "frenet_late_speed": late[m]}) for m in late
    }
    scores = {"T": {r["model"]["name"]: {"frenet_d0L": r["scores"]["frenet_d0L"]} for r in records}}
    main = {"T": {r["model"]["name"]: r["main_score"] for r in records}}
    models = {r["model"]["name"]: r["model"] for r in records}
    per = partial_per_task(scores, main, models, "log_dim", method="pearson")["frenet_d0L"]["T"]
    x = [r["scores"]["frenet_d0L"] for r in records]
    z = np.log([r["model"]["dim"] for r in records])
    expected = stats.pearsonr(
        ref_residualize_authors(x, z), ref_residualize_authors(list(main["T"].values()), z)
    )
    assert per.rho == pytest.approx(expected.statistic)
    with pytest.raises(ValueError, match="method"):
        partial_per_task(scores, main, models, "log_dim", method="kendall")


def test_lrd_prompt_policies(tiny_st_dir):
    from mteb_lrd.studies.runner import load_study_model, lrd_prompt
    from mteb_lrd.tasks.local_tasks import make_task

    model = load_study_model(str(tiny_st_dir))
    meta = make_task("STS", "OrderSTS", lambda: {"default": {"test": PAIRS}}).metadata
    assert lrd_prompt(model, meta, "mteb") == "" == lrd_prompt(model, meta, "none")
    model.model.prompts = {"query": "q: ", "document": "d: "}
    model.model.default_prompt_name = "query"
    assert lrd_prompt(model, meta, "mteb") == "q: "  # encode's default prompt, as mteb's run applies it
    model.model.prompts = {"STS": "sts: ", "query": "q: ", "document": "d: "}
    assert lrd_prompt(model, meta, "mteb") == "sts: "  # mteb's task-type prompt wins
    assert lrd_prompt(model, meta, "none") == ""
    with pytest.raises(ValueError, match="lrd_prompt"):
        lrd_prompt(model, meta, "task")


def test_study_cli_caps_and_switches():
    import argparse

    from mteb_lrd.cli import prune_study, select
    from mteb_lrd.parameters import Caps

    parser = argparse.ArgumentParser()
    subparsers = parser.add_subparsers()
    select.register(subparsers)
    prune_study.register(subparsers)
    args = parser.parse_args(["select", "--out", "x"])
    assert select.study_caps(args) == Caps(1000, 1000, 5000)
    assert (args.reproduce, args.text_order, args.lrd_prompt) == ("ours", "interleaved", "mteb")
    args = parser.parse_args(
        ["prune-study", "--out", "x", "--caps", "10", "0", "30", "--reproduce", "authors"]
    )
    assert select.study_caps(args) == Caps(10, None, 30) and args.reproduce == "authors"
    args = parser.parse_args(["select", "--out", "x", "--caps", "10", "0", "30", "--text-cap", "50"])
    assert select.study_caps(args) == Caps(50, 50, 50)
    with pytest.raises(ValueError, match="frenet_cap"):
        select.study_caps(parser.parse_args(["select", "--out", "x", "--text-cap", "2"]))
