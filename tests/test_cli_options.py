"""One list syntax and one set of task names across every ``mteb-lrd`` command."""

from __future__ import annotations

import argparse

import pytest

from mteb_lrd.cli import build_parser
from mteb_lrd.cli.options import ListAction
from mteb_lrd.tasks.task_names import canonical_task_name

# command, the extra arguments it needs, the list option's spellings, the namespace field
LIST_OPTIONS = [
    ("run", [], ("--task", "--tasks"), "task"),
    ("run", [], ("--model", "--models"), "model"),
    ("prune", [], ("--task", "--tasks"), "task"),
    ("prune", [], ("--blocks", "--block"), "blocks"),
    ("report", [], ("--task", "--tasks"), "task"),
    ("select", ["--out", "x"], ("--tasks", "--task"), "tasks"),
    ("select", ["--out", "x"], ("--models", "--model"), "models"),
    ("prune-study", ["--out", "x"], ("--tasks", "--task"), "tasks"),
    ("prune-study", ["--out", "x"], ("--models", "--model"), "models"),
    ("dysem", ["--model", "m"], ("--tasks", "--task"), "tasks"),
]


@pytest.mark.parametrize(("command", "extra", "flags", "dest"), LIST_OPTIONS)
def test_every_list_option_accepts_repeats_spaces_commas_and_both_spellings(command, extra, flags, dest):
    parser = build_parser()
    values = ["1", "2", "3"] if dest == "blocks" else ["A", "B", "C"]
    single, plural = flags
    spellings = [
        [single, values[0], single, values[1], single, values[2]],
        [single, *values],
        [plural, ",".join(values)],
        [plural, f"{values[0]},{values[1]}", single, values[2]],
    ]
    parsed = [getattr(parser.parse_args([command, *extra, *argv]), dest) for argv in spellings]
    expected = [int(v) for v in values] if dest == "blocks" else values
    assert all(p == expected for p in parsed), parsed


def test_a_given_list_replaces_the_default():
    parser = build_parser()
    assert parser.parse_args(["prune-study", "--out", "x"]).budgets == [0.05, 0.10, 0.15, 0.20, 0.25]
    assert parser.parse_args(["prune-study", "--out", "x", "--budget", "0.1,0.3"]).budgets == [0.1, 0.3]


def test_bad_items_are_named(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["dysem", "--model", "m", "--grid-k", "128,-1"])
    assert "invalid value '-1'" in capsys.readouterr().err


def test_rule_has_choices(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["prune", "--rule", "best"])
    assert "choose from 'frenet', 'nrs', 'gfmi', 'composite'" in capsys.readouterr().err


def test_every_list_option_of_every_command_uses_the_one_syntax():
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in commands.choices.items():
        for action in sub._actions:
            assert action.nargs not in ("+", "*") or isinstance(action, ListAction), (name, action.dest)
            assert not isinstance(action, argparse._AppendAction), (name, action.dest)


def test_the_same_task_names_in_every_command():
    from mteb_lrd.cli.dysem import _short_task_name
    from mteb_lrd.tasks.shared_tasks import SHARED_STS

    for local, entry in SHARED_STS.items():
        assert canonical_task_name(entry.short) == canonical_task_name(local) == local
        assert _short_task_name(local) == _short_task_name(entry.short) == entry.short
    assert canonical_task_name("demo") == "LocalSTSBenchmarkDemo"
    assert canonical_task_name("SomeMTEBTask") == "SomeMTEBTask"


def test_run_scale_options_reach_the_wrapper_options():
    from mteb_lrd.cli.run import extraction_cache, lrd_options

    parser = build_parser()
    args = parser.parse_args(["run", "--per-layer-layers", "last:4", "--spill-dir", "/scratch", "--dtype",
                              "float16", "--no-cache", "--store-dtype", "float16"])  # fmt: skip
    options = lrd_options(args)
    assert options["per_layer_layers"] == "last:4" and options["spill_dir"] == "/scratch"
    assert options["dtype"] == "float16" and options["store_dtype"] == "float16"
    assert extraction_cache("model", args) == (None, False)
    assert "dtype" not in lrd_options(parser.parse_args(["run"]))
    assert lrd_options(parser.parse_args(["run"]))["per_layer_layers"] == "auto"
    with pytest.raises(ValueError, match="per_layer_layers"):
        lrd_options(parser.parse_args(["run", "--per-layer-layers", "every:0"]))
    with pytest.raises(ValueError, match="--no-cache and --cache-dir"):
        lrd_options(parser.parse_args(["run", "--no-cache", "--cache-dir", "c"]))


def test_ray_units_get_the_cache_choice(tmp_path):
    from mteb_lrd.cli.executor import run_on_ray
    from mteb_lrd.cli.run import lrd_options

    seen = {}

    def fake_run_units(units, config, resources=None, **kwargs):
        seen["config"] = config
        return []

    import mteb_lrd.runners.distributed as distributed

    parser = build_parser()
    for argv, cache, cache_dir in ((["--no-cache"], False, None), (["--cache-dir", "shared"], True, "shared"),
                                   ([], True, None)):  # fmt: skip
        args = parser.parse_args(["run", "--executor", "ray", "--task", "demo", *argv])
        original = distributed.run_units
        distributed.run_units = fake_run_units
        try:
            run_on_ray(args, ["default"], lrd_options(args))
        finally:
            distributed.run_units = original
        assert seen["config"].cache is cache and seen["config"].options.get("cache_dir") == cache_dir


def test_progress_bars_follow_the_terminal_and_quiet(monkeypatch):
    import sys

    from mteb_lrd.cli.options import show_progress

    parser = build_parser()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert show_progress(parser.parse_args(["run", "--task", "demo"])) is True
    assert show_progress(parser.parse_args(["-q", "run", "--task", "demo"])) is False
    assert show_progress(parser.parse_args(["profile", "--texts", "t.jsonl", "--no-progress"])) is False
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert show_progress(parser.parse_args(["dysem", "--model", "m"])) is False  # a log file: no bars
    assert show_progress(parser.parse_args(["dysem", "--model", "m", "--progress"])) is True
    assert show_progress(parser.parse_args(["-q", "dysem", "--model", "m", "--progress"])) is False


def test_progress_lines_are_info_records_shown_by_default(capsys):
    import logging

    from mteb_lrd.cli import main

    package = logging.getLogger("mteb_lrd")
    before = package.level
    try:
        for flags, level in (([], logging.INFO), (["-q"], logging.WARNING), (["-v"], logging.DEBUG)):
            assert main([*flags, "panel", "list", "--json"]) == 0
            assert package.level == level, flags
    finally:
        package.setLevel(before)
    capsys.readouterr()
