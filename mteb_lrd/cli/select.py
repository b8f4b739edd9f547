"""``mteb-lrd select``: label-free model selection on a set of models and tasks."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mteb_lrd.cli.options import add_list_option, path_arg

__all__ = ["register", "run", "add_study_task_arguments", "build_study_tasks", "study_models"]

EPILOG = """\
examples:
  mteb-lrd select --out results/selection                       # the whole offline panel, all study tasks
  mteb-lrd select --models all-MiniLM-L6-v2,all-mpnet-base-v2,smollm2-135m,gemma-3-270m \\
      --tasks STSBenchmark,SICK-R,DrugReviewSentiment --max-pairs 200 --out results/sel
  mteb-lrd select --models default,./my-st-model,./other-model --tasks STSBenchmark --max-pairs 40 --out results/sel
  mteb-lrd select --models ./my-st-model ./other-model --report-only --out results/sel

Each (model, task) cell is recorded in OUT/records as soon as it finishes; a rerun resumes.
The report is OUT/selection.md + selection.html + scatter_*.png; OUT/selection.json has every number.
Full size on a GPU: --max-pairs 0 --max-train 0 --max-test 0 --text-cap 1000.
"""


def add_study_task_arguments(parser: argparse.ArgumentParser, default_pairs: int, default_test: int) -> None:
    """Task-set options shared by ``select`` and ``prune-study``."""
    from mteb_lrd.studies.tasks import CLASSIFICATION_TASKS, STS_TASKS

    names = [*STS_TASKS, *CLASSIFICATION_TASKS]
    add_list_option(parser, "--tasks", "--task", dest="tasks", default=None, metavar="TASK",
                    help=f"study tasks (default all): {', '.join(names)} (STS sets also by their short names, "
                    "e.g. STSBenchmark)")  # fmt: skip
    parser.add_argument(
        "--max-pairs",
        type=int,
        default=default_pairs,
        help="STS pairs per task, 0 = all (default %(default)s)",
    )
    parser.add_argument(
        "--max-train", type=int, default=300, help="classification train rows, 0 = all (default %(default)s)"
    )
    parser.add_argument(
        "--max-test",
        type=int,
        default=default_test,
        help="classification test rows, 0 = all (default %(default)s)",
    )
    parser.add_argument(
        "--data-dir", default=None, type=path_arg, help="where sub-sampled task folders are written"
    )
    parser.add_argument("--seed", type=int, default=42, help="sub-sampling seed (default 42)")
    parser.add_argument(
        "--max-length", type=int, default=512, help="token truncation for every model (default 512)"
    )


def study_models(specs: list[str]) -> list[str]:
    """Panel names as they are (the studies know their family and size); ``default``, known Hub ids and
    folders as the folders :func:`mteb_lrd.cli.resolve.resolve_model_path` gives (the names of ``run``)."""
    from mteb_lrd.cli.resolve import resolve_model_path
    from mteb_lrd.studies.panel import PANEL

    return [spec if spec in PANEL else str(resolve_model_path(spec)) for spec in specs]


def build_study_tasks(args: argparse.Namespace) -> dict[str, type]:
    """The task classes named by :func:`add_study_task_arguments` options."""
    from mteb_lrd.cli.resolve import canonical_task_name
    from mteb_lrd.studies.tasks import study_tasks

    return study_tasks(
        [canonical_task_name(name) for name in args.tasks] if args.tasks else None,
        data_dir=args.data_dir,
        max_pairs=args.max_pairs or None,
        max_train=args.max_train or None,
        max_test=args.max_test or None,
        seed=args.seed,
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``select`` subcommand."""
    from mteb_lrd.studies.panel import PANEL

    parser = subparsers.add_parser(
        "select",
        help="label-free model selection: correlate LRD scores with MTEB scores across models",
        description="Per task, Spearman ρ across models between label-free scores (d0L, NRS, GFMI, RankMe, "
        "α-ReQ) and the MTEB main score; summaries over tasks, partial correlations and leave-one-family-out.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_list_option(parser, "--models", "--model", dest="models", default=list(PANEL), metavar="MODEL",
                    help="panel names or model folders (default: the panel)")  # fmt: skip
    add_study_task_arguments(parser, default_pairs=200, default_test=200)
    parser.add_argument(
        "--text-cap", type=int, default=500, help="texts per task for the LRD metrics (default %(default)s)"
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--out", "--output", required=True, type=path_arg, help="study folder (records + report)"
    )
    parser.add_argument("--report-only", action="store_true", help="only rebuild the report from the records")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``mteb-lrd select``; returns the exit code."""
    from mteb_lrd.report.studies import write_selection_report
    from mteb_lrd.studies.runner import load_records, write_record
    from mteb_lrd.studies.selection import HEADLINE_SCORES, run_selection_study
    from mteb_lrd.studies.selection_analysis import analyse_selection

    out = Path(args.out)
    try:
        if not args.report_only:
            run_selection_study(
                study_models(args.models),
                build_study_tasks(args),
                out,
                text_cap=args.text_cap,
                seed=args.seed,
                batch_size=args.batch_size,
                max_length=args.max_length,
            )
    except (ValueError, KeyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    records = load_records(out)
    if not records:
        print(f"error: no records in {out}/records", file=sys.stderr)
        return 2
    analysis = analyse_selection(records)
    write_record(out / "selection.json", analysis)
    print(write_selection_report(analysis, out, HEADLINE_SCORES))
    return 0
