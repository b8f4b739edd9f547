"""Figures of the selection and pruning study reports: every axis labelled (with units), scatter
points named by their model at the right coordinates."""

from __future__ import annotations

import numpy as np
import pytest

from mteb_lrd.report.plots import score_axis_label
from mteb_lrd.report.studies import selection_scatter, write_selection_report
from mteb_lrd.studies.selection_analysis import analyse_selection

MODELS = ["org/alpha", "org/beta", "gamma", "delta", "epsilon"]
TASKS = ["STS-A", "STS-B"]


@pytest.fixture
def analysis():
    rng = np.random.RandomState(3)
    records = []
    for index, name in enumerate(MODELS):
        model = {"name": name, "family": f"f{index % 2}", "params": 1e6 * (index + 1), "dim": 64, "layers": 4,
                 "kind": "encoder"}  # fmt: skip
        for task in TASKS:
            scores = {"frenet_d0L": float(rng.uniform(2, 12)), "rankme": float(rng.uniform(5, 60))}
            records.append({"model": model, "task": task, "main_score": float(rng.uniform(0.2, 0.9)),
                            "scores": scores})  # fmt: skip
    return analyse_selection(records)


def test_selection_scatter_names_every_point(analysis):
    figure = selection_scatter(analysis, "frenet_d0L")
    assert [axis.get_title().split(" (")[0] for axis in figure.axes] == TASKS
    for axis, task in zip(figure.axes, TASKS, strict=True):
        assert axis.get_xlabel() == "frenet_d0L [rad]" and "main score" in axis.get_ylabel()
        named = {text.get_text(): text.xy for text in axis.texts}
        assert set(named) == set(MODELS)
        for model in MODELS:
            expected = (analysis["scores"][task][model]["frenet_d0L"], analysis["main"][task][model])
            assert named[model] == pytest.approx(expected)
        rho = analysis["per_task"]["frenet_d0L"][task]["rho"]
        assert f"{rho:.2f}" in axis.get_title()
    assert selection_scatter(analysis, "no_such_score") is None


def test_selection_report_writes_labelled_pngs(analysis, tmp_path):
    write_selection_report(analysis, tmp_path, ["frenet_d0L", "rankme"])
    for name in ("frenet_d0L", "rankme"):
        assert (tmp_path / f"scatter_{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "scatter_rankme.png" in (tmp_path / "selection.md").read_text()


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("frenet_d0L", "frenet_d0L [rad]"),
        ("frenet_mean_curvature", "frenet_mean_curvature [1/rad]"),
        ("nrs_mean_jaccard", "nrs_mean_jaccard [0–1]"),
        ("gfmi_mean_auc", "gfmi_mean_auc [nat × percentile]"),
        ("frenet_speed_cv", "frenet_speed_cv"),  # a ratio: no unit
    ],
)
def test_score_axis_labels(name, label):
    assert score_axis_label(name) == label
