"""``mteb-lrd report``: leaderboard (Markdown + self-contained HTML) and layer-profile figures."""

from __future__ import annotations

import argparse

__all__ = ["register", "run"]

EPILOG = """examples:
  mteb-lrd report                                   # ./results -> ./reports
  mteb-lrd report --results runs/faq --output reports/faq --task LocalSTSBenchmark --task LocalSICK-R

Writes leaderboard.md, report.html (figures embedded) and figures/<model>.png: one row per model
or pruned variant (variants are never averaged together), each task's main score x 100, the mean,
and the LRD model-level scores averaged over tasks (d0L first).
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``report`` subcommand."""
    parser = subparsers.add_parser(
        "report",
        help="leaderboard and layer-profile figures from a results folder",
        description="Build a leaderboard-style report from an mteb results folder.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--results", default="results", help="results folder (default ./results)")
    parser.add_argument("--output", default="reports", help="report folder (default ./reports)")
    parser.add_argument("--task", action="append", default=None, help="task columns, in order (default: all)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``mteb-lrd report``; returns the exit code."""
    from mteb_lrd.report import write_report

    paths = write_report(args.results, args.output, args.task)
    print(f"{paths['markdown']}\n{paths['html']}")
    for figure in paths["figures"]:
        print(figure)
    return 0
