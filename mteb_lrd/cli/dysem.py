"""``mteb-lrd dysem``: DySem against its baselines on STS tasks, as a table like the paper's.

Only the argument parsing lives here; the study itself is :func:`mteb_lrd.dysem.study.run_study`.
"""

from __future__ import annotations

import argparse

from mteb_lrd.cli.options import add_install_option, add_list_option, path_arg, positive_int, show_progress
from mteb_lrd.dysem.study import run_study
from mteb_lrd.dysem.study_options import AUTO, StudyOptions
from mteb_lrd.dysem.study_options import DEFAULT_TASKS as _TASKS

__all__ = ["register", "run", "options_from_args"]

DEFAULT_TASKS = list(_TASKS)

EPILOG = """\
examples:
  mteb-lrd dysem --model qwen2.5-coder-0.5b --select-on-dev --max-pairs 300
  mteb-lrd dysem --model gemma-3-270m --languages en,de,fr,es --num-languages 3 --k 256 --value mean
  mteb-lrd dysem --model path/to/llama --prompt LP --tasks STSBenchmark,STSBenchmark-de
  mteb-lrd dysem --model smollm2-135m --language-order labels   # the reference's order (uses dev labels; warns)
  # a study too long for one run, in chunks of test pairs (on one machine or several), then joined:
  mteb-lrd dysem --model path/to/llama --max-pairs 20 --rows 0:10 --output-dir chunks
  mteb-lrd dysem --model path/to/llama --max-pairs 20 --rows 10:20 \
      --choices-from chunks/dysem-llama-rows0-10.json --output-dir chunks
  mteb-lrd dysem --assemble chunks --output-dir chunks/joined

Costs: every text is encoded once as is and once per language (the candidates while ordering, L
after). On a CPU the defaults are sized for minutes (SmolLM2-135M, 2 cores: a few minutes), with a
GPU for the full study; a line before each stage says how many forward passes it makes.

The model is a panel name (see `mteb-lrd panel list`) or a folder of a transformers causal LM.
Translations come from the parallel STS Benchmark data in the shared STS folder; tasks whose texts
it does not cover (STS12-16, SICK-R) get the source-only DySem row (L = 1) unless --translator
points at an NLLB-style seq2seq model. k, L and the value vector are chosen on the STS Benchmark
dev split with --select-on-dev, never on test data. Results are stored as MTEB results under
--output-dir/results; the table and a JSON summary go to --output-dir.
"""


def _short_task_name(name: str) -> str:
    """DySem's STS names are the short ones; the ``Local`` names of the other commands mean the same sets."""
    return name.removeprefix("Local") if name.startswith("LocalSTS") or name == "LocalSICK-R" else name


def _pairs(text: str) -> int | str | None:
    """``--max-pairs``: a positive integer, ``all`` (``None``) or ``auto``."""
    return None if text == "all" else _count(text)


def _rows(text: str) -> tuple[int, int]:
    """``--rows``: ``START:STOP`` with 0 <= START < STOP."""
    start, sep, stop = text.partition(":")
    try:
        rows = (int(start), int(stop))
    except ValueError:
        rows = None
    if not sep or rows is None or rows[0] < 0 or rows[1] <= rows[0]:
        raise argparse.ArgumentTypeError(f"expected START:STOP with 0 <= START < STOP, got {text!r}")
    return rows


def _count(text: str) -> int | str:
    """``--dev-pairs``: a positive integer or ``auto``."""
    return AUTO if text == AUTO else positive_int(text)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``dysem`` subcommand."""
    parser = subparsers.add_parser(
        "dysem",
        help="DySem (training-free STS from decoder attention outputs) against its baselines",
        description="Evaluate DySem and the mean-pooling, PromptEOL and dense attention-sum baselines on STS tasks.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_what_to_compare(parser)
    _add_dysem_settings(parser)
    _add_sizes_and_folders(parser)
    add_install_option(parser)
    parser.set_defaults(func=run)


def _add_what_to_compare(parser: argparse.ArgumentParser) -> None:
    """The model, the tasks and the candidate languages with their order."""
    parser.add_argument(
        "--model", default=None, help="panel name or path of a causal LM (required but with --assemble)"
    )
    add_list_option(parser, "--tasks", "--task", dest="tasks", default=None, metavar="TASK",
                    help=f"STS tasks, also as LocalSTS12 ... (default: {','.join(DEFAULT_TASKS)} with a "
                    "GPU, STSBenchmark on a CPU)")  # fmt: skip
    parser.add_argument(
        "--languages",
        default="auto",
        help="candidate languages, comma-separated (default: the 11 of the parallel data)",
    )
    parser.add_argument(
        "--language-order",
        choices=("agreement", "consensus", "labels", "given"),
        default="agreement",
        help=(
            "agreement/consensus: label-free (default agreement with the source text); "
            "labels: the reference's (warns); given: as listed"
        ),
    )


def _add_dysem_settings(parser: argparse.ArgumentParser) -> None:
    """DySem's L, k, value vector, prompt and component, and the dev-split choices."""
    parser.add_argument(
        "--num-languages", type=int, default=4, help="L, languages in the consensus (default 4)"
    )
    parser.add_argument("--k", type=int, default=1024, help="semantic-set size per text (default 1024)")
    parser.add_argument(
        "--value", choices=("source", "mean"), default="source", help="value vector (default source)"
    )
    parser.add_argument(
        "--prompt", choices=("EP", "LP"), default="EP", help="English or language-specific PromptEOL"
    )
    parser.add_argument("--component", default="attention", help="attention (default), mlp, hidden[:layer]")
    parser.add_argument(
        "--select-on-dev", action="store_true", help="choose k, L and value on the STS Benchmark dev split"
    )
    parser.add_argument(
        "--dev-pairs",
        type=_count,
        default=AUTO,
        help="dev pairs for the grid and the language order (default 200 with a GPU, 50 on a CPU: "
        "the order encodes each dev text in every candidate language, 50 pairs x 12 versions = "
        "about 1,200 forward passes)",
    )
    add_list_option(parser, "--grid-k", dest="grid_k", item_type=positive_int, metavar="K",
                    default=list(StudyOptions.grid_k),
                    help="k values of the dev grid (those below the model's hidden size are tried)")  # fmt: skip
    add_list_option(parser, "--grid-languages", dest="grid_languages", item_type=positive_int, metavar="L",
                    default=list(StudyOptions.grid_languages), help="L values of the dev grid")  # fmt: skip


def _add_sizes_and_folders(parser: argparse.ArgumentParser) -> None:
    """Test-set sizes, baselines, translator, folders, batch size, device and progress."""
    parser.add_argument(
        "--max-pairs",
        type=_pairs,
        default=AUTO,
        help="sub-sample each test set (seed 42), or 'all' (default all with a GPU, 200 on a CPU: "
        "each pair costs 2 x (1 + L) forward passes)",
    )
    parser.add_argument("--no-baselines", action="store_true", help="only DySem")
    parser.add_argument(
        "--translator",
        default=None,
        type=path_arg,
        help="folder of an NLLB-style seq2seq model for uncovered texts",
    )
    parser.add_argument(
        "--sts-dir",
        default=None,
        type=path_arg,
        help="shared STS folder (default $MTEB_LRD_STS_DIR or ../shared/data/sts)",
    )
    parser.add_argument(
        "--output-dir", default="results/dysem", type=path_arg, help="where results, caches and the table go"
    )
    parser.add_argument(
        "--cache-dir",
        default=None,
        type=path_arg,
        help="representation / translation caches (default <output-dir>/cache)",
    )
    parser.add_argument("--batch-size", type=int, default=16, help="texts per forward pass")
    parser.add_argument("--device", default=None, help="torch device (default cuda when available)")
    parser.add_argument(
        "--dtype",
        default=None,
        choices=("float32", "bfloat16", "float16"),
        help="compute dtype of the forward passes (default float32; bfloat16 halves a 7B model's memory on a GPU)",
    )
    parser.add_argument(
        "--progress", action="store_true", help="progress bars also when stderr is not a terminal (logs)"
    )
    parser.add_argument("--rows", type=_rows, default=None, metavar="START:STOP",
                        help="only these test pairs of every task: one chunk of a study too long for one "
                        "run (its summary keeps the per-pair predictions; --assemble joins the chunks)")  # fmt: skip
    parser.add_argument("--choices-from", default=None, type=path_arg, metavar="SUMMARY",
                        help="reuse the dev choices of an earlier run's summary (same model and dev "
                        "settings, e.g. the first chunk's) instead of computing them again")  # fmt: skip
    add_list_option(parser, "--assemble", dest="assemble", item_type=path_arg, default=None, metavar="CHUNK",
                    help="join chunk summaries (files or folders of them) into the whole study's table and "
                    "summary in --output-dir; runs no model")  # fmt: skip


def options_from_args(args: argparse.Namespace) -> StudyOptions:
    """The study's settings from the parsed command line."""
    return StudyOptions(
        model=args.model,
        tasks=AUTO if args.tasks is None else [_short_task_name(name) for name in args.tasks],
        languages=args.languages,
        language_order=args.language_order,
        num_languages=args.num_languages,
        k=args.k,
        value=args.value,
        prompt=args.prompt,
        component=args.component,
        select_on_dev=args.select_on_dev,
        dev_pairs=args.dev_pairs,
        grid_k=args.grid_k,
        grid_languages=args.grid_languages,
        max_pairs=args.max_pairs,
        baselines=not args.no_baselines,
        translator=args.translator,
        sts_dir=args.sts_dir,
        output_dir=args.output_dir,
        cache_dir=args.cache_dir,
        batch_size=args.batch_size,
        device=args.device,
        dtype=args.dtype,
        progress=show_progress(args),
        rows=args.rows,
        choices_from=args.choices_from,
    )


def run(args: argparse.Namespace) -> int:
    """Run the comparison (:func:`mteb_lrd.dysem.study.run_study`), or join chunks, and print the table."""
    if args.assemble is not None:
        from mteb_lrd.dysem.study_files import assemble_summaries

        result = assemble_summaries(args.assemble, args.output_dir)
    elif args.model is None:
        raise ValueError("--model is required (but with --assemble)")
    else:
        result = run_study(options_from_args(args))
    print(result.table_text)
    return 0
