"""Results folders → variant-aware leaderboard, PNG figures and a self-contained HTML page."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from mteb_lrd.integration.results import load_variants
from mteb_lrd.report import leaderboard, to_markdown, write_report


def _task_file(folder, task, rows, meta):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model_meta.json").write_text(json.dumps(meta))
    (folder / f"{task}.json").write_text(json.dumps({"task_name": task, "scores": {"test": rows}}))


def _dynamics(d0l, num_layers=3):
    return {
        "num_layers": num_layers,
        "frenet": {"speed": [1.0] * num_layers, "curvature": [0.5] * (num_layers - 1)},
        "nrs": {"jaccard": [0.4] * num_layers},
        "gfmi": {"auc": [2.0] * (num_layers + 1)},
        "summary": {"frenet_d0L": d0l, "nrs_mean_jaccard": 0.4, "gfmi_mean_auc": 2.0},
    }


@pytest.fixture
def results(tmp_path):
    root = tmp_path / "cache" / "results" / "org__m" / "rev1"
    meta = {"name": "org/m", "revision": "rev1", "experiment_kwargs": None}
    per_layer = {"scores": [0.1, 0.2, 0.3, 0.4]}
    _task_file(
        root,
        "A",
        [
            {
                "main_score": 0.5,
                "hf_subset": "default",
                "layer_dynamics": _dynamics(2.0),
                "per_layer": per_layer,
            }
        ],
        meta,
    )
    _task_file(
        root, "B", [{"main_score": 0.7, "hf_subset": "x"}, {"main_score": 0.9, "hf_subset": "y"}], meta
    )
    exp = root / "experiments" / "num_blocks_4__removed_blocks_[1]"
    exp_meta = {**meta, "experiment_kwargs": {"removed_blocks": [1], "num_blocks": 4, "rule": "gfmi"}}
    _task_file(
        exp, "A", [{"main_score": 0.3, "hf_subset": "default", "layer_dynamics": _dynamics(4.0, 2)}], exp_meta
    )
    return tmp_path / "cache"


def test_variants_are_never_averaged(results):
    variants = load_variants(results)
    assert [v.experiment for v in variants] == [None, "num_blocks_4__removed_blocks_[1]"]
    base, pruned = variants
    assert base.tasks["B"].main_score == pytest.approx(0.8)  # mean over the split's subsets
    board = leaderboard(variants)
    assert board.columns == ["Model", "Variant", "A", "B", "Mean", "d0L", "NRS mean J", "GFMI mean AUC"]
    assert board.rows[0][:5] == ["org/m", "base", 50.0, pytest.approx(80.0), pytest.approx(65.0)]
    assert board.rows[1][:5] == ["org/m", "removed [1] of 4, rule=gfmi", 30.0, None, None]
    assert board.rows[0][5] == 2.0 and board.rows[1][5] == 4.0
    markdown = to_markdown(board)
    assert markdown.count("\n") == 4 and "| org/m | base | 50.00 | 80.00 | 65.00 | 2.00 |" in markdown


def test_write_report_files(results, tmp_path):
    paths = write_report(results, tmp_path / "report")
    assert len(paths["figures"]) == 2
    for png in paths["figures"]:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    page = paths["html"].read_text()

    class Collector(HTMLParser):
        rows, images = 0, []

        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                self.rows += 1
            if tag == "img":
                self.images.append(dict(attrs)["src"])

    collector = Collector()
    collector.feed(page)
    assert collector.rows == 3  # header + 2 variants
    assert len(collector.images) == 2 and all(
        src.startswith("data:image/png;base64,") for src in collector.images
    )
    assert 'src="http' not in page and "<link" not in page  # self-contained
    assert "removed [1] of 4" in paths["markdown"].read_text()


def test_empty_results_folder_is_an_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no mteb results"):
        write_report(tmp_path / "empty", tmp_path / "out")
    with pytest.raises(ValueError, match="does not exist"):
        load_variants(tmp_path / "missing")
