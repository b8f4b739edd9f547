"""The overhead benchmark's own parts: the stages it times exist under the names it patches, and the
retrieval corpus it pads with distractors holds what it says (the benchmark itself is not run here)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_mteb_overhead.py"


@pytest.fixture(scope="module")
def bench():
    saved = dict(os.environ)
    try:
        spec = importlib.util.spec_from_file_location("bench_mteb_overhead", BENCH)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:  # the module sets its own cache folder and offline flags at import
        os.environ.clear()
        os.environ.update(saved)
    return module


def test_every_timed_stage_names_an_existing_method(bench):
    missing = [f"{getattr(owner, '__name__', owner)}.{name}" for owner, name, *_ in bench.STAGE_TIMERS
               if not callable(getattr(owner, name, None))]  # fmt: skip
    assert not missing, f"the overhead benchmark would time methods that no longer exist: {missing}"


def test_distractors_are_new_distinct_sentences_of_the_other_sets(bench, shared_sts):
    pairs = bench.sts_pairs(None)
    known = {t for p in pairs for t in (p["sentence1"], p["sentence2"])}
    extra = bench.distractors(known, 500)
    assert len(extra) == len(set(extra)) == 500
    assert not known & set(extra)
    tasks = bench.build_tasks(pairs[:50], corpus_docs=600)
    corpus = tasks["retrieval"].dataset["default"]["test"]["corpus"]
    assert len(corpus) == 600
    assert len(tasks["sts"].dataset["default"]["test"]) == 50


def test_more_distractors_than_the_sets_hold_is_an_error(bench, shared_sts):
    with pytest.raises(SystemExit, match="--corpus-docs"):
        bench.distractors(set(), 10**7)


def test_repeated_texts_are_counted_and_excuse_only_a_last_digit_gap(bench):
    pairs = [
        {"sentence1": "a", "sentence2": "b", "score": 4.5},
        {"sentence1": "a", "sentence2": "c", "score": 1.0},
    ]
    tasks = bench.build_tasks(pairs)
    assert bench.repeated_texts(tasks["sts"]) == 1  # "a" twice
    assert bench.repeated_texts(tasks["retrieval"]) == 0  # corpus b, c; query a

    class Variant:
        class options:
            wanted_keys = ("per_layer",)

    wrapped = {"main_score": 0.5, "per_layer": {"scores": [0.1, 0.5000001]}}
    plain = {"main_score": 0.5}
    found = bench.check_scores("v", plain, wrapped, Variant)
    assert found.problems[0].startswith("v: per-layer score of h_L") and not found.notes
    found = bench.check_scores("v", plain, wrapped, Variant, repeated=1)
    assert not found.problems and found.notes[0].startswith("v: per-layer score of h_L")
    far = {**wrapped, "per_layer": {"scores": [0.1, 0.6]}}
    found = bench.check_scores("v", plain, far, Variant, repeated=1)
    assert found.problems[0].startswith("v: per-layer") and not found.notes
    # up to the share of repeated texts (83 of 10,338: ties among copied documents in a search)
    tied = {**wrapped, "per_layer": {"scores": [0.1, 0.50013]}}
    assert bench.check_scores("v", plain, tied, Variant, repeated=83, texts=10338).notes
    assert bench.check_scores("v", plain, tied, Variant, repeated=1, texts=10338).problems
