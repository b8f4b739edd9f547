"""The dev-split grid (one set of representations, many settings) and the comparison helpers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from mteb_lrd.dysem import best_point, consensus_mask, dynamic_similarity, grid_search
from mteb_lrd.dysem.evaluation import (
    format_table,
    load_pairs,
    load_test_set,
    sts_task,
    task_language,
    write_json_atomic,
)
from mteb_lrd.dysem.grid import GridPoint


def test_grid_points_equal_direct_computation():
    rng = np.random.default_rng(0)
    n_lang, p, d = 3, 40, 16
    stack_1, stack_2 = rng.normal(size=(n_lang, p, d)), rng.normal(size=(n_lang, p, d))
    src_1, src_2 = stack_1[0], stack_2[0]
    gold = rng.random(p)
    points = grid_search(
        src_1, stack_1, src_2, stack_2, gold, ks=[2, 5], num_languages=[1, 3], values=["source", "mean"]
    )
    assert len(points) == 8
    point = next(x for x in points if (x.k, x.num_languages, x.value) == (5, 3, "mean"))
    sims, sizes = dynamic_similarity(
        stack_1.mean(0), stack_2.mean(0), consensus_mask(stack_1), consensus_mask(stack_2), 5
    )
    assert point.spearman == pytest.approx(100 * spearmanr(sims, gold)[0])
    assert point.mean_dimensions == pytest.approx(sizes.mean())
    with pytest.raises(ValueError, match="outside"):
        grid_search(src_1, stack_1, src_2, stack_2, gold, ks=[2], num_languages=[4])


def test_best_point_skips_nan_and_prefers_the_first_of_equals():
    points = [
        GridPoint(1, 1, "source", float("nan"), 1),
        GridPoint(2, 1, "mean", 50.0, 2),
        GridPoint(3, 1, "mean", 50.0, 3),
    ]
    assert best_point(points).k == 2
    with pytest.raises(ValueError, match="finite"):
        best_point(points[:1])


def test_load_pairs_subsamples_with_seed_42(tmp_path):
    path = tmp_path / "test.jsonl"
    path.write_text(
        "".join(f'{{"sentence1": "a{i}", "sentence2": "b{i}", "score": {i}}}\n' for i in range(50))
    )
    pairs = load_pairs(path, 10)
    expected = sorted(np.random.RandomState(42).choice(50, 10, replace=False).tolist())
    assert pairs.indices == expected and pairs.sentence1 == [f"a{i}" for i in expected]
    assert len(load_pairs(path).scores) == 50


def test_sts_task_names_samples_chunks_and_languages(shared_sts, tmp_path):
    sample = load_test_set("STSBenchmark-de", shared_sts, max_pairs=12)
    task_cls, n = sts_task("STSBenchmark-de", sample)
    task = task_cls()
    assert n == 12 and task.metadata.name == "DySemSTSBenchmark-de-sample12"
    assert task.metadata.eval_langs == ["deu-Latn"] and task_language("STSBenchmark-de") == "de"
    chunk_cls, n = sts_task("STSBenchmark-de", sample, rows=(10, 20))  # the stop clipped to the sample
    assert n == 2 and chunk_cls().metadata.name == "DySemSTSBenchmark-de-sample12-rows10-12"
    whole = load_test_set("STSBenchmark-de", shared_sts)
    assert (
        not whole.sampled and sts_task("STSBenchmark-de", whole)[0]().metadata.name == "DySemSTSBenchmark-de"
    )
    with pytest.raises(ValueError, match="unknown STS task"):
        load_test_set("STS99", shared_sts)
    with pytest.raises(FileNotFoundError, match="STS data for STS12 not found"):
        load_test_set("STS12", tmp_path)


def test_format_table_and_json(tmp_path):
    table = {
        "DySem": {
            "A": {"spearman": 80.0, "mean_dimensions": 100.0},
            "B": {"spearman": 70.0, "mean_dimensions": 300.0},
        },
        "dense": {"A": {"spearman": 75.0, "mean_dimensions": 896.0}},
    }
    text = format_table(table, ["A", "B"])
    assert "| DySem | 80.00 | 70.00 | 80.00 | 100 |" in text  # averaged over A, the task both rows have
    assert "| dense | 75.00 | – | 75.00 | 896 |" in text
    assert "not run" in text and "avg, #Dim: over the tasks every row has (A)" in text
    alone = format_table({"x": table["DySem"]}, ["A", "B"])
    assert "| x | 80.00 | 70.00 | 75.00 | 200 |" in alone and "not run" not in alone and "avg," not in alone
    table = {
        "DySem": {"A": table["DySem"]["A"]},
        "dense": {"B": {"spearman": 60.0, "mean_dimensions": 896.0}},
    }
    disjoint = format_table(table, ["A", "B"])
    assert "| dense | – | 60.00 | – | – |" in disjoint and "(none: no task has every row)" in disjoint
    write_json_atomic(tmp_path / "x.json", {"v": float("nan")})
    assert (tmp_path / "x.json").read_text().replace(" ", "").replace("\n", "") == '{"v":null}'
