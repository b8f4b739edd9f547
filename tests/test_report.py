"""Results folders → variant-aware tables, figures, CSV / JSON exports and a self-contained HTML page.

Expected values are computed here straight from the JSON files (json.load, numpy), not through the
report code; figures are checked on the matplotlib Figure objects (labels, marker positions).
"""

from __future__ import annotations

import base64
import csv
import io
import json
import math
import shutil
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mteb_lrd.cli import main as cli
from mteb_lrd.report import leaderboard, results_table, task_table, to_markdown, write_report
from mteb_lrd.report.plots import d0l_figure, per_layer_figure, point_label, pruning_figure
from mteb_lrd.report.profile_plots import PROFILE_PANELS, profile_figure, profiles_overlay_figure
from mteb_lrd.report.result_files import ModelVariant, load_variants, read_results

PRUNED = "num_blocks_4__removed_blocks_[1,2]"
PRUNED_LAYERS = [0, 1, 4]  # h'_0 = h_0, h'_1 = out of block 0 = h_1, h'_2 = out of block 3 = h_4


def _interval(values, width):
    return {"low": [v - width for v in values], "high": [v + width for v in values], "resamples": 1000,
            "seed": 0, "confidence": 0.95, "over": "pairs"}  # fmt: skip


def _dynamics(rng, num_blocks):
    jaccard = rng.uniform(0, 1, num_blocks).tolist()
    return {
        "pooling": "mean",
        "final_norm": "as_is",
        "run": {"command": "mteb-lrd run --task A", "versions": {"torch": "2.13.0", "mteb": "2.26.24"}},
        "caps": {"frenet": 1000, "nrs": 1000, "gfmi": 5000},
        "params": {"seed": 42, "nrs_k": 20, "gfmi_k": 30},
        "num_layers": num_blocks,
        "frenet": {
            "speed": rng.uniform(1, 3, num_blocks).tolist(),
            "curvature": rng.uniform(0, 1, num_blocks - 1).tolist(),
        },
        "nrs": {"jaccard": jaccard, "jaccard_ci": {**_interval(jaccard, 0.05), "over": "anchors"}},
        "gfmi": {"auc": rng.uniform(10, 90, num_blocks + 1).tolist()},
        "summary": {
            "frenet_d0L": float(rng.uniform(2, 12)),
            "nrs_mean_jaccard": float(rng.uniform(0, 1)),
            "gfmi_mean_auc": float(rng.uniform(10, 90)),
        },
        "n_texts": 40,
        "n_used": {"frenet": 40, "nrs": 30, "gfmi": 40},
    }


def _subset(rng, name, num_blocks, main=None):
    per_layer = rng.uniform(0.1, 0.9, num_blocks + 1)
    return {
        "main_score": float(per_layer[-1] if main is None else main),
        "hf_subset": name,
        "languages": ["eng-Latn"],
        "layer_dynamics": _dynamics(rng, num_blocks),
        "per_layer": {
            "main_score": "cosine_spearman",
            "scores": per_layer.tolist(),
            "interval": _interval(per_layer.tolist(), 0.02),
        },  # fmt: skip
    }


def _write(folder: Path, meta: dict, task: str, rows: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model_meta.json").write_text(json.dumps(meta))
    payload = {
        "task_name": task,
        "dataset_revision": "rev-data",
        "mteb_version": "2.26.24",
        "date": 1796284222.0,
        "scores": {"test": rows},
    }
    (folder / f"{task}.json").write_text(json.dumps(payload))


def _build(cache: Path) -> Path:
    """org/a (4 blocks) + its variant without blocks 1 and 2, org/b (2 blocks), org/c (3 blocks);
    tasks A (one subset) and B (two subsets); random scores."""
    rng = np.random.RandomState(7)
    root = cache / "results"
    a = root / "org__a" / "r1"
    meta_a = {"name": "org/a", "revision": "r1", "experiment_kwargs": None}
    _write(a, meta_a, "A", [_subset(rng, "default", 4)])
    _write(a, meta_a, "B", [_subset(rng, "x", 4), _subset(rng, "y", 4)])
    pruned = a / "experiments" / PRUNED
    meta_p = {**meta_a, "experiment_kwargs": {"removed_blocks": [1, 2], "num_blocks": 4, "rule": "gfmi"}}
    _write(pruned, meta_p, "A", [_subset(rng, "default", 2)])
    _write(pruned, meta_p, "B", [_subset(rng, "x", 2), _subset(rng, "y", 2)])
    b = root / "org__b" / "r2"
    meta_b = {"name": "org/b", "revision": "r2", "experiment_kwargs": None}
    _write(b, meta_b, "A", [_subset(rng, "default", 2)])
    _write(b, meta_b, "B", [_subset(rng, "x", 2), _subset(rng, "y", 2)])
    c = root / "org__c" / "r3"
    meta_c = {"name": "org/c", "revision": "r3", "experiment_kwargs": None}
    _write(c, meta_c, "A", [_subset(rng, "default", 3)])
    _write(c, meta_c, "B", [_subset(rng, "x", 3), _subset(rng, "y", 3)])
    return cache


@pytest.fixture
def results(tmp_path):
    """A fresh results folder (tests may damage it)."""
    return _build(tmp_path / "cache")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """(results folder, write_report's paths) of one report written under umask 022 (rendering the
    figures is the slow part, so the read-only checks share it)."""
    import os

    base = tmp_path_factory.mktemp("report")
    results = _build(base / "cache")
    old = os.umask(0o022)
    try:
        paths = write_report(results, base / "report")
    finally:
        os.umask(old)
    return results, paths


def _files(results):
    """{(model, experiment): {task: parsed JSON}} read independently of the report code."""
    out: dict = {}
    for path in sorted((results / "results").rglob("*.json")):
        if path.name == "model_meta.json":
            continue
        meta = json.loads((path.parent / "model_meta.json").read_text())
        experiment = path.parent.name if path.parent.parent.name == "experiments" else None
        out.setdefault((meta["name"], experiment), {})[path.stem] = json.loads(path.read_text())
    return out


def _main(data):
    return float(np.mean([row["main_score"] for row in data["scores"]["test"]]))


def _curve(data):
    return np.mean([row["per_layer"]["scores"] for row in data["scores"]["test"]], axis=0)


def _base_layers(experiment, size):
    return PRUNED_LAYERS if experiment else list(range(size))


def test_leaderboard_values_equal_the_result_files(results):
    files = _files(results)
    board = leaderboard(load_variants(results))
    assert board.columns[:7] == ["Model", "Variant", "Revision", "A", "B", "Tasks", "Mean"]
    assert board.shared == ["A", "B"] and board.notes == []
    assert len(board.rows) == 4  # base, pruned variant, two other models: the variant is its own row
    for row in board.rows:
        experiment = PRUNED if row[1].startswith("removed") else None
        tasks = files[(row[0], experiment)]
        assert row[3] == pytest.approx(_main(tasks["A"]) * 100, abs=1e-9)
        assert row[4] == pytest.approx(_main(tasks["B"]) * 100, abs=1e-9)
        assert row[5] == 2
        assert row[6] == pytest.approx((_main(tasks["A"]) + _main(tasks["B"])) * 50, abs=1e-9)
        d0l = np.mean([np.mean([r["layer_dynamics"]["summary"]["frenet_d0L"] for r in tasks[t]["scores"]["test"]])
                       for t in ("A", "B")])  # fmt: skip
        assert row[board.columns.index("d0L [rad]")] == pytest.approx(d0l, abs=1e-9)
    assert board.rows[[r[1] for r in board.rows].index("removed [1, 2] of 4, rule=gfmi")][2] == "r1"


def test_undefined_states_are_named_with_their_reason_never_a_number(results):
    """A decoder whose h_0 is one vector: its leaderboard note names the state and the reason."""
    path = results / "results" / "org__b" / "r2" / "A.json"
    data = json.loads(path.read_text())
    dynamics = data["scores"]["test"][0]["layer_dynamics"]
    dynamics["undefined"] = {
        "frenet": {"h_0": "one vector for all texts"},
        "nrs": {"h_0": "one vector for all texts"},
    }
    dynamics["frenet"]["speed"][0] = None
    path.write_text(json.dumps(data))
    board = leaderboard(load_variants(results))
    (note,) = board.notes
    assert note.startswith("org/b (base): h_0 undefined: one vector for all texts.")
    assert "start at the first informative state" in note


def test_a_choice_of_scored_layers_keeps_each_score_at_its_hidden_state(tmp_path):
    """per_layer scores of a layer choice (h_0, h_4, h_8 of 9 states) belong to those states, in a
    pruned variant too (base numbering), not to h_0, h_1, h_2."""
    from mteb_lrd.report.plots import per_layer_figure
    from mteb_lrd.report.result_files import ModelVariant, TaskRecord
    from mteb_lrd.report.tables import best_layer

    entry = {"scores": [0.2, 0.5, 0.9], "layers": [0, 4, 8], "num_states": 9}
    record = TaskRecord("T", "test", 0.9, [{"main_score": 0.9, "per_layer": entry}])
    plain = ModelVariant("m", "r", None, None, tmp_path, {"T": record})
    assert best_layer(plain, [record]) == (8, pytest.approx(0.9))
    pruned = ModelVariant("m", "r", "x", {"removed_blocks": [1, 2]}, tmp_path, {"T": record})
    assert best_layer(pruned, [record]) == (10, pytest.approx(0.9))  # its h_8 is the base's h_10
    old = TaskRecord("T", "test", 0.9, [{"main_score": 0.9, "per_layer": {"scores": [0.2, 0.5, 0.9]}}])
    assert best_layer(plain, [old]) == (2, pytest.approx(0.9))  # no layers recorded: every state
    assert best_layer(plain, [record, old]) == (None, None)  # other states: no common curve
    figure = per_layer_figure([plain], ["T"])  # x: relative depth in the base model
    assert list(figure.axes[0].lines[0].get_xdata()) == [0, 0.5, 1]


def test_best_layer_is_the_argmax_in_base_numbering(results):
    files = _files(results)
    board = leaderboard(load_variants(results))
    tasks = task_table(load_variants(results))
    for row in board.rows:
        experiment = PRUNED if row[1].startswith("removed") else None
        data = files[(row[0], experiment)]
        mean_curve = (_curve(data["A"]) + _curve(data["B"])) / 2
        expected = _base_layers(experiment, mean_curve.size)[int(np.argmax(mean_curve))]
        assert row[board.columns.index("Best layer")] == expected
        assert row[board.columns.index("Best-layer score")] == pytest.approx(mean_curve.max() * 100, abs=1e-9)
    for record in tasks.records():
        data = files[(record["model"], record["experiment"])][record["task"]]
        curve = _curve(data)
        assert record["best_layer"] == _base_layers(record["experiment"], curve.size)[int(np.argmax(curve))]
        assert record["best_layer_score"] == pytest.approx(curve.max(), abs=1e-12)
        assert record["main_score"] == pytest.approx(_main(data), abs=1e-12)
        assert (record["n_used_frenet"], record["n_used_nrs"], record["mteb_version"]) == (40, 30, "2.26.24")
        assert record["date"] == "2026-12-03 07:50:22 UTC" and record["dataset_revision"] == "rev-data"


@pytest.mark.parametrize(
    ("removed", "num_states", "expected"),
    [([2, 3], 5, [0, 1, 2, 5, 6]), ([0], 3, [0, 2, 3]), ([5], 6, [0, 1, 2, 3, 4, 5]), ([], 4, [0, 1, 2, 3])],
)
def test_original_layers_by_hand(removed, num_states, expected):
    variant = ModelVariant("m", "r", "e" if removed else None, {"removed_blocks": removed}, Path("."))
    assert variant.original_layers(num_states).tolist() == expected


@given(
    st.integers(1, 40).flatmap(
        lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1), max_size=n - 1))
    )
)
def test_original_layers_property(case):
    num_blocks, removed = case
    variant = ModelVariant(
        "m", "r", "e", {"removed_blocks": sorted(removed), "num_blocks": num_blocks}, Path(".")
    )
    layers = variant.original_layers(num_blocks - len(removed) + 1).tolist()
    assert layers[0] == 0 and layers == sorted(set(layers))
    assert set(layers) | {b + 1 for b in removed} == set(range(num_blocks + 1))
    assert not set(layers) & {b + 1 for b in removed}


def _axes_with_data(figure):
    return [axis for axis in figure.axes if axis.lines or axis.collections]


def test_pruning_figure_marks_removed_blocks_on_the_base_index(results):
    variants = load_variants(results)
    group = [v for v in variants if v.model == "org/a"]
    figure = pruning_figure(group, ["A", "B"])
    assert figure is not None and len(figure.axes) == 2
    files = _files(results)
    for axis, task in zip(figure.axes, ["A", "B"], strict=True):
        spans = [p for p in axis.patches if (p.get_gid() or "").startswith("removed:")]
        centres = sorted(p.get_x() + p.get_width() / 2 for p in spans)
        assert centres == pytest.approx([2.0, 3.0])  # blocks 1 and 2 produce h_2 and h_3
        assert {p.get_gid() for p in spans} == {f"removed:org/a [{PRUNED}]:1", f"removed:org/a [{PRUNED}]:2"}
        texts = sorted(t.get_text() for t in axis.texts)
        assert texts == ["block 1 removed", "block 2 removed"]
        base, pruned = axis.lines
        assert list(base.get_xdata()) == [0, 1, 2, 3, 4] and list(pruned.get_xdata()) == PRUNED_LAYERS
        assert pruned.get_ydata() == pytest.approx(_curve(files[("org/a", PRUNED)][task]) * 100)
        assert "base model" in axis.get_xlabel() and axis.get_ylabel() == "cosine_spearman × 100"
    assert pruning_figure([v for v in variants if v.model == "org/b"], ["A"]) is None  # nothing pruned


def test_every_figure_has_labelled_axes(results):
    variants = load_variants(results)
    figures = [
        per_layer_figure(variants, ["A", "B"]),
        pruning_figure([v for v in variants if v.model == "org/a"], ["A", "B"]),
        d0l_figure(variants, ["A", "B"]),
        *(profile_figure(v) for v in variants),
    ]
    assert all(f is not None for f in figures)
    for figure in figures:
        assert figure.get_suptitle()
        for axis in _axes_with_data(figure):
            assert axis.get_xlabel().strip() and axis.get_ylabel().strip() and axis.get_title()
    units = {axis.get_ylabel() for axis in figures[-1].axes}
    assert any("[rad]" in u for u in units) and any("[1/rad]" in u for u in units)


def test_a_variant_has_one_colour_in_every_figure_of_a_page(results):
    """The page's palette is assigned once: the pruned variant's colour in the base-vs-pruned
    figure (which draws two lines) is its colour in the all-models figure (which draws four)."""
    from mteb_lrd.report.plots import variant_colours

    variants = load_variants(results)
    colours = variant_colours(variants)
    pruned = next(v for v in variants if v.experiment)
    group = [v for v in variants if v.model == pruned.model]
    everyone = per_layer_figure(variants, ["A", "B"], colours)
    base_vs_pruned = pruning_figure(group, ["A", "B"], colours)
    overlay = profiles_overlay_figure(group, "A", relative=False, colours=colours)

    def colour_of(figure, match):
        found = {tuple(line.get_color()) for axis in figure.axes for line in axis.get_lines() if match(line)}
        assert len(found) == 1, found
        return found.pop()

    expected = tuple(colours[(pruned.model, pruned.revision, pruned.experiment)])
    assert colour_of(everyone, lambda line: line.get_label() == point_label(pruned)) == expected
    assert colour_of(base_vs_pruned, lambda line: line.get_linestyle() == "--") == expected
    assert colour_of(overlay, lambda line: line.get_linestyle() == "--") == expected
    assert len(set(map(tuple, colours.values()))) == len(variants)  # one colour each


def test_per_layer_overlay_draws_every_variant_on_relative_depth(results):
    variants = load_variants(results)
    figure = per_layer_figure(variants, ["A", "B"])
    files = _files(results)
    for axis, task in zip(figure.axes, ["A", "B"], strict=True):
        labels = [line.get_label() for line in axis.lines]
        assert sorted(labels) == sorted(point_label(v) for v in variants)
        for line, variant in zip(axis.lines, variants, strict=True):
            curve = _curve(files[(variant.model, variant.experiment)][task])
            num_blocks = {"org/a": 4, "org/b": 2, "org/c": 3}[variant.model]
            expected = np.array(_base_layers(variant.experiment, curve.size)) / num_blocks
            assert line.get_xdata() == pytest.approx(expected)
            assert line.get_linestyle() == ("--" if variant.experiment else "-")


def test_d0l_scatter_points_are_labelled_with_model_names(results):
    variants = load_variants(results)
    figure = d0l_figure(variants, ["A", "B"])
    files = _files(results)
    titles = [a.get_title() for a in figure.axes]
    assert [t.split("\n")[0] for t in titles] == ["A", "B", "mean over the 2 shared tasks"]
    axis = figure.axes[0]
    assert "[rad]" in axis.get_xlabel() and "× 100" in axis.get_ylabel()
    annotations = {t.get_text(): t.xy for t in axis.texts}
    assert set(annotations) == {"a", f"a −{[1, 2]}", "b", "c"}
    points = []
    for variant in variants:
        data = files[(variant.model, variant.experiment)]["A"]
        d0l = np.mean([r["layer_dynamics"]["summary"]["frenet_d0L"] for r in data["scores"]["test"]])
        assert annotations[point_label(variant)] == pytest.approx((d0l, _main(data) * 100))
        points.append((d0l, _main(data)))
    ranks = [np.argsort(np.argsort(column)) for column in zip(*points, strict=True)]
    rho = 1 - 6 * np.sum((ranks[0] - ranks[1]) ** 2) / (4 * (16 - 1))  # no ties: the textbook formula
    assert titles[0].split("\n")[1] == f"Spearman ρ = {rho:+.2f}, n = 4"


def test_d0l_scatter_needs_four_models(results):
    shutil.rmtree(results / "results" / "org__c")
    assert d0l_figure(load_variants(results), ["A", "B"]) is None  # 3 models / variants: no ρ drawn


def test_rows_grouped_by_model_base_first_then_variants_by_score(tmp_path):
    rng = np.random.RandomState(0)
    root = tmp_path / "results"
    for model, score in (("org/low", 0.3), ("org/high", 0.6)):
        meta = {"name": model, "revision": "r", "experiment_kwargs": None}
        folder = root / model.replace("/", "__") / "r"
        _write(folder, meta, "T", [_subset(rng, "default", 3, main=score)])
        for blocks, pruned_score in (([0], score - 0.2), ([1], score + 0.1), ([2], score - 0.1)):
            kwargs = {"removed_blocks": blocks, "num_blocks": 3}
            name = f"num_blocks_3__removed_blocks_{blocks}"
            _write(folder / "experiments" / name, {**meta, "experiment_kwargs": kwargs}, "T",
                   [_subset(rng, "default", 2, main=pruned_score)])  # fmt: skip
    board = leaderboard(load_variants(tmp_path))
    order = [(row[0], row[1]) for row in board.rows]
    assert order == [
        ("org/high", "base"),
        ("org/high", "removed [1] of 3"),
        ("org/high", "removed [2] of 3"),
        ("org/high", "removed [0] of 3"),
        ("org/low", "base"),
        ("org/low", "removed [1] of 3"),
        ("org/low", "removed [2] of 3"),
        ("org/low", "removed [0] of 3"),
    ]
    assert board.groups == [row[0] for row in board.rows]


def test_exports_round_trip(report):
    results, paths = report
    variants = load_variants(results)
    for table, csv_path, json_path in (
        (leaderboard(variants), paths["csv"], paths["json"]),
        (task_table(variants), paths["tasks_csv"], paths["tasks_json"]),
    ):
        rows = list(csv.reader(io.StringIO(csv_path.read_text())))
        assert rows[0] == table.columns and len(rows) == len(table.rows) + 1
        for written, row in zip(rows[1:], table.rows, strict=True):
            for text, value in zip(written, row, strict=True):
                if value is None:
                    assert text == ""
                elif isinstance(value, float):
                    assert float(text) == value  # unrounded
                else:
                    assert text == str(value)
        assert json.loads(json_path.read_text()) == table.records()
    frame = results_table(results)
    assert list(frame.columns) == task_table(variants).columns
    assert frame["main_score"].tolist() == [r["main_score"] for r in task_table(variants).records()]
    assert frame.groupby("model").size().to_dict() == {"org/a": 4, "org/b": 2, "org/c": 2}  # variants apart


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.sources, self.links, self.body_rows = [], {}, 0
        self._in_tbody = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.sources.append(attrs["src"])
        if tag == "a" and "download" in attrs:
            self.links[attrs["download"]] = attrs["href"]
        if tag == "link" or (tag == "script" and "src" in attrs):
            self.sources.append(attrs.get("href") or attrs["src"])


def test_html_is_self_contained_and_shows_provenance(report):
    results, paths = report
    page = paths["html"].read_text()
    parser = _Page()
    parser.feed(page)
    assert parser.sources and all(src.startswith("data:image/png;base64,") for src in parser.sources)
    assert (
        len(parser.sources) == len(paths["figures"]) == 11
    )  # overlay, 2 overlaid profiles, pruning + 2 profiles, d0L, 4 profiles
    for name, href in parser.links.items():
        embedded = base64.b64decode(href.split(",", 1)[1]).decode()
        assert embedded == (paths["html"].parent / name).read_text()
    assert set(parser.links) == {"leaderboard.csv", "leaderboard.json", "tasks.csv", "tasks.json"}
    for text in (
        "2.26.24",
        "2026-12-03 07:50:22 UTC",
        "org/a: r1",
        "frenet 40; nrs 30; gfmi 40",
        "to_dataframe",
    ):
        assert text in page
    assert "8 read, 0 unreadable" in page
    for png in paths["figures"]:
        from PIL import Image

        with Image.open(png) as image:
            assert image.info["Title"] and image.width > 500
    markdown = paths["markdown"].read_text()
    assert to_markdown(leaderboard(load_variants(results))) in markdown
    assert all(f"figures/{png.name}" in markdown for png in paths["figures"])


def test_report_files_respect_the_umask(report):
    _, paths = report
    for path in [paths["html"], paths["markdown"], paths["csv"], paths["tasks_json"], *paths["figures"]]:
        assert path.stat().st_mode & 0o777 == 0o644


def _break(results):
    folder = results / "results" / "org__b" / "r2"
    torn = folder / "C.json"
    torn.write_text('{"task_name": "C", "scores": {"test": [{"main_score": 0.9')
    nan = folder / "D.json"
    nan.write_text(
        json.dumps({"task_name": "D", "scores": {"test": [{"main_score": math.nan, "hf_subset": "x"}]}})
    )
    other = folder / "notes.json"
    other.write_text("[1, 2]")
    return [torn, nan, other]


def test_corrupt_result_files_are_warned_named_and_counted(results, tmp_path, capsys):
    before = leaderboard(load_variants(results))
    broken = _break(results)
    with pytest.warns(UserWarning, match="3 result file") as record:
        folder = read_results(results)
    message = str(record[0].message)
    assert all(str(path) in message for path in broken)
    assert sorted(u.path for u in folder.unreadable) == sorted(broken)
    reasons = {u.path.name: u.reason for u in folder.unreadable}
    assert "not valid JSON" in reasons["C.json"] and "main_score" in reasons["D.json"]
    assert "not an mteb task result" in reasons["notes.json"]
    assert leaderboard(folder.variants).rows == before.rows  # the readable ones are unchanged

    assert cli(["report", str(results), "--out", str(tmp_path / "cli")]) == 0
    err = capsys.readouterr().err
    assert all(f"left out {p}" in err for p in broken) and "3 unreadable result file(s)" in err
    page = (tmp_path / "cli" / "report.html").read_text()
    assert "3 result file(s) could not be used" in page and all(str(p) in page for p in broken)
    assert "8 read, 3 unreadable" in page
    assert all(str(p) in (tmp_path / "cli" / "leaderboard.md").read_text() for p in broken)
    with pytest.raises(ValueError, match="3 unreadable result file"):
        write_report(results, tmp_path / "strict-api", strict=True)
    assert cli(["report", str(results), "--out", str(tmp_path / "strict"), "--strict"]) == 2
    assert "C.json" in capsys.readouterr().err


def test_a_torn_model_meta_is_named_and_the_folder_name_used(results):
    meta = results / "results" / "org__b" / "r2" / "model_meta.json"
    meta.write_text("{")
    with pytest.warns(UserWarning, match="model_meta.json"):
        folder = read_results(results)
    assert [u.path for u in folder.unreadable] == [meta]
    assert {v.model for v in folder.variants} == {"org/a", "org/b", "org/c"}


def test_duplicate_and_misplaced_result_files_are_named(results):
    folder = results / "results" / "org__b" / "r2"
    copy = folder / "A (copy).json"
    copy.write_text((folder / "A.json").read_text().replace('"main_score": 0.', '"main_score": 0.0'))
    nested = folder / "old" / "A.json"
    nested.parent.mkdir()
    nested.write_text((folder / "A.json").read_text())
    with pytest.warns(UserWarning, match="2 result file"):
        read = read_results(results)
    reasons = {u.path: u.reason for u in read.unreadable}
    assert "second result of task 'A'" in reasons[copy] and str(folder / "A.json") in reasons[copy]
    assert "layout" in reasons[nested]
    b = next(v for v in read.variants if v.model == "org/b")
    assert b.tasks["A"].path == folder / "A.json"


def test_report_folder_inside_the_results_is_refused(results):
    with pytest.raises(ValueError, match="inside the results folder"):
        write_report(results, results / "results" / "report")


def test_cli_positional_results_and_out(results, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cache").rename(tmp_path / "results")
    assert cli(["report", "results/", "--out", "reports/"]) == 0
    assert (tmp_path / "reports" / "report.html").is_file()
    assert "reports/report.html" in capsys.readouterr().out
    assert cli(["report", "results", "--results", "elsewhere", "--out", "r2"]) == 2
    assert "two results folders" in capsys.readouterr().err


def test_task_columns_in_the_order_asked(results):
    board = leaderboard(load_variants(results), ["B", "A"])
    assert board.columns[3:7] == ["B", "A", "Tasks", "Mean"] and board.tasks == ["B", "A"]
    (results / "results" / "org__b" / "r2" / "B.json").unlink()
    only_b = leaderboard(load_variants(results), ["B"])
    assert [row[0] for row in only_b.rows] == ["org/a", "org/a", "org/c"]  # org/b has no B: no empty row
    assert "A" not in only_b.columns and {
        r["task"] for r in task_table(load_variants(results), ["B"]).records()
    } == {"B"}


def test_bad_inputs_are_clear_errors(results, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no usable mteb results"):
        write_report(tmp_path / "empty", tmp_path / "out")
    with pytest.raises(ValueError, match="does not exist"):
        load_variants(tmp_path / "missing")
    with pytest.raises(ValueError, match="no results for task.*Nope.*A, B"):
        write_report(results, tmp_path / "out", ["Nope"])
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ValueError, match="cannot create the report folder"):
        write_report(results, tmp_path / "a-file")


def _set_gfmi_texts(path: Path, count: int) -> None:
    data = json.loads(path.read_text())
    for row in data["scores"]["test"]:
        row["layer_dynamics"]["n_used"]["gfmi"] = count
    path.write_text(json.dumps(data))


def test_model_level_columns_cover_only_the_shared_tasks(results, tmp_path):
    (results / "results" / "org__b" / "r2" / "B.json").unlink()  # org/b has A only
    files = _files(results)
    board = leaderboard(load_variants(results))
    assert board.shared == ["A"] and board.tasks == ["A", "B"]
    assert board.notes and "1 of 2 tasks every row has (A)" in board.notes[0]
    column = {name: i for i, name in enumerate(board.columns)}
    for row in board.rows:
        experiment = PRUNED if row[1].startswith("removed") else None
        data = files[(row[0], experiment)]
        assert row[column["Tasks"]] == len(data)
        assert row[column["Mean"]] == pytest.approx(_main(data["A"]) * 100, abs=1e-9)  # not over B
        curve = _curve(data["A"])
        assert row[column["Best layer"]] == _base_layers(experiment, curve.size)[int(np.argmax(curve))]
        summary = [r["layer_dynamics"]["summary"] for r in data["A"]["scores"]["test"]]
        assert row[column["d0L [rad]"]] == pytest.approx(np.mean([s["frenet_d0L"] for s in summary]))
        assert row[column["GFMI mean AUC"]] == pytest.approx(np.mean([s["gfmi_mean_auc"] for s in summary]))
    shared = {(r["model"], r["task"]): r["shared_task"] for r in task_table(load_variants(results)).records()}
    assert shared[("org/b", "A")] is True and shared[("org/a", "B")] is False
    frame = results_table(results)
    assert frame.loc[frame["task"] == "B", "shared_task"].tolist() == [False] * 3

    paths = write_report(results, tmp_path / "report")
    exported = json.loads(paths["json"].read_text())
    assert [r["Mean"] for r in exported] == [row[column["Mean"]] for row in board.rows]
    assert "1 of 2 tasks every row has" in paths["html"].read_text()
    assert "1 of 2 tasks every row has" in paths["markdown"].read_text()


def test_texts_count_dependent_scores_are_not_averaged_across_sizes(results):
    for folder in ("org__a/r1", "org__a/r1/experiments/" + PRUNED, "org__b/r2", "org__c/r3"):
        _set_gfmi_texts(results / "results" / folder / "B.json", 80)  # task B: 80 texts, task A: 40
    board = leaderboard(load_variants(results))
    gfmi, d0l, nrs = (board.columns.index(c) for c in ("GFMI mean AUC", "d0L [rad]", "NRS mean J"))
    assert all(row[gfmi] is None for row in board.rows)
    assert all(
        row[d0l] is not None and row[nrs] is not None for row in board.rows
    )  # d0L: angle; NRS: 30 each
    assert board.notes == ["GFMI mean AUC: not shown, computed on different numbers of texts (40–80); "
                           "compare it per task in tasks.csv."]  # fmt: skip
    only_b = leaderboard(load_variants(results), ["B"])  # one task, one size: comparable again
    assert all(row[only_b.columns.index("GFMI mean AUC")] is not None for row in only_b.rows)

    _set_gfmi_texts(results / "results" / "org__c" / "r3" / "B.json", 60)  # same task, another size
    mixed = leaderboard(load_variants(results), ["B"])
    assert all(row[mixed.columns.index("GFMI mean AUC")] is None for row in mixed.rows)
    assert "(60–80)" in mixed.notes[0]


def test_no_shared_task_leaves_every_model_level_column_empty(results):
    (results / "results" / "org__b" / "r2" / "B.json").unlink()
    (results / "results" / "org__c" / "r3" / "A.json").unlink()
    board = leaderboard(load_variants(results))
    assert board.shared == [] and "No task is shared by every row" in board.notes[0]
    first_model_level = board.columns.index("Mean")
    assert all(cell is None for row in board.rows for cell in row[first_model_level:])
    assert all(row[board.columns.index("Tasks")] >= 1 for row in board.rows)


def test_overlaid_profiles_share_axes_and_draw_the_recorded_intervals(results):
    variants = load_variants(results)
    files = _files(results)
    figure = profiles_overlay_figure(variants, "A", relative=True)
    titles = [axis.get_title() for axis in figure.axes]
    assert titles == [title for title, _ in PROFILE_PANELS]
    nrs_axis, score_axis = figure.axes[2], figure.axes[4]
    blocks = {"org/a": 4, "org/b": 2, "org/c": 3}
    for line, variant in zip(nrs_axis.lines, variants, strict=True):
        row = files[(variant.model, variant.experiment)]["A"]["scores"]["test"][0]
        layers = np.array(_base_layers(variant.experiment, len(row["per_layer"]["scores"])), dtype=float)
        assert line.get_xdata() == pytest.approx((layers[:-1] + layers[1:]) / 2 / blocks[variant.model])
        assert line.get_ydata() == pytest.approx(row["layer_dynamics"]["nrs"]["jaccard"])
        assert line.get_linestyle() == ("--" if variant.experiment else "-")
    bands = {c.get_gid(): c for c in score_axis.collections}
    assert set(bands) == {f"interval:{v.label}" for v in variants}
    row = files[("org/b", None)]["A"]["scores"]["test"][0]
    (path,) = bands["interval:org/b"].get_paths()
    ys = path.vertices[:, 1]
    expected = np.array(row["per_layer"]["scores"]) * 100
    assert ys.min() == pytest.approx((expected - 2).min()) and ys.max() == pytest.approx((expected + 2).max())

    group = [v for v in variants if v.model == "org/a"]
    by_index = profiles_overlay_figure(group, "B", relative=False)  # two subsets: averaged, no band
    gids = {p.get_gid() for p in by_index.axes[0].patches}
    assert {f"removed:{group[1].label}:1", f"removed:{group[1].label}:2"} <= gids
    assert not [c for c in by_index.axes[4].collections if (c.get_gid() or "").startswith("interval")]
    assert profiles_overlay_figure(group[:1], "A", relative=False) is None  # one line: nothing to overlay


def test_provenance_states_how_the_numbers_were_made(report, tmp_path):
    results, paths = report
    page = paths["html"].read_text()
    for text in ("mteb-lrd run --task A", "mteb 2.26.24, torch 2.13.0", "frenet 1000, nrs 1000, gfmi 5000",
                 "seed 42, nrs_k 20, gfmi_k 30", "resamples 1000, seed 0, confidence 0.95",
                 "mean / as_is"):  # fmt: skip
        assert text in page, text
    demo = results / "results" / "org__b" / "r2" / "LocalSTS12.json"
    demo.write_text(demo.with_name("A.json").read_text().replace('"A"', '"LocalSTS12"'))
    written = write_report(results, tmp_path / "with-local")
    assert "MSRvid part (750 pairs) is missing" in written["html"].read_text()


def test_the_pages_leaderboard_puts_the_headline_columns_before_the_tasks(report):
    """On the page the model-level columns follow Model and Variant, so they are on screen however
    many task columns there are; the Markdown / CSV exports keep their order."""
    import re

    _, paths = report
    page = paths["html"].read_text()
    first_table = page[page.index("<h2>Leaderboard</h2>") :].split("</thead>")[0]
    heads = re.findall(r"<th(?: class=\"headline\")?>(.*?)</th>", first_table)
    assert heads[:3] == ["Model", "Variant", "Mean"]
    assert heads.index("d0L [rad]") < heads.index("A") < heads.index("B") < heads.index("Revision")
    assert 'class="board sortable"' in first_table
    assert re.findall(r'<th class="headline">(.*?)</th>', first_table) == heads[2 : heads.index("A")]
    assert "| Model | Variant | Revision | A | B |" in paths["markdown"].read_text()


def test_figure_headings_name_variants_as_the_table_does(report):
    """A pruned variant is "removed [1, 2] of 4, rule=gfmi" in the figure headings, as in the
    leaderboard, never its raw experiment folder name."""
    import re

    _, paths = report
    page = paths["html"].read_text()
    headings = re.findall(r"<h3>(.*?)</h3>", page)
    assert "org/a (removed [1, 2] of 4, rule=gfmi)" in headings
    assert not any(PRUNED in heading for heading in headings)


def test_parameter_sets_that_differ_only_in_the_backend_are_shown_once(results, tmp_path):
    """``auto`` resolved to ``faiss-cpu`` in one file and recorded as ``auto`` in another: one set,
    its backends listed."""
    for number, path in enumerate(sorted((results / "results").rglob("A.json"))):
        data = json.loads(path.read_text())
        for row in data["scores"]["test"]:
            row["layer_dynamics"]["params"]["backend"] = "auto" if number % 2 else "faiss-cpu"
        path.write_text(json.dumps(data))
    page = write_report(results, tmp_path / "report")["html"].read_text()
    line = page[page.index("<th>LRD parameters</th>") :].split("</tr>")[0]
    assert line.count("seed 42, nrs_k 20, gfmi_k 30") == 1
    assert "kNN backend auto / faiss-cpu" in line
