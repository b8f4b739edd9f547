"""Tidy study records: what the analyses compute from a study folder they compute from the tidy file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mteb_lrd.studies.tidy import COLUMNS, read_rows, records_from_rows, tidy_rows, write_rows

MODELS = [("m1", "A", 10), ("m2", "A", 20), ("m3", "B", 30), ("m4", "B", 40), ("m5", "C", 50)]


def _selection_records(reproduce="ours"):
    rng = np.random.default_rng(0)
    records = []
    for task in ("T1", "T2"):
        for name, family, params in MODELS:
            scores = {"frenet_d0L": float(rng.normal()), "nrs_mean_jaccard": float(rng.uniform()),
                      "gfmi_mean_auc": float(rng.uniform(50, 100)), "rankme": None}  # fmt: skip
            records.append({
                "model": {"name": name, "family": family, "params": params, "dim": 8, "layers": 4,
                          "kind": "sentence-transformer", "template": None},
                "task": task, "main_score": float(rng.uniform()), "main_score_name": "cosine_spearman",
                "n_texts": 40, "caps": {"frenet": 1000, "nrs": 1000, "gfmi": 5000}, "reproduce": reproduce,
                "lrd_params": {"seed": 42}, "scores": scores,
                "profiles": {"speed": [1.0, 2.0, 1.5], "curvature": [0.5, 0.7]},
                "run": {"versions": {"mteb": "2.26.24"}},
            })  # fmt: skip
    return records


def _round_trip(records, tmp_path, study):
    path = write_rows(tmp_path / f"{study}.csv", tidy_rows(records, study))
    return records_from_rows(read_rows(path)), path


@pytest.mark.parametrize("reproduce", ["ours", "authors"])
def test_selection_analysis_is_the_same_from_the_tidy_file(tmp_path, reproduce):
    from mteb_lrd.studies.selection_analysis import analyse_selection

    records = _selection_records(reproduce)
    rebuilt, path = _round_trip(records, tmp_path, "selection")
    before, after = analyse_selection(records, min_models=4), analyse_selection(rebuilt, min_models=4)
    assert json.dumps(after, sort_keys=True, default=str) == json.dumps(before, sort_keys=True, default=str)
    rows = read_rows(path)
    assert {r["score"] for r in rows} >= {"main_score", "frenet_d0L"} and "rankme" not in {
        r["score"] for r in rows
    }
    assert json.loads(rows[0]["versions"]) == {"mteb": "2.26.24"} and rows[0]["n_texts"] == 40
    firsts = {}
    for row in rows:  # a cell's settings once, on its first row
        first = firsts.setdefault((row["model"], row["task"]), row)
        assert (row["options"] is not None) == (row is first) and (row["versions"] is not None) == (
            row is first
        )
    assert all(rec["caps"] == records[0]["caps"] for rec in rebuilt)


def _pruning_records():
    rng = np.random.default_rng(1)
    records = []
    for task in ("T1", "T2"):
        for name, family, params in MODELS[:3]:
            subsets = {"1": {str(b): float(rng.normal(-0.02, 0.01)) for b in (3, 4, 5)}}
            choices = [{"method": m, "budget": b, "seed": s, "blocks": [3 + k], "delta": subsets["1"][str(3 + k)],
                        "speedup": 1.2, "ids": [3 + k]}
                       for k, (m, b, s) in enumerate([("nrs", 0.2, None), ("gfmi", 0.2, None),
                                                      ("random", 0.2, 0)])]  # fmt: skip
            records.append({
                "model": {"name": name, "family": family, "params": params, "dim": 8, "layers": 8,
                          "kind": "decoder", "template": "prompteol"},
                "task": task, "base_score": float(rng.uniform(0.5, 0.8)), "main_score_name": "cosine_spearman",
                "n_texts": 40, "settings": {"protect": 3, "mapping": "reference", "variant_encoding": "shared prefix"},
                "choices": choices,
                "subsets": subsets,
            })  # fmt: skip
    return records


def test_pruning_analysis_is_the_same_from_the_tidy_file(tmp_path):
    from mteb_lrd.studies.pruning_analysis import analyse_pruning

    records = _pruning_records()
    rebuilt, _ = _round_trip(records, tmp_path, "pruning")
    before, after = analyse_pruning(records, n_resamples=200), analyse_pruning(rebuilt, n_resamples=200)
    assert json.dumps(after, sort_keys=True, default=str) == json.dumps(before, sort_keys=True, default=str)
    assert after["exhaustive"]["cells"] and rebuilt[0]["choices"][0]["blocks"] == [3]
    from mteb_lrd.studies.tidy import tidy_rows

    assert json.loads(tidy_rows(records, "pruning")[0]["options"])["variant_encoding"] == "shared prefix"


def test_a_file_that_is_no_tidy_record_is_named(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("model,task\nm,t\n")
    with pytest.raises(ValueError, match="not a tidy study record"):
        read_rows(bad)
    broken = tmp_path / "broken.csv"
    broken.write_text(",".join(COLUMNS) + "\n" + ",".join(["x"] * len(COLUMNS)) + "\n")
    with pytest.raises(ValueError, match="line 2"):
        read_rows(broken)
    with pytest.raises(ValueError, match="one study"):
        tidy_rows(_selection_records()[:1] + _pruning_records()[:1], "mixed")
