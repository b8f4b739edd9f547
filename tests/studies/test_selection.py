"""Model-selection statistics: RankMe, alpha-ReQ, per-task correlation, summaries, controls."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from mteb_lrd.metrics.spectrum import alpha_req, rankme
from mteb_lrd.metrics.statistics import Correlation
from mteb_lrd.studies.selection_analysis import (
    correlate_per_task,
    leave_one_family_out,
    panel_caveats,
    partial_per_task,
    summarise_tasks,
)

MODELS = {
    "a": {"params": 1e6, "dim": 64, "family": "F1"},
    "b": {"params": 2e6, "dim": 64, "family": "F1"},
    "c": {"params": 5e6, "dim": 128, "family": "F2"},
    "d": {"params": 1e7, "dim": 128, "family": "F2"},
    "e": {"params": 3e7, "dim": 256, "family": "F3"},
    "f": {"params": 9e7, "dim": 256, "family": "F3"},
}


def test_rankme_hand_cases():
    assert rankme(np.eye(4)) == pytest.approx(4.0, rel=1e-5)  # four equal singular values
    rank_one = np.outer(np.arange(1, 6), np.ones(3))
    assert rankme(rank_one) == pytest.approx(1.0, abs=1e-3)


def test_alpha_req_recovers_power_law():
    n, d, alpha = 4000, 20, 1.5
    rng = np.random.default_rng(0)
    scales = np.arange(1, d + 1) ** (-alpha / 2)  # eigenvalues ~ i^-alpha
    x = rng.standard_normal((n, d)) * scales
    assert alpha_req(x) == pytest.approx(alpha, abs=0.1)


def _tables():
    perf = {"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.4, "e": 0.5, "f": 0.6}
    scores = {
        "t1": {m: {"good": v, "bad": -v, "flat": 1.0} for m, v in perf.items()},
        "t2": {m: {"good": v**2, "bad": 1.0 if m in "ace" else 0.0} for m, v in perf.items()},
        "t3": {m: {"good": v} for m, v in list(perf.items())[:3]},  # too few models
    }
    main = {"t1": perf, "t2": perf, "t3": perf}
    return scores, main


def test_correlate_per_task_and_summary():
    scores, main = _tables()
    per = correlate_per_task(scores, main)
    assert set(per) == {"good", "bad"}  # "flat" is constant, skipped
    assert set(per["good"]) == {"t1", "t2"}  # t3 has 3 models < 4
    assert per["good"]["t1"].rho == pytest.approx(1.0)
    x = [1.0 if m in "ace" else 0.0 for m in "abcdef"]
    assert per["bad"]["t2"].rho == pytest.approx(stats.spearmanr(x, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]).statistic)
    summary = summarise_tasks(per["bad"])
    assert summary.n_tasks == 2 and summary.n_negative == 2 and summary.n_positive == 0
    assert summary.median_rho == pytest.approx((per["bad"]["t1"].rho + per["bad"]["t2"].rho) / 2)


def test_summary_counts_significance():
    per = {"x": Correlation(0.9, 0.001, 6), "y": Correlation(0.5, 0.03, 6), "z": Correlation(-0.2, 0.6, 6)}
    s = summarise_tasks(per)
    assert (s.n_p05, s.n_p01, s.n_positive, s.n_negative) == (2, 1, 2, 1)
    assert s.median_abs_rho == pytest.approx(0.5) and s.mean_rho == pytest.approx(0.4)


def test_partial_controls_and_undefined_family():
    scores, main = _tables()
    by_params = partial_per_task(scores, main, MODELS, "log_params")
    assert np.isnan(by_params["good"]["t1"].rho)  # perf is collinear with params: residuals constant
    by_family = partial_per_task(scores, main, MODELS, "family")
    assert by_family["bad"]["t2"].n == 6
    with pytest.raises(ValueError, match="control"):
        partial_per_task(scores, main, MODELS, "size")


def test_leave_one_family_out():
    scores, main = _tables()
    lofo = leave_one_family_out(scores, main, MODELS)
    assert set(lofo["good"]) == {"F1", "F2", "F3"}
    assert lofo["good"]["F1"].n_tasks == 2 and lofo["good"]["F1"].median_rho == pytest.approx(1.0)


def test_caveats_say_when_panel_is_small():
    notes = panel_caveats(MODELS, n_tasks=3)
    assert any("0.886" in n for n in notes) and any("3 tasks" in n for n in notes)
    assert any("only 2 models" in n for n in panel_caveats({k: MODELS[k] for k in "ab"}, 10))


def test_model_level_tests_relabel_models_jointly_and_adjust_by_holm():
    from mteb_lrd.metrics.permutation import holm, joint_permutation
    from mteb_lrd.studies.selection_analysis import model_level_tests

    models = ["m1", "m2", "m3", "m4", "m5"]
    main = {"A": dict(zip(models, [0.1, 0.5, 0.3, 0.9, 0.7], strict=True)),
            "B": dict(zip(models, [0.2, 0.4, 0.6, 0.8, 0.3], strict=True))}  # fmt: skip
    d0l = {"A": [1.0, 4.0, 3.0, 5.0, 2.0], "B": [2.0, 3.0, 5.0, 4.0, 1.0]}
    nrs = {"A": [0.5, 0.1, 0.2, 0.3, 0.4], "B": [0.9, 0.8, 0.1, 0.2, 0.3]}
    scores = {t: {m: {"frenet_d0L": d0l[t][i], "nrs_mean_jaccard": nrs[t][i]} for i, m in enumerate(models)}
              for t in ("A", "B")}  # fmt: skip
    tested = model_level_tests(scores, main)
    y = [[main[t][m] for m in models] for t in ("A", "B")]
    raw = [joint_permutation([d0l["A"], d0l["B"]], y).p, joint_permutation([nrs["A"], nrs["B"]], y).p]
    assert [tested["frenet_d0L"]["p"], tested["nrs_mean_jaccard"]["p"]] == pytest.approx(raw)
    assert [tested["frenet_d0L"]["p_holm"], tested["nrs_mean_jaccard"]["p_holm"]] == pytest.approx(holm(raw))
    assert tested["frenet_d0L"]["n_models"] == 5 and tested["frenet_d0L"]["n_tasks"] == 2
    from mteb_lrd.metrics.bootstrap import bootstrap_median_spearman

    interval = bootstrap_median_spearman([d0l["A"], d0l["B"]], y)
    assert (tested["frenet_d0L"]["ci_low"], tested["frenet_d0L"]["ci_high"]) == pytest.approx(
        (interval.low[0], interval.high[0])
    )


def test_a_task_where_a_score_is_constant_is_skipped_for_that_score_only():
    from mteb_lrd.metrics.permutation import joint_permutation
    from mteb_lrd.studies.selection_analysis import model_level_tests

    models = ["m1", "m2", "m3", "m4"]
    main = {t: dict(zip(models, perf, strict=True))
            for t, perf in {"A": [0.1, 0.5, 0.3, 0.9], "B": [0.2, 0.4, 0.6, 0.8],
                            "C": [0.3, 0.1, 0.2, 0.4]}.items()}  # fmt: skip
    flat = {"A": [1.0, 1.0, 1.0, 1.0], "B": [2.0, 3.0, 5.0, 4.0], "C": [1.0, 4.0, 2.0, 3.0]}  # A: constant
    varied = {"A": [1.0, 2.0, 3.0, 4.0], "B": [4.0, 3.0, 2.0, 1.0], "C": [2.0, 1.0, 4.0, 3.0]}
    scores = {
        t: {m: {"flat": flat[t][i], "varied": varied[t][i]} for i, m in enumerate(models)} for t in main
    }
    tested = model_level_tests(scores, main)
    assert tested["flat"]["n_tasks"] == 2 and tested["varied"]["n_tasks"] == 3
    y = [[main[t][m] for m in models] for t in ("B", "C")]
    assert tested["flat"]["p"] == pytest.approx(joint_permutation([flat["B"], flat["C"]], y).p)


def test_strongest_compares_dependent_correlations_exactly_and_adjusts_by_holm():
    from mteb_lrd.metrics.permutation import holm, spearman_difference
    from mteb_lrd.studies.selection_analysis import strongest_tests

    models = ["m1", "m2", "m3", "m4", "m5", "m6"]
    main = {"A": dict(zip(models, [0.1, 0.5, 0.3, 0.9, 0.7, 0.2], strict=True)),
            "B": dict(zip(models, [0.2, 0.4, 0.6, 0.8, 0.3, 0.1], strict=True))}  # fmt: skip
    d0l = {t: [main[t][m] * 10 for m in models] for t in main}  # a perfect predictor
    nrs = {"A": [0.5, 0.1, 0.2, 0.3, 0.4, 0.6], "B": [0.9, 0.8, 0.1, 0.2, 0.3, 0.4]}
    gfmi = {"A": [1, 5, 3, 6, 4, 2], "B": [2, 4, 5, 6, 3, 1.5]}
    scores = {t: {m: {"frenet_d0L": d0l[t][i], "nrs_mean_jaccard": nrs[t][i], "gfmi_mean_auc": gfmi[t][i]}
                  for i, m in enumerate(models)} for t in main}  # fmt: skip
    tested = strongest_tests(scores, main, "frenet_d0L", ["nrs_mean_jaccard", "gfmi_mean_auc", "frenet_d0L"])
    assert list(tested) == ["nrs_mean_jaccard", "gfmi_mean_auc"]  # never against itself
    y = [[main[t][m] for m in models] for t in main]
    raw = [spearman_difference([d0l[t] for t in main], [other[t] for t in main], y) for other in (nrs, gfmi)]
    assert [tested[k]["difference"] for k in tested] == pytest.approx([r.statistic for r in raw])
    assert [tested[k]["p_holm"] for k in tested] == pytest.approx(holm([r.p for r in raw]))
    assert tested["nrs_mean_jaccard"]["difference"] > 1 and tested["nrs_mean_jaccard"]["n_models"] == 6
