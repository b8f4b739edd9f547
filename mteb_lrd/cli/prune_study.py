"""``mteb-lrd prune-study``: LRD-guided layer pruning against baselines, scored by MTEB."""

from __future__ import annotations

import argparse
from pathlib import Path

from mteb_lrd.cli.options import add_list_option
from mteb_lrd.cli.select import (
    add_lrd_study_arguments,
    add_study_output_arguments,
    add_study_task_arguments,
    build_study_tasks,
    cell_options,
    study_models,
    study_records,
)

__all__ = ["register", "run"]

EPILOG = """\
examples:
  mteb-lrd prune-study --models all-mpnet-base-v2,smollm2-135m,gemma-3-270m \\
      --tasks STSBenchmark,SICK-R,STS15,STS16,DrugReviewSentiment --out results/prune
  mteb-lrd prune-study --models all-mpnet-base-v2 --mapping producer --out results/prune-producer
  mteb-lrd prune-study --models ./my-deep-model --tasks STS15 --max-pairs 40 --budgets 0.25 --out results/prune
  mteb-lrd prune-study --models smollm2-135m --decoder-template prompteol --tasks STS12 --out results/prune-eol
  mteb-lrd prune-study --models all-mpnet-base-v2 --all-subsets 1,2 --max-pairs 0 --out results/prune-all
  mteb-lrd prune-study --report-only --out results/prune

Methods: frenet, nrs, gfmi, composite (spec §6 rule scores), random (seeds 0-9,
random.Random(seed).sample as the authors), last-k,
shortgpt (block influence, masked, fp32), angular (Gromov et al., contiguous run).
Candidates protect --protect layers at each end; budgets default to 5/10/15/20/25 %.
--mapping reference (default): hidden-state id l -> block l (as the reference code);
--mapping producer: id l -> block l-1 (the block that produces h_l).
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``prune-study`` subcommand."""
    parser = subparsers.add_parser(
        "prune-study",
        help="layer pruning: LRD rules vs Random / last-k / ShortGPT / angular, scored by MTEB",
        description="Score every pruned variant with MTEB (blocks physically removed) and report the score "
        "change per budget and method, with bootstrap intervals, Wilcoxon tests against Random and speed-ups.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_list_option(parser, "--models", "--model", dest="models", metavar="MODEL",
                    default=["all-mpnet-base-v2", "smollm2-135m", "gemma-3-270m"],
                    help="panel names or folders (>= 8 layers)")  # fmt: skip
    add_study_task_arguments(parser, default_pairs=150, default_test=150)
    add_list_option(parser, "--budgets", "--budget", dest="budgets", item_type=float, metavar="B",
                    default=[0.05, 0.10, 0.15, 0.20, 0.25], help="pruning budgets (fractions)")  # fmt: skip
    parser.add_argument("--protect", type=int, default=3, help="layers kept at each end (default 3)")
    parser.add_argument("--mapping", choices=["reference", "producer"], default="reference")
    add_list_option(parser, "--all-subsets", dest="all_subsets", item_type=int, metavar="SIZE", default=[],
                    help="also score every candidate block set of these sizes (e.g. 1,2) and rank each "
                    "method's choice among them; resumable, hours of CPU for 7 candidates")  # fmt: skip
    parser.add_argument("--separate-passes", action="store_true",
                        help="encode each pruned variant on its own instead of all of a model's variants from "
                        "the blocks they share (the same vectors, slower)")  # fmt: skip
    add_lrd_study_arguments(parser)
    add_study_output_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``mteb-lrd prune-study``; returns the exit code."""
    from mteb_lrd.report.studies import write_prune_report
    from mteb_lrd.studies.options import PruneStudyOptions
    from mteb_lrd.studies.pruning import run_prune_study
    from mteb_lrd.studies.pruning_analysis import analyse_pruning
    from mteb_lrd.studies.records import write_record

    out = Path(args.out)
    if not args.report_only:
        options = PruneStudyOptions(budgets=tuple(args.budgets), protect=args.protect, mapping=args.mapping,
                                    all_subsets=tuple(args.all_subsets),
                                    shared_prefix=not args.separate_passes)  # fmt: skip
        run_prune_study(study_models(args.models), build_study_tasks(args), out, cell_options(args), options)
    analysis = analyse_pruning(study_records(out))
    write_record(out / "pruning.json", analysis)
    print(write_prune_report(analysis, out))
    return 0
