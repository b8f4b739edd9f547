"""``mteb-lrd run`` / ``prune`` / ``report`` end to end on a tiny SentenceTransformer and a local task."""

from __future__ import annotations

import argparse
import importlib
import json

import pytest

from mteb_lrd.report.result_files import load_variants

COMMANDS = ("run", "prune", "report")


def _cli(argv):
    parser = argparse.ArgumentParser(prog="mteb-lrd")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"mteb_lrd.cli.{name}").register(subparsers)
    args = parser.parse_args([str(a) for a in argv])
    return args.func(args)


@pytest.fixture
def local_sts(tmp_path, texts):
    folder = tmp_path / "tinysts"
    folder.mkdir()
    rows = [
        {"sentence1": texts[i], "sentence2": texts[(i * 3 + 1) % 16], "score": (i * 7) % 6} for i in range(16)
    ]
    (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_run_prune_report(tiny_st_dir, local_sts, tmp_path, capsys):
    results, reports = tmp_path / "results", tmp_path / "reports"
    common = ["--local-task", f"{local_sts}=STS", "--results", results, "--batch-size", 4]
    assert _cli(["run", "--model", tiny_st_dir, *common]) == 0
    assert (
        _cli(["prune", "--model", tiny_st_dir, "--blocks", "1,2", "--output", tmp_path / "pruned", *common])
        == 0
    )
    assert "removed blocks [1, 2] of 4" in capsys.readouterr().out
    variants = load_variants(results)
    assert len(variants) == 2 and {v.experiment is None for v in variants} == {True, False}
    for variant in variants:
        row = variant.tasks["tinysts"].subsets[0]
        assert "layer_dynamics" in row and "per_layer" in row
    pruned = next(v for v in variants if v.experiment)
    assert len(pruned.tasks["tinysts"].per_layer[0]["scores"]) == 3  # h_0 .. h_2 after removing 2 of 4 blocks

    assert _cli(["report", "--results", results, "--output", reports]) == 0
    markdown = (reports / "leaderboard.md").read_text()
    assert len((reports / "leaderboard.csv").read_text().splitlines()) == 3  # header + base + pruned
    assert "removed [1, 2] of 4" in markdown
    assert (reports / "report.html").stat().st_size > 10000
    figures = {p.name for p in (reports / "figures").glob("*.png")}
    # the overlay, the overlaid profiles, base vs pruned (scores and profiles) and one profile per
    # variant; no d0L scatter with 2 models / variants (a rank correlation needs 4)
    assert {"per_layer_scores.png", "profiles_tinysts.png"} <= figures and len(figures) == 6
    assert "d0l_vs_score.png" not in figures


def test_prune_argument_errors(tiny_st_dir, tmp_path, capsys):
    with pytest.raises(ValueError, match="either --blocks or --rule"):
        _cli(["prune", "--model", tiny_st_dir, "--output", tmp_path / "p"])
    with pytest.raises(ValueError, match="needs --budget"):
        _cli(["prune", "--model", tiny_st_dir, "--rule", "gfmi", "--output", tmp_path / "p"])
    with pytest.raises(SystemExit):
        _cli(["prune", "--model", tiny_st_dir, "--blocks", "a,b", "--output", tmp_path / "p"])
    assert "--blocks" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _cli(["prune", "--model", tiny_st_dir, "--rule", "best", "--budget", 0.2, "--output", tmp_path / "p"])
    assert "invalid choice: 'best'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="out of range"):
        _cli(["prune", "--model", tiny_st_dir, "--blocks", "9", "--output", tmp_path / "p"])
    with pytest.raises(ValueError, match="nothing to do"):
        _cli(["prune", "--model", tiny_st_dir, "--blocks", "1"])
    assert not (tmp_path / "p").exists()


def test_prune_never_overwrites_the_source_or_a_non_empty_folder(tmp_path):
    from tests.tiny_models import build_tiny_sentence_transformer

    source = build_tiny_sentence_transformer(tmp_path / "st")
    before = {p.name: p.read_bytes() for p in source.iterdir() if p.is_file()}
    for output in (source, source / "sub", tmp_path):  # the folder, inside it, around it
        for extra in ([], ["--overwrite"]):
            with pytest.raises(ValueError, match="source is never overwritten"):
                _cli(["prune", "--model", source, "--blocks", "1", "--output", output, *extra])
    assert {p.name: p.read_bytes() for p in source.iterdir() if p.is_file()} == before

    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty; pass --overwrite"):
        _cli(["prune", "--model", source, "--blocks", "1", "--output", busy])
    assert (busy / "keep.txt").read_text() == "mine"
    assert _cli(["prune", "--model", source, "--blocks", "1", "--output", busy, "--overwrite"]) == 0
    assert not (busy / "keep.txt").exists() and (busy / "modules.json").is_file()
    assert json.loads((busy / "config.json").read_text())["num_hidden_layers"] == 3
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folder left


def test_run_unknown_model_and_task(tmp_path):
    with pytest.raises(ValueError, match="neither a folder nor a known name"):
        _cli(["run", "--model", tmp_path / "missing", "--task", "demo"])
    with pytest.raises(ValueError, match="Hugging Face cache"):  # offline: a Hub id not in the cache
        _cli(["run", "--model", "no-such-org/no-such-model", "--task", "demo"])
    with pytest.raises(ValueError, match="organization/model"):
        _cli(["run", "--model", "default", "--name", "no-slash", "--task", "demo"])
    with pytest.raises(ValueError, match="FOLDER=TYPE"):
        _cli(["run", "--local-task", "nofolder"])


def test_help_shows_examples(capsys):
    for name in COMMANDS:
        with pytest.raises(SystemExit):
            _cli([name, "--help"])
        assert "examples:" in capsys.readouterr().out


def test_prune_by_rule_records_rule_and_budget(tmp_path, texts):
    from tests.tiny_models import build_tiny_sentence_transformer

    model_dir = build_tiny_sentence_transformer(tmp_path / "st8", num_layers=8)
    texts_file = tmp_path / "texts.jsonl"
    texts_file.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out = tmp_path / "pruned"
    assert (
        _cli(
            [
                "prune",
                "--model",
                model_dir,
                "--rule",
                "gfmi",
                "--budget",
                0.5,
                "--texts",
                texts_file,
                "--output",
                out,
            ]
        )
        == 0
    )
    record = json.loads((out / "config.json").read_text())["mteb_lrd_pruning"]
    # 9 hidden states, candidates 3..5, ceil(3 * 0.5) = 2 pruned, reference mapping id l -> block l
    assert record["rule"] == "gfmi" and record["budget"] == 0.5 and record["num_blocks"] == 8
    assert len(record["removed_blocks"]) == 2 and set(record["removed_blocks"]) <= {3, 4, 5}


def test_prune_a_transformers_decoder_saves_a_transformers_folder(tiny_model_dir, tmp_path):
    out = tmp_path / "pruned-llama"
    assert _cli(["prune", "--model", tiny_model_dir("llama"), "--blocks", "0,2", "--output", out]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["num_hidden_layers"] == 2 and config["mteb_lrd_pruning"]["removed_blocks"] == [0, 2]
    assert (out / "tokenizer.json").is_file() and not (out / "modules.json").exists()


def test_a_templated_run_is_an_experiment_beside_the_plain_run(tiny_model_dir, local_sts, tmp_path):
    """``run --template prompteol`` stores the decoder's results as the mteb experiment
    ``template_prompteol`` of the model: a plain run before it is neither skipped into nor overwritten."""
    results = tmp_path / "results"
    common = ["--model", tiny_model_dir("llama"), "--local-task", f"{local_sts}=STS", "--results", results]
    assert _cli(["run", *common]) == 0
    assert _cli(["run", *common, "--template", "prompteol"]) == 0
    variants = {v.experiment: v for v in load_variants(results)}
    assert set(variants) == {None, "template_prompteol"}
    assert variants["template_prompteol"].experiment_kwargs == {"template": "prompteol"}
    plain, templated = (variants[k].tasks["tinysts"].subsets[0] for k in (None, "template_prompteol"))
    assert templated["layer_dynamics"]["template"] == 'This sentence : "{text}" means in one word:"'
    assert "template" not in plain["layer_dynamics"] and plain["main_score"] != templated["main_score"]
    with pytest.raises(ValueError, match="exactly once"):
        _cli(["run", *common, "--template", "no slot"])


def test_prune_without_output_labels_its_lines_with_the_model_not_a_temporary_folder(
    tiny_st_dir, local_sts, tmp_path, capsys
):
    common = ["--local-task", f"{local_sts}=STS", "--results", tmp_path / "results", "--batch-size", 4]
    assert _cli(["prune", "--model", tiny_st_dir, "--blocks", "1", *common]) == 0
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if "\tmain=" in line]
    assert line.startswith(f"{tiny_st_dir} without blocks [1]\ttinysts\tmain=")
    assert "partial" not in out and "mteb-lrd-pruned" not in out
