"""The DySem study end to end on a tiny random causal LM: sizes per device, and a line before each
long stage saying what it encodes."""

from __future__ import annotations

import json
import logging
from dataclasses import replace

import pytest

from mteb_lrd.dysem.study import run_study
from mteb_lrd.dysem.study_options import CPU_SIZES, DEFAULT_TASKS, StudyOptions, resolve_sizes


def test_auto_sizes_are_small_on_a_cpu_and_full_on_a_gpu():
    cpu = resolve_sizes(StudyOptions(model="m"), on_gpu=False)
    assert (tuple(cpu.tasks), cpu.dev_pairs, cpu.max_pairs) == (("STSBenchmark",), 50, 200)
    gpu = resolve_sizes(StudyOptions(model="m"), on_gpu=True)
    assert (tuple(gpu.tasks), gpu.dev_pairs, gpu.max_pairs) == (DEFAULT_TASKS, 200, None)
    given = resolve_sizes(StudyOptions(model="m", tasks=["STS12"], dev_pairs=7, max_pairs=None), on_gpu=False)
    assert (list(given.tasks), given.dev_pairs, given.max_pairs) == (["STS12"], 7, None)  # kept as asked
    assert resolve_sizes(StudyOptions(model="m", device="cuda:1"), on_gpu=None).max_pairs is None
    assert (
        resolve_sizes(StudyOptions(model="m", device="cpu"), on_gpu=None).max_pairs == CPU_SIZES["max_pairs"]
    )


def test_a_small_study_says_what_it_does_before_each_stage(tiny_model_dir, shared_sts, tmp_path, caplog):
    options = StudyOptions(model=str(tiny_model_dir("llama")), tasks=["STSBenchmark"], languages="en,de,fr",
                           dev_pairs=5, max_pairs=6, k=8, num_languages=2, batch_size=8, device="cpu",
                           sts_dir=str(shared_sts), output_dir=str(tmp_path / "out"))  # fmt: skip
    with caplog.at_level(logging.INFO, logger="mteb_lrd.dysem.study"):
        result = run_study(options)
    lines = [r.getMessage() for r in caplog.records if r.name == "mteb_lrd.dysem.study"]
    dev = [json.loads(line) for line in (shared_sts / "STSBenchmark-multi/en/dev.jsonl").open()][:5]
    texts = len({row[key] for row in dev for key in ("sentence1", "sentence2")})
    assert lines[0] == (f"language order (agreement): {texts} dev texts in 3 languages and the source, "
                        f"about {texts * 4:,} forward passes")  # fmt: skip
    assert lines[1].startswith("language order (agreement): ")  # the order found
    (plan,) = [line for line in lines if line.startswith("test sets:")]
    assert plan.startswith("test sets: 6 pairs of 1 task(s), up to 36 forward passes, about ")
    assert "texts/s seen so far" in plan
    assert result.table_path.is_file() and result.summary["tasks"]["STSBenchmark"]["pairs"] == 6
    assert result.summary["dtype"] == "float32"  # the default, recorded


def test_the_compute_dtype_is_used_recorded_and_part_of_the_cache(tiny_model_dir, shared_sts, tmp_path):
    options = StudyOptions(model=str(tiny_model_dir("llama")), tasks=["STSBenchmark"], languages="en,de",
                           dev_pairs=3, max_pairs=4, k=8, num_languages=1, batch_size=8, device="cpu",
                           sts_dir=str(shared_sts), output_dir=str(tmp_path / "out"), baselines=False)  # fmt: skip
    fp32 = run_study(options)
    bf16 = run_study(replace(options, dtype="bfloat16", output_dir=str(tmp_path / "bf16")))
    assert bf16.summary["dtype"] == "bfloat16" and fp32.summary["dtype"] == "float32"
    assert (
        bf16.summary["forward_texts"] == fp32.summary["forward_texts"] > 0
    )  # not served from float32's cache
    with pytest.raises(ValueError, match="dtype must be"):
        run_study(replace(options, dtype="float8"))


@pytest.mark.parametrize(("field", "value"), [("max_pairs", 0), ("dev_pairs", 0)])
def test_non_positive_sizes_are_refused_before_loading(field, value, tmp_path):
    with pytest.raises(ValueError, match="must be positive"):
        run_study(StudyOptions(model=str(tmp_path / "no-model"), **{field: value}))


def test_a_task_in_another_language_leads_the_agreement_order_with_its_own():
    from mteb_lrd.dysem.study import task_order

    found = ["en", "fr", "de", "es"]  # as the English dev texts ranked them
    assert task_order(found, "de", "agreement") == ["de", "en", "fr", "es"]
    assert task_order(found, "en", "agreement") == found
    assert task_order(found, "ja", "agreement") == found  # not a candidate: nothing to move
    assert task_order(found, "de", "consensus") == found and task_order(found, "de", "given") == found


def test_the_german_task_is_scored_with_german_in_its_consensus(tiny_model_dir, shared_sts, tmp_path):
    options = StudyOptions(model=str(tiny_model_dir("llama")), tasks=["STSBenchmark-de"], languages="en,fr,de",
                           dev_pairs=3, max_pairs=4, k=8, num_languages=2, batch_size=8, device="cpu",
                           sts_dir=str(shared_sts), output_dir=str(tmp_path / "out"), baselines=False)  # fmt: skip
    result = run_study(options)
    assert result.summary["language_order"][0] == "en"  # found on the English dev texts
    names = {p.parent.name for p in (tmp_path / "out").rglob("*.json") if "experiments" in p.parts}
    others = [code for code in result.summary["language_order"] if code != "de"]
    assert any(f"__languages_de-{others[0]}__" in name for name in names), (
        names
    )  # L = 2: German, then the best other


def test_the_dev_grid_tries_the_k_below_the_hidden_size(tiny_model_dir, shared_sts, tmp_path):
    from transformers import AutoConfig

    model = tiny_model_dir("llama")
    hidden = AutoConfig.from_pretrained(model).hidden_size
    options = StudyOptions(model=str(model), tasks=["STSBenchmark"], languages="en,de", dev_pairs=3, max_pairs=4,
                           batch_size=8, device="cpu", sts_dir=str(shared_sts), output_dir=str(tmp_path / "out"),
                           baselines=False, select_on_dev=True, grid_k=(4, 8, hidden, 2 * hidden),
                           grid_languages=(1, 2))  # fmt: skip
    assert {p["k"] for p in run_study(options).summary["grid"]} == {4, 8}  # k >= d: every consensus dimension
    wide = run_study(replace(options, grid_k=(2 * hidden, hidden), output_dir=str(tmp_path / "wide")))
    assert {p["k"] for p in wide.summary["grid"]} == {hidden}  # none below d: the smallest alone


def test_a_run_never_replaces_another_runs_summary(tiny_model_dir, shared_sts, tmp_path):
    """Same model, rows and folder with other settings: refused before the model loads (the earlier
    run's summary stays); the same run again replaces its own summary."""
    options = StudyOptions(model=str(tiny_model_dir("llama")), tasks=["STSBenchmark"], languages="en,de",
                           dev_pairs=3, max_pairs=4, k=8, num_languages=1, batch_size=8, device="cpu",
                           sts_dir=str(shared_sts), output_dir=str(tmp_path / "out"), baselines=False)  # fmt: skip
    first = run_study(options)
    before = first.summary_path.read_bytes()
    for changed, named in (({"component": "mlp"}, "component 'attention' -> 'mlp'"),
                           ({"dtype": "bfloat16"}, "dtype 'float32' -> 'bfloat16'"),
                           ({"max_pairs": 3}, "max_pairs 4 -> 3"),
                           ({"k": 16}, "k 8 -> 16"),
                           ({"tasks": ["STS16"]}, "tasks \\['STSBenchmark'\\] -> \\['STS16'\\]")):  # fmt: skip
        with pytest.raises(ValueError, match=f"other settings \\({named}\\).*another --output-dir"):
            run_study(replace(options, **changed))
        assert first.summary_path.read_bytes() == before
    assert run_study(options).summary["table"] == first.summary["table"]
    assert (
        run_study(replace(options, rows=(0, 2))).summary_path != first.summary_path
    )  # a chunk: its own file
