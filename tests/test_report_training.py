"""Plotting a training run from the evaluator's CSV or the trainer's trainer_state.json."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mteb_lrd.report.training_figure import read_training_log, training_figure

CSV = (
    "epoch,steps,frenet_d0L,nrs_mean_jaccard,spearman_cosine,spearman_cosine_h0,spearman_cosine_h1,"
    "spearman_cosine_h2\n"
    """0,2,1.5,0.40,0.50,0.10,0.30,0.50
0,4,1.7,0.45,0.60,0.10,0.35,0.60
1,6,1.9,0.50,0.70,0.10,0.40,0.70
"""
)


def test_the_csv_gives_steps_scores_and_layer_curves(tmp_path):
    path = tmp_path / "layer_dynamics_evaluation_dev_results.csv"
    path.write_text(CSV)
    log = read_training_log(path)
    np.testing.assert_array_equal(log.steps, [2, 4, 6])
    assert log.step_label == "training step"
    assert list(log.scores) == ["frenet_d0L", "nrs_mean_jaccard", "spearman_cosine"]
    np.testing.assert_array_equal(log.scores["frenet_d0L"], [1.5, 1.7, 1.9])
    np.testing.assert_array_equal(log.layers, [[0.1, 0.3, 0.5], [0.1, 0.35, 0.6], [0.1, 0.4, 0.7]])
    fig = training_figure(log)
    visible = [axis for axis in fig.axes if axis.get_visible()]
    assert len(visible) == 4
    d0l = visible[0]
    assert d0l.get_xlabel() == "training step"
    assert d0l.get_ylabel() == "d0L: Frenet end-to-end displacement [rad]"
    # the range under the name, so a small change reads as small on an autoscaled axis
    assert d0l.get_title() == f"{d0l.get_ylabel()}\nrange 1.5–1.9 (Δ 0.4, 26.7 % of the start)"
    assert visible[1].get_title().startswith("NRS mean Jaccard retention\nrange ")
    np.testing.assert_array_equal(d0l.lines[0].get_ydata(), [1.5, 1.7, 1.9])
    curves = visible[3].lines
    assert len(curves) == 3 and visible[3].get_xlabel() == "hidden state h_l"
    np.testing.assert_array_equal(curves[-1].get_ydata(), [0.1, 0.4, 0.7])
    assert (
        curves[0].get_alpha() is None and curves[0].get_color()[3] < curves[-1].get_color()[3]
    )  # light → dark


def test_the_trainer_state_gives_the_same_log(tmp_path):
    history = [{"loss": 0.3, "step": 2}]
    for step, values in ((2, (1.5, 0.5)), (4, (1.7, 0.6))):
        history.append({"step": step, "eval_loss": 0.2, "eval_dev_frenet_d0L": values[0],
                        "eval_dev_spearman_cosine": values[1], "eval_dev_spearman_cosine_h0": 0.1,
                        "eval_dev_spearman_cosine_h1": values[1]})  # fmt: skip
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": history}))
    log = read_training_log(path)
    np.testing.assert_array_equal(log.steps, [2, 4])
    assert set(log.scores) == {"frenet_d0L", "spearman_cosine"}  # eval_loss is no layer-dynamics metric
    np.testing.assert_array_equal(log.layers, [[0.1, 0.5], [0.1, 0.6]])


def test_evaluations_without_steps_are_numbered(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("epoch,steps,frenet_d0L\n0,-1,1.0\n1,-1,1.2\n")
    log = read_training_log(path)
    np.testing.assert_array_equal(log.steps, [1, 2])
    assert log.step_label == "evaluation" and log.layers is None
    assert len([a for a in training_figure(log).axes if a.get_visible()]) == 1


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.csv", "epoch,steps,loss\n0,1,0.5\n", "no layer-dynamics metric"),
        ("a.csv", "epoch,steps,frenet_d0L\n0,1,high\n", "not a layer-dynamics training log"),
        ("trainer_state.json", '{"best": 1}', "no log_history"),
        ("trainer_state.json", "{not json", "not a layer-dynamics training log"),
    ],
)
def test_bad_logs_are_named(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        read_training_log(path)
    with pytest.raises(FileNotFoundError, match="no such training log"):
        read_training_log(tmp_path / "missing.csv")


def test_the_cli_writes_the_figure(tmp_path, capsys):
    from mteb_lrd.cli import main

    path = tmp_path / "log.csv"
    path.write_text(CSV)
    assert main(["report", "--training", str(path), "--out", str(tmp_path / "out")]) == 0
    figure = tmp_path / "out" / "training.png"
    assert capsys.readouterr().out.strip() == str(figure) and figure.stat().st_size > 5000


def test_score_names_and_range_notes_by_hand():
    from mteb_lrd.report.training_figure import range_note, score_name

    assert score_name("gfmi_mean_auc") == "GFMI mean AUC [nats × percentile]"
    assert score_name("nrs_late_jaccard") == "NRS late jaccard"
    assert range_note(np.array([11.0, 11.12, 11.05])) == "range 11–11.12 (Δ 0.12, 1.1 % of the start)"
    assert range_note(np.array([np.nan, np.nan])) == "undefined at every evaluation"


def test_a_logged_bootstrap_interval_is_drawn_as_a_band(tmp_path):
    path = tmp_path / "layer_dynamics_evaluation_dev_results.csv"
    path.write_text(
        "epoch,steps,frenet_d0L,spearman_cosine,spearman_cosine_low,spearman_cosine_high\n"
        "0,2,1.5,0.50,0.41,0.58\n0,4,1.7,0.60,0.52,0.66\n"
    )
    log = read_training_log(path)
    assert list(log.scores) == ["frenet_d0L", "spearman_cosine"]  # the bounds are no scores of their own
    np.testing.assert_array_equal(log.bands["spearman_cosine"][0], [0.41, 0.52])
    np.testing.assert_array_equal(log.bands["spearman_cosine"][1], [0.58, 0.66])
    axes = [axis for axis in training_figure(log).axes if axis.get_visible()]
    assert not axes[0].collections  # d0L has no band
    (band,) = axes[1].collections
    vertices = band.get_paths()[0].vertices
    assert vertices[:, 1].min() == pytest.approx(0.41) and vertices[:, 1].max() == pytest.approx(0.66)
