"""``mteb-lrd select``: label-free model selection on a set of models and tasks."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mteb_lrd.parameters import Caps
    from mteb_lrd.studies.options import CellOptions

__all__ = [
    "add_lrd_study_arguments",
    "add_study_output_arguments",
    "add_study_task_arguments",
    "build_study_tasks",
    "cell_options",
    "register",
    "run",
    "study_caps",
    "study_models",
    "study_records",
]

from mteb_lrd.cli.options import add_install_option, add_list_option, path_arg

EPILOG = """\
examples:
  mteb-lrd select --out results/selection                       # the whole offline panel, all study tasks
  mteb-lrd select --models all-MiniLM-L6-v2,all-mpnet-base-v2,smollm2-135m,gemma-3-270m \\
      --tasks STSBenchmark,SICK-R,DrugReviewSentiment --max-pairs 200 --out results/sel
  mteb-lrd select --models default,./my-st-model,./other-model --tasks STSBenchmark --max-pairs 40 --out results/sel
  mteb-lrd select --models ./my-st-model ./other-model --report-only --out results/sel
  mteb-lrd select --models default,./my-st-model,./other-model --tasks STSBenchmark --max-pairs 40 \\
      --reproduce authors --scores-from results/sel --out results/sel-authors    # MTEB scores read from results/sel

Each (model, task) cell is recorded in OUT/records as soon as it finishes; a rerun resumes.
The report is OUT/selection.md + selection.html + scatter_*.png; OUT/selection.json has every number.
Full size (the reference's per-family caps are the default): --max-pairs 0 --max-train 0 --max-test 0.
The authors' definitions and extraction: --reproduce authors (recorded in every cell).
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


def add_lrd_study_arguments(parser: argparse.ArgumentParser) -> None:
    """LRD sampling and fidelity options shared by ``select`` and ``prune-study``."""
    parser.add_argument(
        "--caps",
        nargs=3,
        type=int,
        default=[1000, 1000, 5000],
        metavar=("FRENET", "NRS", "GFMI"),
        help="texts per task for each family, 0 = all (default the reference's 1000 1000 5000)",
    )
    parser.add_argument(
        "--text-cap", type=int, default=None, help="one cap for all three families (overrides --caps)"
    )
    parser.add_argument(
        "--reproduce",
        choices=["ours", "authors"],
        default="ours",
        help="'authors': their summary definitions, decoder last-token rule, pooling overrides, no LRD "
        "prompt and partial Pearson on log(dim) (default: ours)",
    )
    parser.add_argument(
        "--text-order",
        choices=["interleaved", "columns"],
        default="interleaved",
        help="pair tasks' text order before sub-sampling (default: rows interleaved, as the authors)",
    )
    parser.add_argument(
        "--lrd-prompt",
        choices=["mteb", "none"],
        default="mteb",
        help="prompt of the LRD extraction: the one mteb's run uses (default) or none",
    )
    parser.add_argument(
        "--decoder-template",
        default="none",
        metavar="TEMPLATE",
        help="text template of plain decoders, for scoring and LRD alike: 'prompteol' (PromptEOL, "
        "pooled at its last token), a text with one {text}, or 'none' (default: bare texts, which a "
        "bare decoder does not embed: SmolLM2-135M scores rho -0.04 on STS12)",
    )


def add_study_output_arguments(parser: argparse.ArgumentParser) -> None:
    """``--batch-size``, ``--out``, ``--report-only`` and ``--install``: the last arguments of ``select``
    and ``prune-study``."""
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--out", "--output", required=True, type=path_arg, help="study folder (records + report)"
    )
    parser.add_argument("--report-only", action="store_true", help="only rebuild the report from the records")
    add_install_option(parser)


def study_records(out: Path) -> list[dict[str, Any]]:
    """The cell records of the study folder ``out``.

    Raises:
        ValueError: when it holds none.
    """
    from mteb_lrd.studies.records import load_records

    records = load_records(out)
    if not records:
        raise ValueError(f"no records in {out}/records")
    return records


def cell_options(args: argparse.Namespace) -> CellOptions:
    """The study options of ``select`` / ``prune-study`` from their shared arguments."""
    from mteb_lrd.studies.options import CellOptions

    return CellOptions(caps=study_caps(args), seed=args.seed, batch_size=args.batch_size,
                       max_length=args.max_length, reproduce=args.reproduce, text_order=args.text_order,
                       prompt_policy=args.lrd_prompt, decoder_template=args.decoder_template)  # fmt: skip


def study_caps(args: argparse.Namespace) -> Caps:
    """The :class:`~mteb_lrd.parameters.Caps` named by :func:`add_lrd_study_arguments` options."""
    from mteb_lrd.parameters import Caps

    values = [args.text_cap] * 3 if args.text_cap is not None else list(args.caps)
    return Caps(*[v or None for v in values])


def study_models(specs: list[str]) -> list[str]:
    """Panel names as they are (the studies know their family and size); ``default``, known Hub ids and
    folders as the folders :func:`mteb_lrd.models.loading.resolve_model_path` gives (the names of ``run``)."""
    from mteb_lrd.models.loading import resolve_model_path
    from mteb_lrd.models.panel import PANEL

    return [spec if spec in PANEL else str(resolve_model_path(spec)) for spec in specs]


def build_study_tasks(args: argparse.Namespace) -> dict[str, type]:
    """The task classes named by :func:`add_study_task_arguments` options."""
    from mteb_lrd.studies.tasks import TaskSizes, study_tasks
    from mteb_lrd.tasks.task_names import canonical_task_name

    sizes = TaskSizes(max_pairs=args.max_pairs or None, max_train=args.max_train or None,
                      max_test=args.max_test or None, seed=args.seed)  # fmt: skip
    return study_tasks([canonical_task_name(name) for name in args.tasks] if args.tasks else None, sizes,
                       data_dir=args.data_dir, install=getattr(args, "install", False))  # fmt: skip


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``select`` subcommand."""
    from mteb_lrd.models.panel import PANEL

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
    add_lrd_study_arguments(parser)
    parser.add_argument("--scores-from", type=path_arg, default=None, metavar="STUDY",
                        help="read each cell's MTEB main score from this study folder's (or its tidy record "
                        "file's: mteb-lrd report --export-records) record of the same cell "
                        "(same texts, template and truncation) instead of scoring it again: the score does not "
                        "depend on the LRD options, e.g. --reproduce authors beside a finished study")  # fmt: skip
    add_study_output_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``mteb-lrd select``; returns the exit code."""
    from mteb_lrd.report.studies import write_selection_report
    from mteb_lrd.studies.records import write_record
    from mteb_lrd.studies.selection import HEADLINE_SCORES, run_selection_study
    from mteb_lrd.studies.selection_analysis import analyse_selection

    out = Path(args.out)
    if args.scores_from is not None and not Path(args.scores_from).exists():
        raise ValueError(f"--scores-from {args.scores_from}: no such study folder or tidy record file")
    if not args.report_only:
        run_selection_study(study_models(args.models), build_study_tasks(args), out, cell_options(args),
                            scores_from=args.scores_from)  # fmt: skip
    analysis = analyse_selection(study_records(out))
    write_record(out / "selection.json", analysis)
    print(write_selection_report(analysis, out, HEADLINE_SCORES))
    return 0
