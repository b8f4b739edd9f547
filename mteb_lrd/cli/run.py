"""``mteb-lrd run``: models × tasks through mteb, with layer dynamics and per-layer scores, resumable."""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
from pathlib import Path
from typing import Any

from mteb_lrd.adapter.layer_choice import DEFAULT_LAYER_CHOICE, check_layer_choice
from mteb_lrd.cli.executor import add_executor_options, run_on_ray, unit_config
from mteb_lrd.cli.options import add_install_option, add_list_option, path_arg, show_progress
from mteb_lrd.extraction.templates import resolve_template
from mteb_lrd.io import folder_bytes
from mteb_lrd.models.loading import DEFAULT_MODEL
from mteb_lrd.progress import Progress
from mteb_lrd.runners.distributed import EXTRACTION_CACHE_FOLDER
from mteb_lrd.storage.vector_store import STORE_DTYPES, check_store_options
from mteb_lrd.tasks.task_names import resolve_tasks

__all__ = ["add_lrd_options", "disk_line", "lrd_options", "register", "run"]

EPILOG = """examples:
  mteb-lrd run --task demo
      all-MiniLM-L6-v2 on the bundled 300-pair STS sample, results in ./results
  mteb-lrd run --model default,./my-model --task STSBenchmark --task SICK-R
  mteb-lrd run --model all-mpnet-base-v2 --task demo      # a panel model (see `mteb-lrd panel list`)
  mteb-lrd run --model ./my-model --local-task data/faq=Retrieval --results runs/faq --batch-size 16
  mteb-lrd run --model ./pruned-model --task demo        # a folder written by `mteb-lrd prune`
  mteb-lrd run --model ./big-decoder --task LocalSICK-R --memory-budget-mb 512 --store-dtype float16
  mteb-lrd run --model ./big-decoder --local-task data/faq=Retrieval --store-dtype float16 \
      --per-layer-layers last:4 --no-cache --spill-dir ./scratch   # a big model on a big corpus

Results are normal mteb <Task>.json files (ResultCache layout) with two extra keys per subset:
`layer_dynamics` and `per_layer`. Re-running resumes: finished tasks are skipped, results without
the layer keys are re-run to add them, and inside a task the per-layer vectors of finished shards
come from the extraction cache (--cache-dir); --overwrite re-runs everything.
"""


def add_lrd_options(parser: argparse.ArgumentParser) -> None:
    """Options shared by ``run`` and ``prune``: results folder, batch size, device, caps."""
    add_list_option(parser, "--task", "--tasks", dest="task", metavar="NAME",
                    help="task name: demo, STS12..16 / SICK-R / STSBenchmark (the shared data, also as "
                    "LocalSTS12 ...), LocalSTSBenchmarkMultilingualSTS, "
                    "or an MTEB task name (needs the Hub)")  # fmt: skip
    add_list_option(parser, "--local-task", "--local-tasks", dest="local_task", metavar="FOLDER=TYPE",
                    help="a folder of JSON lines as a task; TYPE: STS, PairClassification, "
                    "Classification, Retrieval")  # fmt: skip
    parser.add_argument("--name", default=None, help="model name for the results (organization/model; "
                        "default: the model card's / config's name, see README)")  # fmt: skip
    parser.add_argument("--revision", default=None, help="model revision for the results (and the Hub)")
    parser.add_argument("--results", default="results", type=path_arg,
                        help="results folder (mteb ResultCache layout: <results>/results/<model>/...)")  # fmt: skip
    parser.add_argument("--batch-size", type=int, default=32, help="texts per forward pass (default 32)")
    parser.add_argument("--device", default=None, help="cpu, cuda, ... (default: cuda when available)")
    parser.add_argument("--dtype", default=None, choices=("float32", "float16", "bfloat16"),
                        help="compute dtype of the forward passes (default: the model's own; float16 / "
                        "bfloat16 on a GPU halve a large model's memory and time)")  # fmt: skip
    parser.add_argument("--no-per-layer", action="store_true", help="skip the per-layer main scores")
    parser.add_argument("--per-layer-layers", default=DEFAULT_LAYER_CHOICE, metavar="CHOICE",
                        help="hidden states that get a per-layer main score: 'auto' (default: every state of "
                        "models with up to 13 states, else 9 evenly spaced from h_0 to h_L), 'all', "
                        "'every:N', 'last:N' or indices '0,8,16'; h_L always. Only these states of every "
                        "text are kept; the layer dynamics use every state of the texts they sample")  # fmt: skip
    parser.add_argument("--frenet-cap", type=int, default=1000, help="texts for Frenet (default 1000)")
    parser.add_argument("--nrs-cap", type=int, default=1000, help="texts for NRS (default 1000)")
    parser.add_argument("--gfmi-cap", type=int, default=5000, help="texts for GFMI (default 5000)")
    parser.add_argument("--overwrite", action="store_true", help="re-run tasks that already have results")
    parser.add_argument("--memory-budget-mb", type=float, default=1024, metavar="MB",
                        help="per-layer vectors kept in RAM per task; above it they go to a memory-mapped "
                        "temporary file (default 1024; 0: always on disk)")  # fmt: skip
    parser.add_argument("--store-dtype", choices=STORE_DTYPES, default="float32",
                        help="dtype the per-layer vectors are kept in (float16: half the memory, "
                        "per-layer scores change in about the 4th digit; default float32)")  # fmt: skip
    parser.add_argument("--template", default=None, metavar="TEMPLATE",
                        help="put every text of a plain transformers model into a template first: "
                        "'prompteol' (PromptEOL, for decoders pooled at the last token) or a text with one "
                        "{text}; results go to the mteb experiment template_<name> of the model")  # fmt: skip
    parser.add_argument("--spill-dir", default=None, metavar="FOLDER",
                        help="local scratch folder for per-layer vectors above the memory budget (default: "
                        "the system temporary folder, TMPDIR; nameless files, nothing is left behind)")  # fmt: skip
    parser.add_argument("--cache-dir", default=None, metavar="FOLDER",
                        help="resumable extraction cache: a run killed inside a task recomputes only "
                        "the missing shards (default <results>/mteb-lrd-cache, removed once the model's "
                        "run finishes; a folder given here is kept). It holds what the run keeps: the "
                        "embeddings, the chosen states and every state of the sampled texts")  # fmt: skip
    parser.add_argument("--no-cache", action="store_true",
                        help="no extraction cache (big tasks: saves its disk; a killed task starts over)")  # fmt: skip


def lrd_options(args: argparse.Namespace) -> dict:
    """``with_layer_dynamics`` options from the parsed arguments."""
    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be a positive integer; got {args.batch_size}")
    check_store_options(args.memory_budget_mb, args.store_dtype)
    check_layer_choice(args.per_layer_layers)
    if args.no_cache and args.cache_dir is not None:
        raise ValueError("--no-cache and --cache-dir contradict each other: give one")
    template = resolve_template(args.template)  # a bad one fails before any model loads
    return {
        **({"template": template} if template is not None else {}),
        **({"spill_dir": str(args.spill_dir)} if args.spill_dir is not None else {}),
        **({"dtype": args.dtype} if args.dtype is not None else {}),
        "per_layer": not args.no_per_layer,
        "per_layer_layers": args.per_layer_layers,
        "frenet_cap": args.frenet_cap,
        "nrs_cap": args.nrs_cap,
        "gfmi_cap": args.gfmi_cap,
        "default_batch_size": args.batch_size,
        "memory_budget_mb": args.memory_budget_mb,
        "store_dtype": args.store_dtype,
    }


def extraction_cache(spec: str, args: argparse.Namespace) -> tuple[Path | None, bool]:
    """The model's extraction cache folder (``None``: ``--no-cache``) and whether it is removed after
    a finished run."""
    if args.no_cache:
        return None, False
    if args.cache_dir is not None:
        return Path(args.cache_dir), False
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in spec.strip("/"))[-100:] or "model"
    return Path(args.results) / EXTRACTION_CACHE_FOLDER / safe, True


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``run`` subcommand."""
    parser = subparsers.add_parser(
        "run",
        help="evaluate models on MTEB tasks with layer dynamics and per-layer scores",
        description="Run models × tasks through mteb.evaluate with the layer-dynamics wrapper.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_list_option(parser, "--model", "--models", dest="model", metavar="MODEL",
                    help="'default' (all-MiniLM-L6-v2), a panel name, a model folder or a Hub id")  # fmt: skip
    add_lrd_options(parser)
    add_executor_options(parser)
    add_install_option(parser)
    parser.set_defaults(func=run)


def run_one_model(
    spec: str, tasks: list, args: argparse.Namespace, options: dict, label: str | None = None
) -> list:
    """Run one model on ``tasks`` with the wrapper (the step a Ray unit runs for one task); returns
    mteb's task results. ``label``: how the disk line names the model (default ``spec``)."""
    from mteb_lrd.runners.model_evaluation import evaluate_model

    cache_dir, temporary = extraction_cache(spec, args)
    evaluated = evaluate_model(spec, tasks, unit_config(args, options), None if cache_dir is None else str(cache_dir),
                         progress=show_progress(args))  # fmt: skip
    print(disk_line(label or spec, evaluated.wrapped, cache_dir, temporary))
    if temporary and cache_dir is not None:  # every result is written: the vectors are not needed to resume
        shutil.rmtree(cache_dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            cache_dir.parent.rmdir()
    return evaluated.task_results


def disk_line(what: str, wrapped: Any, cache_dir: Path | None, temporary: bool = False) -> str:
    """What a run put on disk: the spill's peak and the extraction cache's size (a temporary cache,
    removed once every result is written, is not named)."""
    where = "temporary, removed" if temporary else f"in {cache_dir}"
    cache = f"{folder_bytes(cache_dir) / 2**20:.1f} MB {where}" if cache_dir is not None else "off"
    return f"{what}	disk: spill peak {wrapped.peak_spill_bytes / 2**20:.1f} MB, extraction cache {cache}"


def print_summary(spec: str, task_results: list) -> None:
    """One line per task: main score and d0L of the first subset that has one."""
    for task_result in task_results:
        rows: list[dict] = next(iter(task_result.scores.values()), [])
        main = sum(r["main_score"] for r in rows) / max(len(rows), 1)
        d0l = next(
            (r["layer_dynamics"].get("summary", {}).get("frenet_d0L") for r in rows if "layer_dynamics" in r),
            None,
        )
        d0l_text = f"{d0l:.3f}" if isinstance(d0l, float) else "–"
        print(f"{spec}\t{task_result.task_name}\tmain={main:.4f}\td0L={d0l_text}")


def run(args: argparse.Namespace) -> int:
    """Execute ``mteb-lrd run``; returns the exit code."""
    options = lrd_options(args)
    tasks = resolve_tasks(args.task, args.local_task)
    models = args.model or [DEFAULT_MODEL]
    if args.executor == "ray":
        return run_on_ray(args, models, options)
    for spec in Progress(models, desc="models", unit="model", show=len(models) > 1 and sys.stderr.isatty()):
        print_summary(spec, run_one_model(spec, tasks, args, options))
    print(f"results in {args.results}; `mteb-lrd report {args.results}` builds the leaderboard")
    return 0
