"""The ``mteb-lrd dysem`` command: argument parsing and errors that come before any model is loaded."""

from __future__ import annotations

import argparse

import pytest

from mteb_lrd.cli import dysem


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    dysem.register(parser.add_subparsers())
    return parser.parse_args(["dysem", *argv])


def test_defaults_and_help_examples():
    args = parse("--model", "m")
    assert (args.k, args.num_languages, args.value, args.prompt, args.language_order) == (
        1024,
        4,
        "source",
        "EP",
        "agreement",
    )
    assert args.func is dysem.run and "mteb-lrd dysem" in dysem.EPILOG


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "m", "--tasks", "STS99"], "unknown tasks"),
        (["--model", "m", "--k", "0"], "--k must be positive"),
        (["--model", "/no/such/folder"], "neither a folder nor a panel name"),
    ],
)
def test_bad_arguments_fail_early_with_a_clear_message(argv, message):
    with pytest.raises(ValueError, match=message):
        dysem.run(parse(*argv))


def test_grid_values_must_be_positive_integers():
    with pytest.raises(SystemExit):
        parse("--model", "m", "--grid-k", "64,zero")


def test_the_dtype_reaches_the_study_options_and_a_bad_one_is_refused(capsys):
    assert dysem.options_from_args(parse("--model", "m", "--dtype", "bfloat16")).dtype == "bfloat16"
    assert dysem.options_from_args(parse("--model", "m")).dtype is None
    with pytest.raises(SystemExit):
        parse("--model", "m", "--dtype", "float8")
    assert "invalid choice: 'float8'" in capsys.readouterr().err
