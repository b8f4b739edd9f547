"""docs/results.md is exactly what the committed tidy records give; verdicts follow the stated rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mteb_lrd.report.results_document import render_results
from mteb_lrd.studies.tidy import tidy_rows, write_rows

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def committed() -> str:
    """The document the committed records give (rendered once: it takes half a minute)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        return render_results("docs/records")


def test_the_committed_results_document_is_what_the_records_give(committed):
    assert (ROOT / "docs" / "results.md").read_text(encoding="utf-8") == committed, (
        "docs/results.md differs from its records: run `mteb-lrd report --records docs/records --out docs/`"
    )


def test_the_committed_rows_say_what_the_records_can_show(committed):
    """The paper's reading of each claim, the unit of each test, what one model can decide, the size
    controls, and where our data point the other way, on the committed records."""
    rows = [line for line in committed.splitlines() if line.startswith("| ")]
    assert (
        "| at 0 of 1 budgets; median Δ at 5 % GFMI +0.0029, the closest other rule composite +0.0011 |"
        in (
            rows[3]  # EmbeddingGemma: GFMI's median is the highest, not the closest to zero
        )
    )
    gfmi = next(
        row for row in rows if row.startswith("| GFMI beats Random by mean at 15 % and 20 % (2 blocks")
    )
    assert "-0.0120 (below Random); percentile 32 among the sets of 2 blocks vs Random's 54: our data point the " \
           "other way | 1 model (7 tasks; 1,870–6,384 texts each, " \
           "LRD on ≤ 1,000 / 1,000 / 5,000) |" in gfmi  # fmt: skip
    pruning = [row for row in rows if row.endswith(("| prune-all-mpnet |", "| prune-all-embeddinggemma |"))]
    assert len(pruning) == 7 and not any("**undecided**" in row for row in pruning)
    assert "**not testable with n = 1 model**" in gfmi
    assert "d0L correlates positively with STS performance (the paper: MTEB performance) |" in committed
    assert "partial ρ given log dim -0.25, given log params +0.61 |" in committed
    assert "ρ per task with hidden size +0.93 to +0.95" in committed
    assert "Here hidden size alone predicts the score at least as well as every claim score (median ρ +0.866; " \
           "the best claim score, frenet_d0L, +0.700)." in committed  # fmt: skip
    assert (
        "| mean over tasks of ρ(d0L) − ρ(rival), the smallest: -0.64 (nrs_jaccard_first_last) |" in committed
    )
    eol = next(row for row in rows if row.startswith("| DySem beats PromptEOL"))
    assert "excludes the paper's smallest gain (+0.044) | 1 model (1,379 test pairs) |" in eol
    assert "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF dequantised to float32" in eol
    assert "| ≤ 5e-4 / ≤ 0.002 | **replicated** |" in committed and "5.0e-04" not in committed
    assert "without qwen2.5-coder-1.5b: no authors'-definitions run;" in committed
    assert "gfmi_mean_auc under the authors' definitions has median ρ -0.69, the opposite of the paper's " \
           "positive sign, with raw p 0.031 below 0.05 but Holm-adjusted p 0.093: not significant after Holm" \
           in committed  # fmt: skip
    assert "raw language model" not in committed and "MTEB performance |" not in committed


def test_the_training_example_table_is_its_record():
    """docs/training.md's table shows the committed evaluator CSV of that run, at its printed precision."""
    import pandas as pd

    record = pd.read_csv(ROOT / "docs" / "records" / "training-minilm-sick.csv").set_index("steps")
    columns = ["frenet_d0L", "nrs_mean_jaccard", "nrs_jaccard_first_last", "gfmi_mean_auc",
               "spearman_cosine", "spearman_cosine_h0", "spearman_cosine_h3"]  # fmt: skip
    text = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    rows = [
        line.strip("|").split("|")
        for line in text.splitlines()
        if line.startswith("| ") and line[2].isdigit()
    ]
    assert [int(row[0]) for row in rows] == list(record.index)
    for row in rows:
        for cell, column in zip(row[1:], columns, strict=True):
            decimals = len(cell.strip().partition(".")[2])
            assert float(cell) == round(float(record.loc[int(row[0]), column]), decimals), (row[0], column)


def _selection(n_models: int, sign: float, noise: float = 0.0) -> list[dict]:
    rng = np.random.default_rng(0)
    records = []
    for task in ("T1", "T2", "T3"):
        main = rng.uniform(0.3, 0.9, size=n_models)
        for i in range(n_models):
            d0l = sign * main[i] + noise * rng.normal()
            records.append({
                "model": {"name": f"m{i}", "family": f"F{i % 3}", "params": 10 * (i + 1), "dim": 8, "layers": 4,
                          "kind": "sentence-transformer", "template": None},
                "task": task, "main_score": float(main[i]), "n_texts": 100, "reproduce": "ours",
                "scores": {"frenet_d0L": float(d0l), "nrs_mean_jaccard": float(rng.uniform()),
                           "gfmi_mean_auc": float(-sign * main[i])},
            })  # fmt: skip
    return records


@pytest.mark.parametrize(
    ("sign", "d0l", "gfmi"), [(1.0, "replicated", "contradicted"), (-1.0, "contradicted", "replicated")]
)
def test_verdicts_follow_the_rule(tmp_path, sign, d0l, gfmi):
    write_rows(tmp_path / "select.csv", tidy_rows(_selection(9, sign), "select"))
    text = render_results(tmp_path)
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    claim = "{} correlates positively with task performance (the paper: MTEB performance)"
    assert f"**{d0l}**" in rows[claim.format("Frenet: d0L")]
    assert f"**{gfmi}**" in rows[claim.format("GFMI: mean GFMI AUC")]
    assert "**undecided**" in rows[claim.format("NRS: mean neighbour retention")]
    assert "| 9 models (3 tasks; 100 texts each) |" in rows[claim.format("Frenet: d0L")]
    assert (
        "|ρ| of at least 0.70 with 9 models, 1.00 with 5 models;" in text
    )  # one task, exact, 9! and 5! orders
    # Holm's bar for the best of three: 2/120 at 5 models equals 0.05/3, so not even |rho| = 1 reaches it
    assert (
        "p < 0.05/3, i.e. |ρ| of at least 0.80 with 9, none with 5 (none: not even |ρ| = 1 reaches it)."
        in text
    )
    assert "reaches p < 0.05 from 6 models, and Holm's 0.05/3" in text and "tested claims from 7:" in text


def test_selection_rows_name_the_sts_scope_and_the_size_controls(tmp_path):
    """On shared STS sets the rows say STS performance (quoting the paper's MTEB); each claim shows its
    partial ρ given log dim and log params, and the section says what survives and names the decoders'
    checkpoints from the panel."""
    names = {"T1": "LocalSTS12", "T2": "LocalSTS13", "T3": "LocalSICK-R"}
    decoders = {"m7": "gemma-3-270m", "m8": "smollm2-135m"}
    records = []
    for r in _selection(9, 1.0):
        name = r["model"]["name"]
        model = {**r["model"], "dim": 8 * (int(name[1:]) % 3 + 1), "name": decoders.get(name, name)}
        if name in decoders:
            model.update(kind="decoder", template="{text}")
        records.append({**r, "task": names[r["task"]], "model": model})
    write_rows(tmp_path / "select.csv", tidy_rows(records, "select"))
    text = render_results(tmp_path)
    row = next(line for line in text.splitlines() if line.startswith("| Frenet: d0L"))
    assert row.startswith(
        "| Frenet: d0L correlates positively with STS performance (the paper: MTEB performance) | positive (no "
        "value published) | median ρ +1.00 [+1.00, +1.00]; partial ρ given log dim +1.00, given log params +1.00 |"
    )
    assert "- frenet_d0L (median ρ +1.00, replicated; its positive sign survives log dim and log params): ρ per " \
           "task with hidden size" in text  # fmt: skip
    assert "- gfmi_mean_auc (median ρ -1.00, contradicted before the controls: nothing to survive)" in text
    assert "| hidden size (reference) | -0.580 |" in text and "| parameters (reference) |" in text
    assert "Within the trained embedders only (no decoder in the ranking):" in text
    assert "**h_0 of the decoders.** gemma-3-270m (Gemma-3-270M base, Q4_K_M GGUF dequantised to float32) and " \
           "smollm2-135m (SmolLM2-135M-Instruct, Q4_1 GGUF dequantised to float32) are pooled" in text  # fmt: skip


@pytest.mark.parametrize(
    ("tasks", "scope"),
    [
        ({"T1": "EmpythyTweetSentiment", "T2": "DrugReviewSentiment"}, "classification"),
        ({"T1": "LocalSTS12", "T2": "DrugReviewSentiment", "T3": "LocalSTS13"}, "task"),
    ],
)
def test_selection_rows_name_the_scope_of_their_tasks(tmp_path, tasks, scope):
    """The two study classification tasks: classification performance; STS and classification: task."""
    records = [{**r, "task": tasks[r["task"]]} for r in _selection(9, 1.0) if r["task"] in tasks]
    write_rows(tmp_path / "select.csv", tidy_rows(records, "select"))
    row = next(line for line in render_results(tmp_path).splitlines() if line.startswith("| Frenet: d0L"))
    assert row.startswith(
        f"| Frenet: d0L correlates positively with {scope} performance (the paper: MTEB performance)"
    )


def test_the_decoders_checkpoints_are_the_panel_tables():
    """The document's short checkpoint descriptions name the panel's checkpoint and quantisation."""
    from mteb_lrd.models.panel import PANEL
    from mteb_lrd.report.results_claims import CHECKPOINTS

    assert set(CHECKPOINTS) == {name for name, model in PANEL.items() if model.kind == "decoder"}
    for name, words in CHECKPOINTS.items():
        checkpoint, _, rest = words.partition(", ")
        source = PANEL[name].source
        assert source.startswith(checkpoint + ", ") and "dequantised to float32" in source
        assert all(token in source for token in rest.split() if "_" in token or token == "GGUF")


def test_too_few_models_decide_nothing_and_other_csvs_are_left_out(tmp_path):
    write_rows(tmp_path / "select.csv", tidy_rows(_selection(3, 1.0), "select"))
    (tmp_path / "training.csv").write_text("epoch,steps,frenet_d0L\n0,1,2.0\n")
    text = render_results(tmp_path)
    assert "No claim is testable" in text and "## Label-free model selection (`select`)" in text
    with pytest.raises(NotADirectoryError, match="no records folder"):
        render_results(tmp_path / "missing")


def test_the_cli_exports_a_study_folder_and_renders_it(tmp_path, capsys):
    from mteb_lrd.cli import main
    from mteb_lrd.studies.records import record_path, write_record

    study = tmp_path / "my-study"
    for record in _selection(5, 1.0, noise=0.1):
        write_record(record_path(study, record["model"]["name"], record["task"]), record)
    assert main(["report", "--export-records", str(study), "--out", str(tmp_path / "records")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "records" / "my-study.csv")
    assert main(["report", "--records", str(tmp_path / "records"), "--out", str(tmp_path / "docs")]) == 0
    assert "(`my-study`)" in (tmp_path / "docs" / "results.md").read_text()
    assert main(["report", "--records", str(tmp_path), "--training", "x.csv"]) == 2


def test_exporting_a_study_in_parts_keeps_the_cells_already_exported(tmp_path):
    from mteb_lrd.cli import main
    from mteb_lrd.studies.records import record_path, write_record
    from mteb_lrd.studies.tidy import read_rows, records_from_rows

    records = _selection(5, 1.0, noise=0.1)
    first, second = tmp_path / "a" / "study", tmp_path / "b" / "study"
    for record in records[:8]:
        write_record(record_path(first, record["model"]["name"], record["task"]), record)
    changed = {**records[2], "main_score": 0.123}  # the same cell, scored again in the second part
    for record in [changed, *records[8:]]:
        write_record(record_path(second, record["model"]["name"], record["task"]), record)
    out = tmp_path / "records"
    assert main(["report", "--export-records", str(first), "--out", str(out)]) == 0
    assert main(["report", "--export-records", str(second), "--out", str(out)]) == 0
    cells = {(c["model"]["name"], c["task"]): c for c in records_from_rows(read_rows(out / "study.csv"))}
    expected = {(r["model"]["name"], r["task"]): r for r in [*records[:2], changed, *records[3:]]}
    assert cells.keys() == expected.keys() and len(expected) == 15
    assert all(cells[k]["main_score"] == r["main_score"] and cells[k]["scores"] == r["scores"]
               for k, r in expected.items())  # fmt: skip


def test_merging_refuses_cells_of_another_kind_or_definition():
    from mteb_lrd.studies.tidy import merge_rows

    ours = tidy_rows(_selection(3, 1.0), "s")
    theirs = tidy_rows([{**r, "reproduce": "authors"} for r in _selection(4, 1.0)[9:]], "s")
    with pytest.raises(ValueError, match="mix reproduce modes"):
        merge_rows(ours, theirs)
    pruning = [{**ours[0], "model": "p", "row": "base"}]
    with pytest.raises(ValueError, match="one study"):
        merge_rows(ours, pruning)
    assert merge_rows(ours, ours[:4]) == ours
    capped = tidy_rows(
        [{**r, "caps": {"frenet": 10, "nrs": 10, "gfmi": 10}} for r in _selection(4, 1.0)[9:]], "s"
    )
    with pytest.raises(ValueError, match="m1 × T3 was made with caps .* the file.s cells with null"):
        merge_rows(ours, capped)
    # a study rerun whole with new caps replaces every cell: nothing kept to disagree with
    recapped = tidy_rows(
        [{**r, "caps": {"frenet": 10, "nrs": 10, "gfmi": 10}} for r in _selection(3, 1.0)], "s"
    )
    assert merge_rows(ours, recapped) == recapped

    def truncated(records, max_length):
        return [{**r, "model": {**r["model"], "max_length": max_length}} for r in records]

    at_512 = tidy_rows(truncated(_selection(3, 1.0), 512), "s")
    with pytest.raises(ValueError, match="m1 × T3 was made with max_length 256, the file.s cells with 512"):
        merge_rows(at_512, tidy_rows(truncated(_selection(4, 1.0)[9:], 256), "s"))
    unrecorded = tidy_rows(_selection(4, 1.0)[9:], "s")  # written before the truncation was kept
    assert len(merge_rows(at_512, unrecorded)) > len(at_512)


def test_write_results_draws_a_scatter_per_claim_score(tmp_path):
    from mteb_lrd.report.results_document import write_results

    write_rows(tmp_path / "records" / "select.csv", tidy_rows(_selection(5, 1.0, noise=0.1), "select"))
    path = write_results(tmp_path / "records", tmp_path / "docs")
    text = path.read_text()
    for name in ("frenet_d0L", "nrs_mean_jaccard", "gfmi_mean_auc"):
        figure = f"figures/results-select-{name}.png"
        assert f"]({figure})" in text and (tmp_path / "docs" / figure).stat().st_size > 5000


def test_a_dysem_summary_gives_its_comparisons_holm_adjusted(tmp_path):
    import json

    from mteb_lrd.metrics.permutation import holm

    label = "DySem (k=64, L=3, attention)"
    comparisons = {"STSBenchmark": {
        "PromptEOL": {"delta": 0.03, "ci_low": 0.01, "ci_high": 0.05, "p": 0.004, "n": 1379, "n_resamples": 2000},
        "mean pooling": {"delta": -0.02, "ci_low": -0.04, "ci_high": -0.001, "p": 0.03, "n": 1379, "n_resamples": 2000},
    }}  # fmt: skip
    summary = {"model": "/x/qwen2.5-coder-1.5b", "dtype": "float32", "dev_pairs": 200, "dev_labels_used": True,
               "dev": {"select_on_dev": True}, "tasks": {"STSBenchmark": {"pairs": 1379, "translations": True}},
               "language_order": ["en", "de", "fr"], "table": {label: {"STSBenchmark": {"spearman": 81.0}},
                                                               "PromptEOL": {"STSBenchmark": {"spearman": 78.0}}},
               "paired": {"reference": label, "n_resamples": 2000, "seed": 0, "tasks": comparisons}}  # fmt: skip
    (tmp_path / "dysem-qwen.json").write_text(json.dumps(summary))
    text = render_results(tmp_path)
    rows = {
        line.split(" | ")[0].strip("| "): line
        for line in text.splitlines()
        if line.startswith("| DySem beats")
    }
    adjusted = holm([0.004, 0.03])
    model = "qwen2.5-coder-1.5b: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF dequantised to float32"
    eol = rows[f"DySem beats PromptEOL on STSBenchmark ({model})"]
    assert (
        f"0.004 / {adjusted[0]:.3f}" in eol
        and "**replicated**" in eol
        and "| 1 model (1,379 test pairs) |" in eol
    )
    assert (
        "Δρ +0.044 to +0.107 (7-task means on four 7–8B base LLMs)" in eol
    )  # the paper's gains over PromptEOL
    assert "overlaps the paper's range (+0.044 to +0.107)" in eol
    beaten = rows[f"DySem beats mean pooling on STSBenchmark ({model})"]
    assert "**contradicted**" in beaten and "ahead (no value published)" in beaten
    assert "## DySem (`dysem-qwen`)" in text and "no complete records yet" not in text
    assert (
        f"Model {model}; run in float32. k, L and value chosen on 200 STS Benchmark dev pairs; STSBenchmark: 1,379 "
        "test pairs; language order en, de, fr. One model on 1 task; the paper's gains are 7-task means"
        in text
    )
    from mteb_lrd.report.results_document import write_results

    written = write_results(tmp_path, tmp_path / "docs").read_text()
    labels_order_only = {**summary, "dev": {"select_on_dev": False, "language_order": "labels"}}
    (tmp_path / "dysem-qwen.json").write_text(json.dumps(labels_order_only))  # dev labels used, k and L given
    assert f"Model {model}; run in float32. STSBenchmark" in render_results(tmp_path)
    assert "![DySem against its baselines](figures/results-dysem-qwen.png)" in written
    assert (tmp_path / "docs" / "figures" / "results-dysem-qwen.png").stat().st_size > 5000


def test_a_dysem_row_at_the_bootstrap_floor_is_a_bound_and_is_set_against_the_papers_gains(tmp_path):
    """A p with no resample beyond zero is written as the bound it is; each interval is placed against the
    paper's gains (one task of one small model against its 7-task means); the dense attention sum is named
    for the paper's AlignedWVA."""
    import json

    def compared(delta, low, high, p):
        return {"delta": delta, "ci_low": low, "ci_high": high, "p": p, "n": 1379, "n_resamples": 2000}

    label = "DySem (k=512, L=8, source)"
    summary = {"model": "/x/qwen2.5-coder-1.5b", "dtype": "float32", "dev_pairs": 200, "dev": {},
               "tasks": {"STSBenchmark": {"pairs": 1379, "translations": True}}, "language_order": ["en"],
               "table": {label: {"STSBenchmark": {"spearman": 74.5}}},
               "paired": {"reference": label, "n_resamples": 2000, "seed": 0, "tasks": {"STSBenchmark": {
                   "PromptEOL": compared(0.0028, -0.0171, 0.0225, 0.775),
                   "attention sum (dense)": compared(0.0194, 0.0134, 0.0256, 1 / 2000)}}}}  # fmt: skip
    (tmp_path / "dysem-qwen.json").write_text(json.dumps(summary))
    rows = {line.split(" | ")[0].strip("| ").split(" on STSBenchmark")[0]: line
            for line in render_results(tmp_path).splitlines() if line.startswith("| DySem beats")}  # fmt: skip
    eol = rows["DySem beats PromptEOL"]
    assert "Δρ +0.0028 [-0.0171, +0.0225]; excludes the paper's smallest gain (+0.044)" in eol
    assert "| 0.775 / 0.775 | **undecided** |" in eol
    dense = rows["DySem beats AlignedWVA-style dense attention sum"]
    assert "inside the paper's range (+0.007 to +0.049)" in dense
    assert "| ≤ 5e-4 / ≤ 0.001 | **replicated** |" in dense and "5.0e-04" not in dense


def test_the_dysem_figure_draws_each_baseline_with_its_interval():
    from mteb_lrd.report.studies import dysem_gain_figure

    per = {"PromptEOL": {"delta": 0.03, "ci_low": 0.01, "ci_high": 0.05, "n": 10},
           "mean pooling": {"delta": -0.02, "ci_low": -0.04, "ci_high": -0.001, "n": 10}}  # fmt: skip
    figure = dysem_gain_figure({"reference": "DySem", "tasks": {"STSBenchmark": per, "STS12": {}}})
    (axis,) = figure.axes
    assert [t.get_text() for t in axis.get_yticklabels()] == ["PromptEOL", "mean pooling"]
    points, caps, (bars,) = axis.containers[0]
    assert np.allclose(points.get_xdata(), [0.03, -0.02])
    assert np.allclose([seg[:, 0] for seg in bars.get_segments()], [[0.01, 0.05], [-0.04, -0.001]])
    assert dysem_gain_figure({"reference": "DySem", "tasks": {"STS12": {}}}) is None


def _pruning_records(two_blocks_at_20: bool, models: str = "abcde", gfmi: float = -0.01) -> list[dict]:
    """``models`` (one letter each) × 2 tasks; every rule removes block 3 (Δ −0.01, NRS −0.08, GFMI
    ``gfmi``), Random block 4 (−0.05), at 5 %, 15 % and 20 % alike, except model e's 20 % (two blocks)
    when ``two_blocks_at_20``."""
    records = []
    for model in models:
        for task in ("T1", "T2"):
            choices = []
            for budget in (0.05, 0.15, 0.2):
                choices += [
                    {"method": m, "budget": budget, "seed": None, "blocks": [3], "delta": d, "speedup": 1.2}
                    for m, d in (("frenet", -0.01), ("nrs", -0.08), ("gfmi", gfmi), ("last-k", -0.2))
                ]
                choices += [{"method": "random", "budget": budget, "seed": s, "blocks": [4], "delta": -0.05,
                             "speedup": 1.2} for s in range(3)]  # fmt: skip
            if two_blocks_at_20 and model == "e":
                choices = [{**c, "blocks": [*c["blocks"], 6]} if c["budget"] == 0.2 else c for c in choices]
            records.append({"model": {"name": model, "family": "F", "kind": "decoder"}, "task": task,
                            "base_score": 0.7, "n_texts": 50, "choices": choices, "settings": {"protect": 2},
                            "subsets": {"1": {"3": -0.01, "4": -0.05, "5": -0.02}}})  # fmt: skip
    return records


def test_a_pruning_study_gives_the_papers_claims_its_tables_and_a_figure(tmp_path):
    from mteb_lrd.metrics.permutation import holm
    from mteb_lrd.report.results_document import write_results

    write_rows(tmp_path / "records" / "prune.csv", tidy_rows(_pruning_records(True), "prune"))
    text = write_results(tmp_path / "records", tmp_path / "docs").read_text()
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    # every model +0.04 over Random: exact p = 2 / 32 for each of the 3 tested claims, Holm → 0.1875;
    # 5 models cannot reach 0.05 (their smallest p is 2 / 32)
    assert holm([1 / 16] * 3)[0] == pytest.approx(0.1875)
    for claim in (
        "GFMI beats Random by mean at 15 %",
        "GFMI beats Random by mean at 20 %",
        "Frenet helps at the lightest budget (5 %)",
    ):
        assert "0.062 / 0.188" in rows[claim] and "**not testable with n = 5 models**" in rows[claim]
        assert "| 5 models (2 tasks; 50 texts each) |" in rows[claim]
    nrs = rows["NRS does not transfer (no gain over Random, all budgets)"]
    assert "mean Δ − Random -0.0300 over all budgets (below Random)" in nrs
    assert (
        "| descriptive (a claim of no gain needs an equivalence margin; none is stated) | – / – | **descriptive** |"
        in nrs
    )
    assert "the share of the candidate blocks (those left after protecting 2 at each end) removed" in text
    # 5 % and 15 % removed the same blocks everywhere: one column; model e's 20 % did not
    assert "| method | 5 % and 15 % (1 block) | 20 % (1–2 blocks) |" in text
    assert rows["GFMI's median change is the guided rules' closest to zero at every budget"].startswith(
        "| GFMI's median change is the guided rules' closest to zero at every budget | every budget (Fig. 2) | "
        "at 2 of 2 budgets (the 3 asked for make 2 distinct choices); median Δ at 5 % and 15 % GFMI -0.0100, "
        "the closest other rule frenet -0.0100; at 20 % GFMI"
    )  # a tie counts for GFMI
    assert "| frenet | 1 | 83.3 | 5 | 10 |" in text  # the best of three sets: (2 below + ½ tie) / 3
    assert (
        "mean Δ − Random +0.0400 (above Random); percentile 83 among the sets of 1 block vs Random's 17, the top of "
        "5 methods | " in rows["Frenet helps at the lightest budget (5 %)"]
    )
    assert (tmp_path / "docs" / "figures" / "results-prune-pruning.png").stat().st_size > 5000


def test_budgets_that_remove_the_same_blocks_are_one_test(tmp_path):
    write_rows(tmp_path / "prune.csv", tidy_rows(_pruning_records(False), "prune"))
    text = render_results(tmp_path)
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    merged = "GFMI beats Random by mean at 15 % and 20 % (1 block: one test)"
    assert merged in rows and "GFMI beats Random by mean at 15 %" not in rows
    for claim in (merged, "Frenet helps at the lightest budget (5 %)"):
        assert "0.062 / 0.125" in rows[claim]  # Holm over 2 tests now: 2 × 2/32
    assert "| method | 5 %, 15 % and 20 % (1 block) |" in text


@pytest.mark.parametrize(
    ("models", "verdict"),
    [("a", "not testable with n = 1 model"), ("abcdef", "not testable with n = 6 models (Holm over 2)"),
     ("abcdefgh", "replicated")],
)  # fmt: skip
def test_a_pruning_row_that_cannot_reach_the_level_says_so(tmp_path, models, verdict):
    """Two tests (5 %, 15 % and 20 % remove the same block): one model's sign flip gives p = 1 whatever the
    data; 6 models reach 2/64 alone, not Holm's 0.05/2; 8 models all +0.04 over Random give 2/256, × 2."""
    write_rows(tmp_path / "prune.csv", tidy_rows(_pruning_records(False, models), "prune"))
    rows = {line.split(" | ")[0].strip("| "): line for line in render_results(tmp_path).splitlines()}
    for claim in (
        "GFMI beats Random by mean at 15 % and 20 % (1 block: one test)",
        "Frenet helps at the lightest budget (5 %)",
    ):
        assert f"**{verdict}**" in rows[claim]
    assert "**descriptive**" in rows["NRS does not transfer (no gain over Random, all budgets)"]


def test_gfmi_median_claim_reads_closest_to_zero_and_rows_say_where_the_data_point_the_other_way(tmp_path):
    """GFMI's +0.02 is the highest median of all, but frenet's -0.01 is closer to zero: the paper's reading."""
    write_rows(tmp_path / "prune.csv", tidy_rows(_pruning_records(False, gfmi=0.02), "prune"))
    rows = {line.split(" | ")[0].strip("| "): line for line in render_results(tmp_path).splitlines()}
    closest = rows["GFMI's median change is the guided rules' closest to zero at every budget"]
    assert "| at 0 of 1 budgets (the 3 asked for make 1 distinct choices); median Δ at 5 %, 15 % and 20 % " \
           "GFMI +0.0200, the closest other rule frenet -0.0100 |" in closest  # fmt: skip
    write_rows(tmp_path / "prune.csv", tidy_rows(_pruning_records(False, gfmi=-0.09), "prune"))
    rows = {line.split(" | ")[0].strip("| "): line for line in render_results(tmp_path).splitlines()}
    gfmi = rows["GFMI beats Random by mean at 15 % and 20 % (1 block: one test)"]
    assert (
        "mean Δ − Random -0.0400 (below Random); percentile" in gfmi
        and ": our data point the other way |" in gfmi
    )
    assert "other way" not in rows["Frenet helps at the lightest budget (5 %)"]


def test_an_authors_study_is_compared_with_ours_on_the_cells_both_hold(tmp_path):
    ours = _selection(7, 1.0)
    theirs = [{**r, "reproduce": "authors", "scores": {**r["scores"], "frenet_d0L": -r["scores"]["frenet_d0L"]}}
              for r in ours if r["model"]["name"] != "m6"]  # fmt: skip
    write_rows(tmp_path / "select.csv", tidy_rows(ours, "select"))
    text = render_results(tmp_path)
    assert "No `--reproduce authors` records are committed yet" in text
    write_rows(tmp_path / "select-authors.csv", tidy_rows(theirs, "select-authors"))
    text = render_results(tmp_path)
    section = text[text.index("## Where we differ") :]
    assert (
        "`select-authors` (the authors' definitions) beside `select` (ours), on the 6 models (3 tasks; 100 texts "
        "each) both hold (m0, m1, m2, m3, m4, m5; without m6: no authors'-definitions run; ours is re-tested"
        in section
    )
    # d0L (+1 / -1) and GFMI (-1) rank the 6 models exactly on each of 3 tasks whose orders differ: of
    # the 6! joint relabellings only the identity reaches |median rho| = 1, p = 1 / 720 = 0.0014;
    # Holm over the three scores: 3 × 0.0014 = 0.0042
    d0l = next(line for line in section.splitlines() if line.startswith("| frenet_d0L"))
    assert (
        d0l == "| frenet_d0L | +1.00 (p 0.001 / 0.004, replicated) | -1.00 (p 0.001 / 0.004, contradicted) |"
    )
    gfmi = next(line for line in section.splitlines() if line.startswith("| gfmi_mean_auc"))
    assert gfmi.count("-1.00 (p 0.001 / 0.004, contradicted)") == 2
    assert "equal under both in 0 of 18 cells" in section  # d0L differs in every cell
    assert (
        "definitions change: frenet_d0L (replicated under ours, contradicted under the authors')." in section
    )
    claims = text[: text.index("## Where we differ")]
    assert "select-authors" not in claims  # the authors' study tests no claim


def test_an_authors_study_without_enough_shared_cells_is_named_not_tested(tmp_path):
    ours = _selection(7, 1.0)
    write_rows(tmp_path / "select.csv", tidy_rows(ours, "select"))
    renamed = [
        {**r, "reproduce": "authors", "model": {**r["model"], "name": r["model"]["name"] + "x"}} for r in ours
    ]
    write_rows(tmp_path / "other-authors.csv", tidy_rows(renamed, "other-authors"))
    three = [{**r, "reproduce": "authors"} for r in ours if r["model"]["name"] in {"m0", "m1", "m2"}]
    write_rows(tmp_path / "few-authors.csv", tidy_rows(three, "few-authors"))
    section = render_results(tmp_path).split("## Where we differ")[1]
    assert (
        "`other-authors` (the authors' definitions) has no study of ours on the same cells beside it."
        in section
    )
    assert "`few-authors` (the authors' definitions) beside `select`: models with every task in both so far: 3; " \
           "a comparison needs 4." in section  # fmt: skip


def test_cells_whose_claim_scores_agree_under_both_definitions_are_counted(tmp_path):
    ours = _selection(7, 1.0)
    theirs = [{**r, "reproduce": "authors",
               "scores": {**r["scores"], "frenet_d0L": -r["scores"]["frenet_d0L"]} if r["model"]["name"] == "m0"
               else r["scores"]} for r in ours]  # fmt: skip
    write_rows(tmp_path / "select.csv", tidy_rows(ours, "select"))
    write_rows(tmp_path / "select-authors.csv", tidy_rows(theirs, "select-authors"))
    section = render_results(tmp_path).split("## Where we differ")[1]
    assert "equal under both in 18 of 21 cells" in section  # only m0's 3 cells differ


def test_decoders_under_a_template_are_named_with_their_first_last_retention(tmp_path):
    records = _selection(7, 1.0)
    for r in records:
        decoder = r["model"]["name"] in {"m5", "m6"}
        r["model"] = {
            **r["model"],
            "kind": "decoder" if decoder else "sentence-transformer",
            "template": 'This sentence : "{text}" means in one word:"' if decoder else None,
        }
        r["scores"]["nrs_jaccard_first_last"] = 0.01 if decoder else 0.2 + int(r["model"]["name"][1:]) / 100
    write_rows(tmp_path / "select.csv", tidy_rows(records, "select"))
    text = render_results(tmp_path)
    assert "**h_0 of the decoders.** m5 and m6 are pooled at their last token" in text
    assert "their nrs_jaccard_first_last is 0.010–0.010 against 0.200–0.240 for the other models" in text
    records = [r for r in records if r["model"]["kind"] != "decoder"]
    write_rows(tmp_path / "select.csv", tidy_rows(records, "select"))
    assert "h_0 of the decoders" not in render_results(tmp_path)


def test_the_decoders_paragraph_says_which_definition_their_records_were_measured_under():
    """Records made before uninformative states gave no number are named as such; records that say
    they were measured with those scores undefined are described so."""
    from mteb_lrd.report.results_selection import _tied_embedding_output

    def record(name, kind, **extra):
        model = {"name": name, "kind": kind, "template": "prompteol" if kind == "decoder" else None}
        return {
            "model": model,
            "scores": {"nrs_jaccard_first_last": 0.01 if kind == "decoder" else 0.2},
            **extra,
        }

    old = [record("smollm2-135m", "decoder"), record("all-MiniLM-L6-v2", "encoder")]
    (text, _) = _tied_embedding_output(old, within_table=True)
    assert "The records of smollm2-135m were measured before mteb-lrd left such scores undefined" in text
    new = [record("smollm2-135m", "decoder", undefined_states="null"), record("all-MiniLM-L6-v2", "encoder")]
    (text, _) = _tied_embedding_output(new, within_table=True)
    assert "measured with those scores undefined (null)" in text and "measured before" not in text


def test_the_pruning_section_shows_randoms_spread_over_its_seeds(tmp_path):
    # Random's seed s changes the score by -0.05 + 0.01 s in every cell: per-seed means -0.05, -0.04,
    # -0.03 (population sd 0.0082), the same at every budget column
    records = _pruning_records(False)
    for record in records:
        for choice in record["choices"]:
            if choice["method"] == "random":
                choice["delta"] = -0.05 + 0.01 * choice["seed"]
    write_rows(tmp_path / "prune.csv", tidy_rows(records, "prune"))
    text = render_results(tmp_path)
    assert (
        "Random over its 3 seeds (each seed's mean change over the cells): 5 %, 15 % and 20 % -0.0500 to "
        "-0.0300 (sd 0.0082)." in text
    )
