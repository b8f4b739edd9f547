"""``mteb-lrd report``: leaderboard (Markdown + self-contained HTML) and layer-profile figures."""

from __future__ import annotations

import argparse

from mteb_lrd.cli.options import add_list_option, path_arg

__all__ = ["register", "run"]

EPILOG = """examples:
  mteb-lrd report                                   # ./results -> ./reports
  mteb-lrd report results/ --out reports/
  mteb-lrd report --results runs/faq --output reports/faq --task faq

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
    parser.add_argument("results_folder", nargs="?", default=None, type=path_arg, metavar="RESULTS",
                        help="results folder (same as --results)")  # fmt: skip
    parser.add_argument("--results", default=None, type=path_arg, help="results folder (default ./results)")
    parser.add_argument("--output", "--out", default="reports", type=path_arg,
                        help="report folder (default ./reports)")  # fmt: skip
    add_list_option(parser, "--task", "--tasks", dest="task", default=None, metavar="NAME",
                    help="task columns, in order (default: all)")  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``mteb-lrd report``; returns the exit code."""
    from mteb_lrd.cli.resolve import canonical_task_name
    from mteb_lrd.report import write_report

    if args.results_folder and args.results and args.results_folder != args.results:
        raise ValueError(f"two results folders given: {args.results_folder} and --results {args.results}")
    results = args.results_folder or args.results or "results"
    tasks = [canonical_task_name(t) for t in args.task] if args.task else None
    paths = write_report(results, args.output, tasks)
    print(f"{paths['markdown']}\n{paths['html']}")
    for figure in paths["figures"]:  # type: ignore[attr-defined]  # a list of paths
        print(figure)
    return 0
