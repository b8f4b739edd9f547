"""The exhaustive pruning reference: every candidate set scored, each method's choice ranked."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mteb_lrd.parameters import Caps
from mteb_lrd.pruning.rules import candidate_block_sets
from mteb_lrd.studies.exhaustive_reference import exhaustive_reference, midrank_percentile
from mteb_lrd.studies.options import CellOptions, PruneStudyOptions
from tests.studies.test_study_commands import PAIRS, _decoder, tiny_task  # noqa: F401 - fixture


def test_candidate_sets_are_every_combination_of_the_unprotected_layers():
    singles = candidate_block_sets(13, 1)  # all-mpnet-base-v2: 12 blocks, 3 protected at each end
    pairs = candidate_block_sets(13, 2)
    assert singles == [[i] for i in range(3, 10)]
    assert len(pairs) == math.comb(7, 2) == 21 and pairs[0] == [3, 4] and pairs[-1] == [8, 9]
    assert candidate_block_sets(13, 1, mapping="producer") == [[i - 1] for i in range(3, 10)]
    assert candidate_block_sets(7, 1) == [[3]]  # MiniLM-L6: a single candidate
    for size in (0, 8, True, 1.0):
        with pytest.raises(ValueError, match="subset size"):
            candidate_block_sets(13, size)


def test_midrank_percentile_by_hand():
    reference = [0.1, 0.2, 0.2, 0.4]
    assert midrank_percentile(reference, 0.2) == 100 * (1 + 0.5 * 2) / 4  # 50
    assert midrank_percentile(reference, 0.5) == 100.0
    assert midrank_percentile(reference, 0.0) == 0.0
    assert midrank_percentile(reference, 0.4) == 100 * (3 + 0.5) / 4
    with pytest.raises(ValueError, match="no block set"):
        midrank_percentile([], 0.0)


@given(st.lists(st.floats(-1, 1), min_size=1, max_size=30), st.floats(-1, 1))
def test_midrank_percentile_equals_a_loop(reference, value):
    expected = 100 * sum(1.0 if r < value else 0.5 if r == value else 0.0 for r in reference) / len(reference)
    assert midrank_percentile(reference, value) == pytest.approx(expected)


def _record(model, task, subsets, choices):
    return {"model": {"name": model}, "task": task, "subsets": subsets, "choices": choices}


def test_reference_ranks_choices_and_averages_within_a_model_first():
    subsets = {"1": {"3": -0.10, "4": -0.02, "5": -0.05}}
    a = _record("m1", "t1", subsets, [
        {"method": "nrs", "blocks": [4], "delta": -0.02},
        {"method": "nrs", "blocks": [4], "delta": -0.02},  # another budget, the same set: counted once
        {"method": "random", "seed": 0, "blocks": [3], "delta": -0.10},
        {"method": "random", "seed": 1, "blocks": [5], "delta": -0.05},
        {"method": "random", "seed": 2, "blocks": [5], "delta": -0.05},  # another draw of that set: counted
        {"method": "random", "seed": 2, "blocks": [5], "delta": -0.05},  # that draw again (a budget of one size)
        {"method": "nrs", "blocks": [4, 5], "delta": -0.2},  # no size-2 reference: not ranked
    ])  # fmt: skip
    b = _record(
        "m1", "t2", {"1": {"3": 0.0, "4": -0.01, "5": 0.01}}, [{"method": "nrs", "blocks": [3], "delta": 0.0}]
    )
    c = _record("m2", "t1", {"1": {"3": 0.0, "4": 0.1}}, [{"method": "nrs", "blocks": [3], "delta": 0.0}])
    result = exhaustive_reference([a, b, c, {"model": {"name": "m3"}, "task": "t", "choices": []}])
    assert result["cells"][0] == {"model": "m1", "task": "t1", "size": 1, "n_sets": 3, "oracle": -0.02,
                                  "oracle_blocks": "4", "median": -0.05, "worst": -0.10,
                                  "worst_blocks": "3"}  # fmt: skip
    assert len(result["cells"]) == 3
    nrs = next(r for r in result["summary"] if r["method"] == "nrs")
    # m1: t1 → 100 · (2 + 0.5) / 3, t2 → 50; m2: 25; the model is the unit
    m1 = np.mean([100 * 2.5 / 3, 50.0])
    assert nrs["per_model"] == pytest.approx({"m1": m1, "m2": 25.0})
    assert nrs["mean_percentile"] == pytest.approx((m1 + 25.0) / 2)
    assert (nrs["n_models"], nrs["n_cells"]) == (2, 3)
    random = next(r for r in result["summary"] if r["method"] == "random")
    assert random["per_model"] == pytest.approx(
        {"m1": np.mean([100 * 0.5 / 3, 100 * 1.5 / 3, 100 * 1.5 / 3])}
    )
    assert exhaustive_reference([]) == {"cells": [], "choices": [], "summary": []}


def test_bad_subset_sizes_are_refused():
    for sizes in ((0,), (1, -2), (True,)):
        with pytest.raises(ValueError, match="all_subsets"):
            PruneStudyOptions(all_subsets=sizes)
    assert PruneStudyOptions(all_subsets=(2, 1, 2)).all_subsets == (1, 2)


def test_the_study_scores_every_set_and_resumes(tmp_path, tiny_task, tiny_model_dir, monkeypatch):  # noqa: F811
    from mteb_lrd.pruning.pruned import pruned_copy as prune
    from mteb_lrd.report.studies import write_prune_report
    from mteb_lrd.studies import pruning
    from mteb_lrd.studies.pruning import run_prune_study
    from mteb_lrd.studies.pruning_analysis import analyse_pruning
    from mteb_lrd.studies.records import read_record, scratch_path
    from mteb_lrd.studies.runner import mteb_encoder, mteb_score

    model = _decoder(tiny_model_dir, "llama", 8)
    model.name = "tiny-llama-8"
    options = (
        CellOptions(caps=Caps(20, 20, 20)),
        PruneStudyOptions(budgets=(0.2,), speed_texts=8, all_subsets=(1, 2)),
    )
    # interrupted after three scored sets (the base and two variants), then resumed: the rerun scores
    # only the 4 sets left of the 1 + 3 + 3, and the cell's scratch folder goes with its record
    scored = []

    def counted(*args, **kwargs):
        if len(scored) == 3 and not resumed:
            raise KeyboardInterrupt
        scored.append(1)
        return mteb_score(*args, **kwargs)

    resumed = False
    monkeypatch.setattr(pruning, "mteb_score", counted)
    with pytest.raises(KeyboardInterrupt):
        run_prune_study([model], {"TinySTS": tiny_task}, tmp_path, *options)
    scratch = scratch_path(tmp_path, "tiny-llama-8", "TinySTS")
    assert len(read_record(scratch / "variants.json")["variants"]) == 3
    resumed = True
    run_prune_study([model], {"TinySTS": tiny_task}, tmp_path, *options)
    assert len(scored) == 1 + 3 + 3 and not scratch.exists()
    record = read_record(tmp_path / "records" / "tiny-llama-8" / "TinySTS.json")
    assert set(record["subsets"]) == {"1", "2"}
    assert set(record["subsets"]["2"]) == {
        ",".join(map(str, c)) for c in itertools.combinations(range(3, 6), 2)
    }
    # an independent score of one set: prune it by hand, score it with mteb
    by_hand = mteb_score(mteb_encoder(model, prune(model.model, [3, 5])), tiny_task())["main_score"]
    assert record["subsets"]["2"]["3,5"] == pytest.approx(by_hand - record["base_score"], abs=1e-12)
    for choice in record["choices"]:  # every choice is one of the sets, with the same Δ
        assert record["subsets"]["1"][",".join(map(str, choice["blocks"]))] == pytest.approx(choice["delta"])
    analysis = analyse_pruning([record], n_resamples=100)
    assert {r["size"] for r in analysis["exhaustive"]["cells"]} == {1, 2}
    report = write_prune_report(analysis, tmp_path / "report").read_text()
    assert "Against every candidate set of the same size" in report


def test_pooled_vs_random_averages_within_models_first():
    from mteb_lrd.studies.pruning_analysis import pooled_vs_random

    def rec(model, task, choices):
        return {"model": {"name": model}, "task": task,
                "choices": [{"method": m, "budget": b, "delta": d} for m, b, d in choices]}  # fmt: skip

    records = [
        rec("A", "t1", [("nrs", 0.2, -0.01), ("random", 0.2, -0.03), ("random", 0.2, -0.05)]),  # +0.03
        rec("A", "t2", [("nrs", 0.2, -0.02), ("random", 0.2, -0.03)]),  # +0.01
        rec("B", "t1", [("nrs", 0.2, -0.01), ("random", 0.2, -0.03), ("gfmi", 0.2, 0.0)]),  # +0.02
    ]
    result = pooled_vs_random(records, ["nrs", "gfmi", "frenet"])
    assert set(result) == {"nrs", "gfmi"}
    nrs = result["nrs"]
    assert nrs["difference"] == pytest.approx((0.02 + 0.02) / 2)  # A: mean(+0.03, +0.01); B: +0.02
    assert (nrs["n_models"], nrs["n_cells"]) == (2, 3)
    assert nrs["p"] == pytest.approx(2 / 4) and nrs["exact"]  # two models: all + or all − only


def test_each_pruned_copy_is_freed_before_the_next_is_made(tmp_path, tiny_task, monkeypatch):  # noqa: F811
    """A pruned SentenceTransformer sits in a reference cycle; the study frees each copy before it
    builds the next (kept, each all-mpnet-base-v2 variant holds 0.4 GB)."""
    import gc
    import weakref

    from mteb_lrd.studies import pruning
    from mteb_lrd.studies.runner import load_study_model
    from tests.tiny_models import build_tiny_sentence_transformer

    copies: list[weakref.ref] = []
    alive_at_next: list[int] = []
    original = pruning._pruned

    def tracked(model, blocks):
        alive_at_next.append(sum(ref() is not None for ref in copies))
        variant, scored = original(model, blocks)
        if blocks:
            copies.append(weakref.ref(scored))
        return variant, scored

    monkeypatch.setattr(pruning, "_pruned", tracked)
    model = load_study_model(str(build_tiny_sentence_transformer(tmp_path / "st8", num_layers=8)))
    gc.disable()  # only what the study frees itself counts
    try:
        pruning.run_prune_study([model], {"TinySTS": tiny_task}, tmp_path / "out", CellOptions(caps=Caps(20, 20, 20)),
                                PruneStudyOptions(budgets=(0.2,), speed_texts=8, all_subsets=(1,),
                                                  shared_prefix=False))  # fmt: skip
    finally:
        gc.enable()
    assert len(copies) == 3 and alive_at_next == [0] * len(alive_at_next)


@pytest.mark.parametrize("kind", ["sentence-transformer", "decoder"])
def test_shared_prefix_encoding_gives_the_scores_of_separate_copies(
    tmp_path,
    tiny_task,  # noqa: F811
    tiny_model_dir,
    kind,
):
    """A model's variants encoded together (a SentenceTransformer; a decoder in its template) score as
    pruned copies encoded one by one; the kept vectors go when the cell is done."""
    from mteb_lrd.studies.pruning import run_prune_study
    from mteb_lrd.studies.records import read_record
    from mteb_lrd.studies.runner import load_study_model
    from tests.tiny_models import build_tiny_sentence_transformer, load_tiny_tokenizer

    if kind == "decoder":
        path = tiny_model_dir("qwen2", num_layers=9)
        model = load_study_model(str(path), tokenizer=load_tiny_tokenizer(path), decoder_template="prompteol")
    else:
        model = load_study_model(
            str(build_tiny_sentence_transformer(tmp_path / "st9", num_layers=9, kind="mpnet"))
        )
    records = {}
    for shared in (True, False):
        out = tmp_path / f"shared-{shared}"
        run_prune_study([model], {"TinySTS": tiny_task}, out, CellOptions(caps=Caps(20, 20, 20)),
                        PruneStudyOptions(budgets=(0.2,), speed_texts=8, all_subsets=(1, 2),
                                          shared_prefix=shared))  # fmt: skip
        records[shared] = read_record(out / "records" / model.name / "TinySTS.json")
        assert not list((out / "records").rglob("*.vectors"))
    assert records[True]["settings"]["variant_encoding"] == "shared prefix"
    assert records[False]["settings"]["variant_encoding"] == "separate"
    assert records[True]["base_score"] == pytest.approx(records[False]["base_score"], abs=1e-6)
    for size in ("1", "2"):
        assert records[True]["subsets"][size].keys() == records[False]["subsets"][size].keys()
        for key, delta in records[False]["subsets"][size].items():
            assert records[True]["subsets"][size][key] == pytest.approx(delta, abs=1e-6), key
    assert len(records[True]["subsets"]["2"]) == len(candidate_block_sets(10, 2)) == math.comb(4, 2)
    assert len(set(records[True]["subsets"]["1"].values())) > 1  # the variants do score differently


def test_an_interrupted_prune_cell_keeps_its_profile_until_the_record_is_written(
    tmp_path,
    tiny_task,  # noqa: F811
    monkeypatch,
):
    from mteb_lrd.studies import pruning
    from mteb_lrd.studies.records import read_record, record_path, scratch_path
    from mteb_lrd.studies.runner import load_study_model
    from tests.tiny_models import build_tiny_sentence_transformer

    model = load_study_model(str(build_tiny_sentence_transformer(tmp_path / "st8", num_layers=8)))
    options = (CellOptions(caps=Caps(20, 20, 20)), PruneStudyOptions(budgets=(0.2,), speed_texts=8))
    scoring = pruning._score_variants

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(pruning, "_score_variants", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pruning.run_prune_study([model], {"TinySTS": tiny_task}, tmp_path / "out", *options)
    scratch = scratch_path(tmp_path / "out", "st8", "TinySTS")
    assert list((scratch / "profile").rglob("*.npz"))
    monkeypatch.setattr(pruning, "_score_variants", scoring)
    pruning.run_prune_study([model], {"TinySTS": tiny_task}, tmp_path / "out", *options)
    assert read_record(record_path(tmp_path / "out", "st8", "TinySTS")) is not None and not scratch.exists()
