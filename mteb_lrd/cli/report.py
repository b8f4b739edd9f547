"""``mteb-lrd report``: variant-aware leaderboard, figures and a self-contained HTML page."""

from __future__ import annotations

import argparse
import logging
import sys

from mteb_lrd.cli.options import add_list_option, path_arg

__all__ = ["register", "run"]

logger = logging.getLogger(__name__)

EPILOG = """examples:
  mteb-lrd report results/ --out reports/           # after `mteb-lrd run --task demo`
  mteb-lrd report                                   # ./results -> ./reports
  mteb-lrd report results/ --out reports/demo --task LocalSTSBenchmarkDemo   # only these task columns
  mteb-lrd report --training out/eval/layer_dynamics_evaluation_dev_results.csv --out reports/
      # a training run: the LayerDynamicsEvaluator's CSV or a trainer_state.json -> reports/training.png
  mteb-lrd report --export-records results/select --out docs/records    # a study folder -> docs/records/select.csv
      # (an existing select.csv keeps its other cells: the folder's cells replace or join them)
  mteb-lrd report --records docs/records --out docs/   # docs/results.md from the committed tidy records

Writes report.html (self-contained: figures and the CSV / JSON tables embedded), leaderboard.md,
leaderboard.csv / .json (one row per model or pruned variant: never averaged together), tasks.csv /
.json (one row per variant and task, with mteb version, date, revision and n_used) and figures/*.png.
A result file that cannot be read is named in a warning and in the report (it is in no mean);
--strict makes it an error instead.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``report`` subcommand."""
    parser = subparsers.add_parser(
        "report",
        help="leaderboard, figures and a self-contained HTML page from a results folder",
        description="Build a variant-aware report (HTML, Markdown, CSV, JSON, PNG) from an mteb results folder.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("results_folder", nargs="?", default=None, type=path_arg, metavar="RESULTS",
                        help="results folder (default ./results)")  # fmt: skip
    parser.add_argument(
        "--results", default=None, type=path_arg, help="results folder (same as the positional argument)"
    )
    parser.add_argument("--out", "--output", dest="output", default="reports", type=path_arg,
                        help="report folder (default ./reports)")  # fmt: skip
    add_list_option(parser, "--task", "--tasks", dest="task", default=None, metavar="NAME",
                    help="task columns, in order (default: all)")  # fmt: skip
    parser.add_argument(
        "--strict", action="store_true", help="fail on an unreadable result file instead of warning"
    )
    parser.add_argument("--export-records", default=None, type=path_arg, metavar="STUDY",
                        help="write a select / prune-study folder's records as one tidy CSV <out>/<STUDY name>.csv "
                             "(merged into an existing one: its cells not in the folder are kept)")  # fmt: skip
    parser.add_argument("--records", default=None, type=path_arg, metavar="FOLDER",
                        help="write <out>/results.md from the tidy study records in FOLDER")  # fmt: skip
    parser.add_argument("--training", default=None, type=path_arg, metavar="LOG",
                        help="plot a training run instead: the LayerDynamicsEvaluator's CSV "
                        "or a trainer_state.json")  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``mteb-lrd report``; returns the exit code."""
    special = [flag for flag in ("training", "export_records", "records") if getattr(args, flag) is not None]
    if special:
        if len(special) > 1 or args.results_folder or args.results:
            raise ValueError(
                "--training, --export-records and --records each stand alone: give one, without a results folder"
            )
        print(_special(special[0], args))
        return 0
    from mteb_lrd.report import write_report
    from mteb_lrd.tasks.task_names import canonical_task_name

    if args.results_folder and args.results and args.results_folder != args.results:
        raise ValueError(
            f"two results folders given ({args.results_folder} and --results {args.results}); give one"
        )
    results = args.results_folder or args.results or "results"
    # unreadable files are printed below, one per line, instead of as one Python warning
    tasks = [canonical_task_name(t) for t in args.task] if args.task else None
    paths = write_report(results, args.output, tasks, strict=args.strict, warn=False)
    for problem in paths["unreadable"]:
        print(f"mteb-lrd report: warning: left out {problem}", file=sys.stderr)
    if paths["unreadable"]:
        print(
            f"mteb-lrd report: warning: {len(paths['unreadable'])} unreadable result file(s) are in no score "
            "or mean of this report (listed in it too)",
            file=sys.stderr,
        )
    print(paths["html"])
    for key in ("markdown", "csv", "json", "tasks_csv", "tasks_json"):
        print(paths[key])
    for figure in paths["figures"]:
        print(figure)
    return 0


def _special(flag: str, args: argparse.Namespace) -> object:
    """Run one of the stand-alone report modes; returns the path it wrote."""
    from pathlib import Path

    if flag == "training":
        from mteb_lrd.report.training_figure import write_training_figure

        return write_training_figure(args.training, args.output)
    if flag == "records":
        from mteb_lrd.report.results_document import write_results

        return write_results(args.records, args.output)
    from mteb_lrd.studies.records import load_records
    from mteb_lrd.studies.tidy import merge_rows, read_rows, tidy_rows, write_rows

    study = Path(args.export_records)
    records = load_records(study)
    if not records:
        raise ValueError(f"no cell records in {study}/records: not a select or prune-study folder")
    target = Path(args.output) / f"{study.name}.csv"
    rows = tidy_rows(records, study.name)
    if target.exists():
        rows = merge_rows(read_rows(target), rows)
        logger.info("%s: %d cell(s) from %s merged into the file's cells", target, len(records), study)
    return write_rows(target, rows)
