"""End-to-end `select` and `prune-study` on tiny random models and a tiny in-memory STS task."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from mteb_lrd.parameters import Caps
from mteb_lrd.studies.options import CellOptions, PruneStudyOptions
from mteb_lrd.studies.runner import StudyModel, load_study_model
from tests.tiny_models import TEXTS, load_tiny_tokenizer

PAIRS = [
    {"sentence1": a, "sentence2": b, "score": float(s)}
    for a, b, s in zip(
        TEXTS, TEXTS[1:] + TEXTS[:1], [0, 1, 2, 3, 4, 5, 0.5, 1.5, 2.5, 3.5, 4.5, 1, 2, 3, 4, 5], strict=True
    )
] + [{"sentence1": t, "sentence2": t, "score": 5.0} for t in TEXTS[:8]]


@pytest.fixture(scope="module")
def tiny_task():
    from mteb_lrd.tasks.local_tasks import make_task

    return make_task("STS", "TinySTS", lambda: {"default": {"test": PAIRS}})


def _decoder(tiny_model_dir, kind: str, layers: int) -> StudyModel:
    path = tiny_model_dir(kind, num_layers=layers)
    return load_study_model(str(path), tokenizer=load_tiny_tokenizer(path))


def test_select_end_to_end(tmp_path, tiny_task, tiny_model_dir, tiny_st_dir, caplog):
    from mteb_lrd.report.studies import write_selection_report
    from mteb_lrd.studies.records import load_records
    from mteb_lrd.studies.selection import run_selection_study
    from mteb_lrd.studies.selection_analysis import analyse_selection

    models = [load_study_model(str(tiny_st_dir))] + [
        _decoder(tiny_model_dir, k, 4) for k in ("llama", "qwen2", "gpt2")
    ]
    models[1].name, models[2].name, models[3].name = "tiny-llama", "tiny-qwen2", "tiny-gpt2"
    out = run_selection_study(
        models,
        {"TinySTS": tiny_task},
        tmp_path,
        CellOptions(caps=Caps(8, 6, 12), lrd_kwargs={"nrs_k": 3, "gfmi_k": 3}),
    )
    records = load_records(out)
    assert len(records) == 4
    for rec in records:
        assert -1 <= rec["main_score"] <= 1
        # each family on its own sub-sample; one pass over their union
        assert rec["n_per_family"] == {"frenet": 8, "nrs": 6, "gfmi": 12} and rec["n_texts"] == len(TEXTS)
        assert 12 <= rec["n_used"] <= 16 and rec["lrd_params"]["gfmi_k"] == 3
        assert rec["reproduce"] == "ours" and rec["text_order"] == "interleaved" and rec["prompt"] == ""
        assert rec["scores"]["rankme"] >= 1 and np.isfinite(rec["scores"]["frenet_d0L"])
    analysis = analyse_selection(records)
    # four models, one task: every non-constant score has exactly one per-task ρ, as scipy computes it
    from scipy import stats

    xs = [r["scores"]["frenet_d0L"] for r in records]
    ys = [r["main_score"] for r in records]
    assert analysis["per_task"]["frenet_d0L"]["TinySTS"]["rho"] == pytest.approx(
        stats.spearmanr(xs, ys).statistic
    )
    assert any("only 1 tasks" in c for c in analysis["caveats"])
    report = write_selection_report(analysis, tmp_path / "report", ["frenet_d0L", "rankme"])
    assert "Label-free model selection" in report.read_text()
    assert "| tiny-llama | " in report.read_text() and " | decoder | none |" in report.read_text()
    assert (tmp_path / "report" / "scatter_rankme.png").stat().st_size > 1000
    # resumable: a second run finds every cell recorded and loads no model
    # resumable: every cell of "tiny-llama" is recorded, so a rerun by that name loads nothing (the
    # name is no panel model and no folder: loading it would raise)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="mteb_lrd.studies"):
        run_selection_study(["tiny-llama"], {"TinySTS": tiny_task}, tmp_path)
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("mteb_lrd.studies")]
    assert lines == ["tiny-llama: all 1 tasks recorded"]


def test_prune_study_end_to_end(tmp_path, tiny_task, tiny_model_dir):
    from mteb_lrd.report.studies import write_prune_report
    from mteb_lrd.studies.pruning import METHODS, run_prune_study
    from mteb_lrd.studies.pruning_analysis import analyse_pruning
    from mteb_lrd.studies.records import read_record

    model = _decoder(tiny_model_dir, "llama", 8)
    model.name = "tiny-llama-8"
    out = run_prune_study(
        [model],
        {"TinySTS": tiny_task},
        tmp_path,
        CellOptions(caps=Caps(20, 20, 20)),
        PruneStudyOptions(budgets=(0.2, 0.5), speed_texts=8),
    )
    record = read_record(out / "records" / "tiny-llama-8" / "TinySTS.json")
    assert {c["method"] for c in record["choices"]} == set(METHODS)
    for choice in record["choices"]:
        assert all(3 <= i <= 5 for i in choice["ids"])  # candidates of L = 8 with 3 protected
        assert len(choice["ids"]) == (1 if choice["budget"] == 0.2 else 2)
        assert choice["delta"] == pytest.approx(choice["main_score"] - record["base_score"])
    analysis = analyse_pruning([record], n_resamples=200)
    assert set(analysis["table"]) == set(METHODS)
    assert np.isnan(analysis["table"]["random"]["0.2"]["wilcoxon_p_vs_random"])
    assert analysis["base"] == [
        {"model": "tiny-llama-8", "task": "TinySTS", "base_score": record["base_score"], "template": None}
    ]
    report = write_prune_report(analysis, tmp_path / "report")
    assert "Fig. 2" in report.read_text() and (tmp_path / "report" / "pruning.html").is_file()
    assert f"| tiny-llama-8 | TinySTS | {record['base_score']:.3f} | none |" in report.read_text()
    assert json.loads(json.dumps(analysis))["budgets"] == [0.2, 0.5]


def test_select_authors_mode_records_the_reference_extraction(tmp_path, tiny_task, tiny_model_dir):
    from mteb_lrd.studies.records import load_records
    from mteb_lrd.studies.selection import run_selection_study
    from mteb_lrd.studies.selection_analysis import analyse_selection

    model = _decoder(tiny_model_dir, "llama", 4)
    model.name = "tiny-llama"
    run_selection_study(
        [model],
        {"TinySTS": tiny_task},
        tmp_path,
        CellOptions(caps=Caps(10, 10, 10), lrd_kwargs={"nrs_k": 3, "gfmi_k": 3}, reproduce="authors"),
    )
    (record,) = load_records(tmp_path)
    assert record["reproduce"] == "authors" and record["prompt"] == ""
    assert record["extraction"]["last_token"] == "reference" and record["extraction"]["batch_size"] == 4
    assert analyse_selection([record])["reproduce"] == "authors"
    with pytest.raises(ValueError, match="mix reproduce modes"):
        analyse_selection([record, {**record, "reproduce": "ours"}])


def test_prune_study_with_a_decoder_template_scores_and_measures_the_templated_texts(
    tmp_path, tiny_task, tiny_model_dir, tiny_st_dir
):
    """A decoder under ``decoder_template`` is scored, calibrated and recorded exactly as the bare
    decoder on texts put into the template by hand; another template cannot join its records."""
    from mteb_lrd.extraction.templates import TEMPLATES
    from mteb_lrd.pruning.block_influence import block_influence
    from mteb_lrd.studies.pruning import run_prune_study
    from mteb_lrd.studies.records import read_record
    from mteb_lrd.studies.runner import mteb_encoder, mteb_score, task_texts
    from mteb_lrd.tasks.local_tasks import make_task

    template = TEMPLATES["prompteol"]
    path = tiny_model_dir("llama", num_layers=8)
    tok = load_tiny_tokenizer(path)
    model = load_study_model(str(path), tokenizer=tok, decoder_template="prompteol")
    bare = load_study_model(str(path), tokenizer=tok)
    assert model.template == template and bare.template is None
    assert load_study_model(str(tiny_st_dir), decoder_template="prompteol").template is None  # encoders
    model.name = bare.name = "tiny-llama-8"
    run_prune_study(
        [model], {"TinySTS": tiny_task}, tmp_path, CellOptions(caps=Caps(20, 20, 20)),
        PruneStudyOptions(budgets=(0.5,), speed_texts=8),
    )  # fmt: skip
    record = read_record(tmp_path / "records" / "tiny-llama-8" / "TinySTS.json")
    assert record["model"]["template"] == record["settings"]["template"] == template
    assert record["extraction"]["template"] == template

    def by_hand(text: str) -> str:
        return template.replace("{text}", text)

    templated_pairs = [
        {**p, "sentence1": by_hand(p["sentence1"]), "sentence2": by_hand(p["sentence2"])} for p in PAIRS
    ]
    templated_task = make_task("STS", "TinySTS", lambda: {"default": {"test": templated_pairs}})
    expected = mteb_score(mteb_encoder(bare), templated_task())["main_score"]
    assert record["base_score"] == pytest.approx(expected, abs=1e-12)
    calibration = [by_hand(t) for t in task_texts(tiny_task())]  # caps 20 >= 16 texts: all, in order
    influence = block_influence(bare.model, calibration, tokenizer=tok, batch_size=32)
    np.testing.assert_allclose(record["block_influence"], influence, rtol=1e-6)
    with pytest.raises(ValueError, match="recorded with decoder template"):
        run_prune_study([bare], {"TinySTS": tiny_task}, tmp_path,
                        pruning=PruneStudyOptions(budgets=(0.5,)))  # fmt: skip


def test_a_bad_decoder_template_fails_before_any_model_loads(tmp_path, tiny_task):
    from mteb_lrd.studies.selection import run_selection_study

    with pytest.raises(ValueError, match="exactly once"):
        run_selection_study(["no-such-model"], {"TinySTS": tiny_task}, tmp_path,
                            CellOptions(decoder_template="no slot"))  # fmt: skip


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: CellOptions(caps=(1, 2, 3)), "caps must be"),
        (lambda: CellOptions(batch_size=0), "batch_size must be a positive integer"),
        (lambda: CellOptions(lrd_kwargs={"nrs_k": 0}), "nrs_k must be a positive integer"),
        (lambda: CellOptions(reproduce="mine"), "reproduce must be one of"),
        (lambda: CellOptions(text_order="random"), "text_order must be one of"),
        (lambda: CellOptions(prompt_policy="always"), "prompt_policy must be one of"),
        (lambda: CellOptions(decoder_template="no slot"), "exactly once"),
        (lambda: PruneStudyOptions(mapping="other"), "mapping must be"),
        (lambda: PruneStudyOptions(budgets=(0.0,)), "budgets must be fractions"),
        (lambda: PruneStudyOptions(budgets=()), "budgets must be fractions"),
        (lambda: PruneStudyOptions(speed_texts=0), "speed_texts must be a positive integer"),
        (lambda: PruneStudyOptions(protect=-1), "protect must be a non-negative integer"),
    ],
)
def test_study_options_are_validated_once_with_a_clear_message(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_scoring_a_sentence_transformer_raises_no_future_warning(tiny_st_dir, tiny_task):
    import warnings

    from mteb_lrd.studies.runner import lrd_prompt, mteb_encoder, mteb_score

    model = load_study_model(str(tiny_st_dir))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lrd_prompt(model, tiny_task.metadata)  # the prompt mteb's wrapper would use
        mteb_score(mteb_encoder(model), tiny_task())
    assert not [w for w in caught if issubclass(w.category, FutureWarning)], [str(w.message) for w in caught]


@pytest.mark.parametrize("kind", ["decoder", "sentence-transformer"])
def test_selection_scores_reuse_the_profile_outputs_and_equal_a_plain_score(
    kind, tmp_path, tiny_task, tiny_model_dir
):
    """The texts the LRD profile extracted are not encoded again for the main score: the score is
    that of an independent mteb run of the model."""
    from mteb_lrd.studies.runner import mteb_encoder, mteb_score
    from mteb_lrd.studies.selection import measure_selection_cell
    from tests.tiny_models import build_tiny_sentence_transformer

    if kind == "decoder":
        model = _decoder(tiny_model_dir, "llama", 4)
        model.template = "Say {text} now"
    else:
        model = load_study_model(str(build_tiny_sentence_transformer(tmp_path / "st")))
    caps = Caps(5, 5, 5)  # 5 of the 16 distinct texts are profiled, the others encoded
    record = measure_selection_cell(model, tiny_task, CellOptions(caps=caps))
    plain = mteb_score(mteb_encoder(model), tiny_task())["main_score"]
    assert record["main_score"] == pytest.approx(plain, abs=1e-6)
    assert 0 < record["outputs_reused"] < 2 * len(PAIRS)
    authors = measure_selection_cell(model, tiny_task, CellOptions(caps=caps, reproduce="authors"))
    assert authors["outputs_reused"] == 0


SMALL_K = {"nrs_k": 3, "gfmi_k": 3}


def test_a_second_study_reads_the_main_scores_of_the_first(
    tmp_path, tiny_task, tiny_model_dir, monkeypatch, caplog
):
    """--scores-from: the authors' study beside ours takes each cell's MTEB score from our record
    (same texts, template, truncation) and runs no mteb evaluation; other settings are scored."""
    from mteb_lrd.studies import selection
    from mteb_lrd.studies.records import read_record

    model = _decoder(tiny_model_dir, "llama", 4)
    ours = selection.run_selection_study([model], {"TinySTS": tiny_task}, tmp_path / "ours",
                                         CellOptions(caps=Caps(10, 10, 10), lrd_kwargs=SMALL_K))  # fmt: skip
    original = read_record(ours / "records" / model.name / "TinySTS.json")

    def no_mteb(*_args, **_kwargs):
        raise AssertionError("scored again")

    monkeypatch.setattr(selection, "mteb_score", no_mteb)
    authors = selection.run_selection_study([model], {"TinySTS": tiny_task}, tmp_path / "authors",
                                            CellOptions(caps=Caps(10, 10, 10), lrd_kwargs=SMALL_K, reproduce="authors"),
                                            scores_from=ours)  # fmt: skip
    record = read_record(authors / "records" / model.name / "TinySTS.json")
    assert record["main_score"] == original["main_score"] and record["main_score_from"] == str(ours)
    # a study whose folder is gone: its tidy record file serves the same
    from mteb_lrd.studies.records import load_records
    from mteb_lrd.studies.tidy import read_rows, tidy_rows, write_rows

    tidy = write_rows(tmp_path / "ours.csv", tidy_rows(load_records(ours), "ours"))
    again = selection.measure_selection_cell(model, tiny_task, CellOptions(caps=Caps(10, 10, 10), lrd_kwargs=SMALL_K,
                                             reproduce="authors"), scores_from=tidy)  # fmt: skip
    assert again["main_score"] == original["main_score"] and again["main_score_from"] == str(tidy)
    rows = read_rows(tidy)  # a tidy file written before it kept the truncation: trusted, with a warning
    for row in rows:
        row["options"] = row["options"] and json.dumps({k: v for k, v in json.loads(row["options"]).items()
                                                         if k != "max_length"})  # fmt: skip
    with caplog.at_level(logging.WARNING):
        borrowed = selection.borrowed_score(
            write_rows(tmp_path / "old.csv", rows), model, tiny_task, again["n_texts"]
        )
    assert borrowed["main_score"] == original["main_score"] and "truncation of" in caplog.text
    for row in rows:  # recorded as the model's own limit (null): not this study's 512 tokens
        row["options"] = row["options"] and json.dumps({**json.loads(row["options"]), "max_length": None})
    null = write_rows(tmp_path / "null.csv", rows)
    assert (
        model.max_length == 512 and selection.borrowed_score(null, model, tiny_task, again["n_texts"]) is None
    )
    assert record["reproduce"] == "authors" and record["scores"] != original["scores"]
    model.template = "Say {text} now"  # recorded without a template: not the same cell
    with pytest.raises(AssertionError, match="scored again"), caplog.at_level(logging.WARNING):
        selection.measure_selection_cell(
            model, tiny_task, CellOptions(caps=Caps(10, 10, 10), lrd_kwargs=SMALL_K), scores_from=ours
        )
    assert "scored on other settings" in caplog.text


def test_an_interrupted_selection_cell_resumes_its_extraction(
    tmp_path, tiny_task, tiny_model_dir, monkeypatch
):
    """The cell's extraction shards wait in its scratch folder: a rerun after a failure in scoring
    runs no forward pass for the profile again, and the folder goes once the record is written."""
    from mteb_lrd.studies import selection
    from mteb_lrd.studies.records import read_record, record_path, scratch_path

    model = _decoder(tiny_model_dir, "llama", 4)
    options = CellOptions(caps=Caps(10, 10, 10), lrd_kwargs=SMALL_K)
    scoring = selection.mteb_score

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(selection, "mteb_score", interrupted)
    with pytest.raises(KeyboardInterrupt):
        selection.run_selection_study([model], {"TinySTS": tiny_task}, tmp_path, options)
    scratch = scratch_path(tmp_path, model.name, "TinySTS")
    assert list((scratch / "profile").rglob("*.npz"))
    monkeypatch.setattr(selection, "mteb_score", scoring)

    def forwards_of_a_run(out):
        forwards = []
        handle = model.model.get_input_embeddings().register_forward_hook(lambda *_: forwards.append(1))
        try:
            selection.run_selection_study([model], {"TinySTS": tiny_task}, out, options)
        finally:
            handle.remove()
        return len(forwards)

    resumed, fresh = forwards_of_a_run(tmp_path), forwards_of_a_run(tmp_path / "fresh")
    assert resumed == fresh - 1  # the profile's one batch (10 texts, batch size 32) came from the cache
    record = read_record(record_path(tmp_path, model.name, "TinySTS"))
    assert record == {**read_record(record_path(tmp_path / "fresh", model.name, "TinySTS")), "run": record["run"],
                      "mteb_seconds": record["mteb_seconds"]}  # fmt: skip
    assert not scratch.exists()
