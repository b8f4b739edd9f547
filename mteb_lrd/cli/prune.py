"""``mteb-lrd prune``: remove transformer blocks (listed, or chosen by an LRD rule and budget), save
the pruned model, and score it with mteb as an experiment of the base model."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import uuid
from pathlib import Path

from mteb_lrd.cli.options import add_install_option, add_list_option, path_arg
from mteb_lrd.cli.run import add_lrd_options, lrd_options, print_summary, run_one_model
from mteb_lrd.models import loading
from mteb_lrd.models.loading import DEFAULT_MODEL
from mteb_lrd.pruning.rules import RULES

__all__ = ["check_output", "register", "run"]

EPILOG = """examples:
  mteb-lrd prune --blocks 2,3 --output pruned/minilm-2-3 --task demo
      all-MiniLM-L6-v2 without blocks 2 and 3, saved, then scored on the bundled STS sample
  mteb-lrd prune --model path/to/model --blocks 2 3 --tasks STSBenchmark
      scored without saving (no --output); STSBenchmark is the shared STS data when present
  mteb-lrd prune --rule gfmi --budget 0.2 --output pruned/minilm-gfmi-20 --task demo
      blocks chosen by the GFMI rule on the profiling texts (--texts; default: the bundled sample)
  mteb-lrd prune --blocks 5 --output pruned/x          # no --task: save only

The saved folder is a normal SentenceTransformer (or transformers) folder whose config.json records
the pruning and whose README is the pruned model's own card; `mteb-lrd run --model <folder>` scores
it again. Results go to <results>/results/<base model>/<revision>/experiments/<removed blocks ...>/,
next to the base model's and never over them. Block i is the module that produces hidden state
h_{i+1}. --output must not be the source model's folder; a non-empty --output is replaced only with
--overwrite (which also re-runs tasks that have results).
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``prune`` subcommand."""
    parser = subparsers.add_parser(
        "prune",
        help="remove transformer blocks, save the pruned model and score it",
        description="Physically remove transformer blocks from a model and evaluate the result.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--model", default=DEFAULT_MODEL, help="'default', a panel name, a model folder or a Hub id"
    )
    add_list_option(parser, "--blocks", "--block", dest="blocks", item_type=int, default=None,
                    metavar="I", help="block indices to remove, e.g. 2,3 or 2 3")  # fmt: skip
    parser.add_argument("--rule", default=None, choices=RULES, help="choose the blocks by an LRD rule")
    parser.add_argument(
        "--budget", type=float, default=None, help="fraction of candidate layers to prune (with --rule)"
    )
    parser.add_argument("--mapping", default="reference", choices=("reference", "producer"),
                        help="hidden-state id l -> block l (reference code) or block l-1 (producer)")  # fmt: skip
    parser.add_argument("--texts", default=None, type=path_arg,
                        help="JSON-lines texts for --rule (default: the bundled STS sample)")  # fmt: skip
    parser.add_argument("--output", default=None, type=path_arg,
                        help="folder for the pruned model (default: not saved)")  # fmt: skip
    add_lrd_options(parser)
    add_install_option(parser)
    parser.set_defaults(func=run)


def check_output(output: str | os.PathLike[str], source: object, overwrite: bool) -> Path:
    """Refuse an ``--output`` that is the source model's folder (always), that contains it or lies
    inside it (always), or that is a non-empty folder or a file (unless ``overwrite``).

    Returns:
        The output folder, resolved.

    Raises:
        ValueError: naming the folder and what to do instead.
    """
    out = Path(output).expanduser().resolve()
    if isinstance(source, Path):
        src = source.resolve()
        if out == src or src in out.parents or out in src.parents:
            raise ValueError(
                f"--output {out} is the source model's folder {src}, inside it or around it: the source "
                "is never overwritten; choose another folder"
            )
    if out.exists() and not overwrite:
        if not out.is_dir():
            raise ValueError(f"--output {out} is a file; choose a folder (or pass --overwrite to replace it)")
        if any(out.iterdir()):
            raise ValueError(f"--output {out} is not empty; pass --overwrite to replace its contents")
    return out


def _staging_folder(parent: Path, name: str) -> Path:
    """A new empty folder in ``parent`` to save into (checks writability before any computation);
    ``mkdir`` applies the umask, so the finished folder has the user's usual permissions."""
    staging = parent / f".{name}.partial-{uuid.uuid4().hex[:12]}"
    staging.mkdir(parents=True)
    return staging


def _move_into_place(staging: Path, out: Path) -> None:
    if out.exists() or out.is_symlink():
        aside = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, aside)
        os.replace(staging, out)
        if aside.is_dir() and not aside.is_symlink():
            shutil.rmtree(aside)
        else:
            aside.unlink()
    else:
        os.replace(staging, out)


def run(args: argparse.Namespace) -> int:
    """Execute ``mteb-lrd prune``; returns the exit code."""
    from mteb_lrd.models.pruning_record import pruning_record
    from mteb_lrd.registration.pruned_models import prune

    if (args.blocks is None) == (args.rule is None):
        raise ValueError("give either --blocks or --rule with --budget")
    if args.rule is not None and args.budget is None:
        raise ValueError("--rule needs --budget (a fraction in (0, 1], e.g. 0.2)")
    if args.output is None and not (args.task or args.local_task):
        raise ValueError("nothing to do: give --output to save the pruned model and/or --task to score it")
    options = lrd_options(args)
    tasks = None
    if args.task or args.local_task:
        from mteb_lrd.tasks.task_names import resolve_tasks

        tasks = resolve_tasks(args.task, args.local_task)
    out = (
        check_output(args.output, loading.resolve_model_path(args.model), args.overwrite)
        if args.output
        else None
    )
    if out is not None:
        staging = _staging_folder(out.parent, out.name)
    else:
        staging = _staging_folder(Path(tempfile.gettempdir()), "mteb-lrd-pruned")
    try:
        name, model, tokenizer = loading.load_for_mteb(
            args.model, device=args.device, name=args.name, revision=args.revision
        )
        texts = None
        if args.rule is not None and args.texts:
            from mteb_lrd.cli.profile import read_text_file

            texts = read_text_file(Path(args.texts))
        pruned = prune(
            model,
            args.blocks,
            rule=args.rule,
            budget=args.budget,
            texts=texts,
            tokenizer=tokenizer,
            name=name,
            revision=args.revision,
            mapping=args.mapping,
        )
        record = pruning_record(pruned) or {}
        if tokenizer is None:
            pruned.save(str(staging))
        else:
            pruned.save_pretrained(str(staging))
            tokenizer.save_pretrained(str(staging))
        if out is not None:
            _move_into_place(staging, out)
            staging = out
            print(f"removed blocks {record['removed_blocks']} of {record['num_blocks']}; saved to {out}")
        else:
            print(
                f"removed blocks {record['removed_blocks']} of {record['num_blocks']} (not saved: no --output)"
            )
        if tasks is not None:  # lines labelled by what the user named: the saved folder, else the source
            label = str(out) if out is not None else f"{args.model} without blocks {record['removed_blocks']}"
            print_summary(label, run_one_model(str(staging), tasks, args, options, label))
    finally:
        if out is None or staging != out:
            shutil.rmtree(staging, ignore_errors=True)
    return 0
