"""The ``mteb-lrd`` command line: one sub-command per module of this package (thin: parse, call, print)."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

__all__ = ["COMMANDS", "ERRORS", "build_parser", "main"]

# sub-command modules, in the order `--help` lists them
COMMANDS: tuple[str, ...] = (
    "run",
    "profile",
    "prune",
    "report",
    "panel",
    "select",
    "prune_study",
    "dysem",
)

EPILOG = """examples:
  mteb-lrd run --task demo                          # all-MiniLM-L6-v2 on the bundled STS sample, via MTEB
  mteb-lrd profile --model path/to/model --texts corpus.jsonl --out lrd.json
  mteb-lrd prune --model path/to/model --blocks 2 3 --tasks STSBenchmark
  mteb-lrd report results/ --out reports/
  mteb-lrd panel prepare --all                      # install the offline model panel
  mteb-lrd select --out results/selection           # label-free model selection over the panel
  mteb-lrd prune-study --out results/prune          # layer-pruning study
  mteb-lrd dysem --model gemma-3-270m               # DySem STS over multilingual-consensus dimensions

`mteb-lrd <command> --help` shows the options and examples of one command.
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="mteb-lrd",
        description="Layer-wise representation dynamics (LRD) and DySem for MTEB models.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bars (they are shown by default when stderr is a terminal)",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"mteb_lrd.cli.{name}").register(subparsers)
    return parser


ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    ValueError,
    TypeError,
    KeyError,
    ImportError,
    RuntimeError,
)
"""Exceptions printed as one line (``-v`` shows the traceback instead)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse ``argv``, check outputs, run the chosen command; errors print one line, exit 2.

    Before any model is loaded, every output folder / file is checked for writability, model paths
    for existence and (offline) Hub tasks for availability; then any ``OSError``, ``ValueError``,
    ``TypeError``, ``KeyError``, ``ImportError`` or ``RuntimeError`` prints
    ``mteb-lrd <command>: error: <what, naming the path>`` on stderr.
    """
    from mteb_lrd.cli.checks import error_line, preflight

    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    # the package's progress lines are INFO records: shown by default, hidden by -q, details by -v
    logging.getLogger("mteb_lrd").setLevel(
        logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    )
    try:
        preflight(args)
        if getattr(args, "install", False):
            from mteb_lrd.cli.checks import model_specs
            from mteb_lrd.models.loading import install_panel_models

            install_panel_models(model_specs(args))
        return int(args.func(args) or 0)
    except ERRORS as err:
        if args.verbose:
            raise
        print(f"mteb-lrd {args.command}: error: {error_line(err)}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
