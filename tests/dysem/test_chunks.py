"""A DySem study run in chunks of test pairs joins into what one run over every pair reports."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from dataclasses import replace

import pytest

from mteb_lrd.dysem.chunks import assemble, coverage
from mteb_lrd.dysem.evaluation import load_pairs, row_range
from mteb_lrd.dysem.study import run_study
from mteb_lrd.dysem.study_files import assemble_summaries, read_chunks
from mteb_lrd.dysem.study_options import StudyOptions

CHUNKS = [(0, 4), (4, 7), (7, 50)]  # the last one past the end: clipped to the 10 pairs


@pytest.fixture(scope="module")
def studies(tiny_model_dir, shared_sts, tmp_path_factory):
    """One run over 10 pairs of two tasks, and the same study in three chunks, each chunk with its
    own cache (as on three machines), the later ones reusing the first one's dev choices."""
    root = tmp_path_factory.mktemp("dysem-chunks")
    base = StudyOptions(model=str(tiny_model_dir("llama")), tasks=["STSBenchmark", "STS16"],
                        languages="en,de,fr", dev_pairs=4, max_pairs=10, select_on_dev=True, grid_k=(4, 8),
                        grid_languages=(1, 2), batch_size=4, device="cpu", sts_dir=str(shared_sts),
                        output_dir=str(root / "whole"))  # fmt: skip
    whole = run_study(base)
    out = root / "chunks"
    first = run_study(replace(base, rows=CHUNKS[0], output_dir=str(out), cache_dir=str(root / "c0")))
    rest = [
        run_study(
            replace(
                base,
                rows=rows,
                output_dir=str(out),
                cache_dir=str(root / f"c{i}"),
                choices_from=str(first.summary_path),
            )
        )  # fmt: skip
        for i, rows in enumerate(CHUNKS[1:], 1)
    ]
    return base, whole, [first, *rest], out


def test_row_slices_are_checked_and_clipped(shared_sts):
    path = shared_sts / "STSBenchmark-multi" / "en" / "test.jsonl"
    whole = load_pairs(path, 10)
    part = load_pairs(path, 10, rows=(7, 50))
    assert part.indices == whole.indices[7:] and part.scores == whole.scores[7:]
    assert row_range((7, 50), 10) == (7, 10)
    for rows, message in (
        ((3, 3), "0 <= START < STOP"),
        ((-1, 2), "0 <= START"),
        ((10, 12), "past the last"),
    ):
        with pytest.raises(ValueError, match=message):
            row_range(rows, 10)


def test_the_joined_chunks_report_what_one_run_reports(studies):
    _, whole, chunks, out = studies
    joined = assemble_summaries([out], out.parent / "joined")
    ours, theirs = joined.summary, whole.summary
    assert [c.summary["tasks"]["STSBenchmark"]["rows"] for c in chunks] == [[0, 4], [4, 7], [7, 10]]
    assert ours["tasks"] == theirs["tasks"] and list(ours["table"]) == list(theirs["table"])
    for method, per_task in theirs["table"].items():
        for task, cell in per_task.items():
            assert ours["table"][method][task]["spearman"] == pytest.approx(cell["spearman"], abs=1e-3)
            assert ours["table"][method][task]["mean_dimensions"] == pytest.approx(cell["mean_dimensions"])
    assert ours["paired"]["tasks"].keys() == theirs["paired"]["tasks"].keys()
    for task, rows in theirs["paired"]["tasks"].items():
        for other, result in rows.items():
            assert ours["paired"]["tasks"][task][other]["delta"] == pytest.approx(result["delta"], abs=1e-5)
            assert ours["paired"]["tasks"][task][other]["n"] == result["n"] == 10
    assert (ours["language_order"], ours["settings"], ours["grid"]) == (
        theirs["language_order"], theirs["settings"], theirs["grid"]
    )  # fmt: skip
    assert "predictions" not in ours and ours["chunks"][2] == {
        "STSBenchmark": [7, 10],
        "STS16": [7, 10],
    }
    assert joined.table_path.read_text().startswith("| model | STSBenchmark | STS16 |")


def test_the_joined_chunks_never_replace_another_runs_summary(studies, tmp_path):
    """The joined summary records what every chunk was asked alike; it may replace the summary of
    the same study run at once, not one made with other settings."""
    base, whole, chunks, out = studies
    joined = assemble_summaries([out], tmp_path / "same")
    assert (
        joined.summary["run"]["tasks"] == ["STSBenchmark", "STS16"] and "grid_k" not in joined.summary["run"]
    )
    assert chunks[0].summary["run"]["grid_k"] == [4, 8]  # only the first chunk made the dev choices
    (tmp_path / "same" / joined.summary_path.name).write_text(json.dumps(whole.summary))
    assemble_summaries([out], tmp_path / "same")  # the whole run's settings: replaced
    other = dict(whole.summary, run=dict(whole.summary["run"], prompt="LP"))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / joined.summary_path.name).write_text(json.dumps(other))
    with pytest.raises(ValueError, match="other settings \\(prompt 'LP' -> 'EP'\\)"):
        assemble_summaries([out], tmp_path / "other")


def test_a_chunk_judges_coverage_on_every_task_and_refuses_rows_past_every_set(
    tiny_model_dir, shared_sts, tmp_path
):
    """STS16's texts are not in the parallel data, so a run of both tasks adds the source-only DySem;
    a chunk past STS16's end holds only STS Benchmark pairs and still runs it (the chunks then join)."""
    from mteb_lrd.dysem.evaluation import load_test_set

    sizes = {t: len(load_test_set(t, shared_sts).scores) for t in ("STSBenchmark", "STS16")}
    assert sizes["STS16"] < sizes["STSBenchmark"]
    options = StudyOptions(model=str(tiny_model_dir("llama")), tasks=["STSBenchmark", "STS16"],
                           languages="en,de", dev_pairs=3, max_pairs=None, k=8, num_languages=1,
                           batch_size=8, device="cpu", sts_dir=str(shared_sts), baselines=False,
                           rows=(sizes["STS16"], sizes["STS16"] + 3), output_dir=str(tmp_path / "out"))  # fmt: skip
    chunk = run_study(options)
    assert list(chunk.summary["tasks"]) == ["STSBenchmark"]
    assert any(m.startswith("DySem source only") for m in chunk.summary["table"])
    past = sizes["STSBenchmark"]
    with pytest.raises(ValueError, match=f"--rows {past}:{past + 5} holds no test pair: the test sets have "
                                         f"STSBenchmark {past}, STS16 {sizes['STS16']} pairs"):  # fmt: skip
        run_study(replace(options, rows=(past, past + 5), model=str(tmp_path / "no-model")))  # before loading


def test_later_chunks_reuse_the_first_ones_dev_choices(studies, caplog):
    base, _, chunks, out = studies
    first, second = chunks[0], chunks[1]
    assert first.summary["forward_texts"] > second.summary["forward_texts"]  # no dev stage again
    for key in ("language_order", "settings", "source_k", "grid", "dev"):
        assert second.summary[key] == first.summary[key]
    with pytest.raises(
        ValueError, match="made with other baselines, dev_pairs, k, max_pairs than this run's"
    ):
        run_study(replace(base, rows=(0, 2), output_dir=str(out / "x"), dev_pairs=5, k=16, max_pairs=12,
                          baselines=False, choices_from=str(first.summary_path)))  # fmt: skip
    with pytest.raises(ValueError, match="records no dev inputs"):
        legacy = {k: v for k, v in first.summary.items() if k != "dev"}
        (out / "legacy.json").write_text(json.dumps(legacy))
        run_study(
            replace(base, rows=(0, 2), output_dir=str(out / "x"), choices_from=str(out / "legacy.json"))
        )


def test_chunks_that_miss_overlap_or_disagree_are_refused(studies):
    _, whole, chunks, out = studies
    summaries = read_chunks([out])
    assert coverage(summaries[:2]) == {"STSBenchmark": (7, 10), "STS16": (7, 10)}
    with pytest.raises(ValueError, match="STSBenchmark: rows 7-10 are missing"):
        assemble(summaries[:2])
    with pytest.raises(ValueError, match="STSBenchmark: rows 4-7 are missing"):
        assemble([summaries[0], summaries[2]])
    with pytest.raises(ValueError, match="rows 3-4 overlap"):
        shifted = copy.deepcopy(summaries[1])
        for described in shifted["tasks"].values():
            described["rows"] = [3, 7]
        assemble([summaries[0], shifted, summaries[2]])
    fewer = copy.deepcopy(summaries[1])
    del fewer["predictions"]["STSBenchmark"]["models"]["PromptEOL"]
    with pytest.raises(ValueError, match="STSBenchmark: the chunks ran different methods"):
        assemble([summaries[0], fewer, summaries[2]])
    other = copy.deepcopy(summaries[1])
    other["settings"]["k"] += 1
    with pytest.raises(ValueError, match="chunk 1 was made with other settings"):
        assemble([summaries[0], other, summaries[2]])
    with pytest.raises(ValueError, match="not a chunk"):
        assemble([whole.summary])
    with pytest.raises(ValueError, match="no chunk summaries"):
        read_chunks([out / "results"])


def test_the_command_joins_chunks_and_checks_its_options(studies, tmp_path, capsys):
    from mteb_lrd.cli import main

    _, _, _, out = studies
    assert main(["dysem", "--assemble", str(out), "--output-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("| model |")
    assert len(list(tmp_path.glob("dysem-*.json"))) == 1
    files = sorted(out.glob("dysem-*-rows*.json"))
    assert (
        main(["dysem", "--assemble", str(files[0]), str(files[2]), "--output-dir", str(tmp_path / "x")]) == 2
    )
    assert f"rows 4-7 are missing (chunk 0: {files[0]}; chunk 1: {files[2]})" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["dysem", "--model", "m", "--rows", "5:5"])
    assert "0 <= START < STOP" in capsys.readouterr().err
    assert main(["dysem"]) == 2
    assert "--model is required" in capsys.readouterr().err


def test_the_results_document_joins_a_complete_chunk_folder_and_names_an_incomplete_one(studies, tmp_path):
    import shutil

    from mteb_lrd.report.results_document import render_results

    _, _, _, out = studies
    files = sorted(out.glob("dysem-*-rows*.json"))
    (tmp_path / "no-records").mkdir()
    for name, picked in (("dysem-done", files), ("dysem-half", files[:2])):
        (tmp_path / name).mkdir()
        for path in picked:
            shutil.copy(path, tmp_path / name)
    assert "DySem (`mteb-lrd dysem`): no complete records yet" in render_results(tmp_path / "no-records")
    shutil.copytree(tmp_path / "dysem-half", tmp_path / "only-half" / "dysem-half")
    half_only = render_results(tmp_path / "only-half")  # one line says how far it is, not two
    assert "`dysem-half`): running in chunks" in half_only and "no complete records yet" not in half_only
    (tmp_path / "dysem-empty").mkdir()
    text = render_results(tmp_path)
    assert "- DySem (`dysem-empty`): its chunks do not join (no chunk summaries in" in text
    assert "## DySem (`dysem-done`)" in text and "DySem beats PromptEOL" in text
    assert "## DySem (`dysem-half`)" not in text
    assert (
        "- DySem (`dysem-half`): running in chunks, so far STSBenchmark 7 of 10 test pairs, STS16 7 of 10"
        in text
    )
    shutil.copy(files[0], tmp_path / "dysem-done.json")  # a summary beside the folder of the same name
    with pytest.raises(ValueError, match="dysem-done.json and the chunk folder dysem-done/ are two records"):
        render_results(tmp_path)


def test_joining_chunks_and_reporting_them_load_no_model_library():
    """The joiner is pure and the results document reads chunk folders: neither needs torch or mteb
    (a report is regenerated where no model library is installed)."""
    probe = ("import sys, mteb_lrd.dysem.chunks, mteb_lrd.report.results_document; "
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'mteb', 'transformers'}))")  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True
    )
    assert out.stdout.strip() == "[]"
