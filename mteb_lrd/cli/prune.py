"""``mteb-lrd prune``: remove transformer blocks (listed, or chosen by an LRD rule and budget), save
the pruned model, and score it with mteb as an experiment of the base model."""

from __future__ import annotations

import argparse
from pathlib import Path

from mteb_lrd.cli.resolve import DEFAULT_MODEL, load_for_mteb
from mteb_lrd.cli.run import add_lrd_options, evaluate_model, lrd_options, print_summary

__all__ = ["parse_blocks", "register", "run"]

EPILOG = """examples:
  mteb-lrd prune --blocks 2,3 --output pruned/minilm-2-3 --task demo
      all-MiniLM-L6-v2 without blocks 2 and 3, saved, then scored on the bundled STS sample
  mteb-lrd prune --model all-mpnet-base-v2 --rule gfmi --budget 0.2 --output pruned/mpnet-gfmi-20 --task LocalSTSBenchmark
      blocks chosen by the GFMI rule on the profiling texts (default: the bundled sample)
  mteb-lrd prune --blocks 5 --output pruned/x          # no --task: save only

The saved folder loads as a plain SentenceTransformer; `mteb-lrd run --model <folder>` scores it
again. Results go to <results>/<model>/<revision>/experiments/<removed blocks ...>/, never over the
base model's files. Block i is the module that produces hidden state h_{i+1}.
"""


def parse_blocks(text: str) -> list[int]:
    """``"2,3"`` → ``[2, 3]``.

    Raises:
        ValueError: for anything but comma-separated integers.
    """
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError as err:
        raise ValueError(f"--blocks takes comma-separated block indices such as 2,3; got {text!r}") from err


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``prune`` subcommand."""
    parser = subparsers.add_parser(
        "prune",
        help="remove transformer blocks, save the pruned model and score it",
        description="Physically remove transformer blocks from a model and evaluate the result.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", default=DEFAULT_MODEL, help="'default', a panel name, or a model folder")
    parser.add_argument("--blocks", default=None, help="comma-separated block indices to remove, e.g. 2,3")
    parser.add_argument("--rule", default=None, help="choose blocks by rule: frenet, nrs, gfmi, composite")
    parser.add_argument(
        "--budget", type=float, default=None, help="fraction of candidate layers to prune (with --rule)"
    )
    parser.add_argument("--mapping", default="reference", choices=("reference", "producer"),
                        help="hidden-state id l -> block l (reference code) or block l-1 (producer)")  # fmt: skip
    parser.add_argument(
        "--texts", default=None, help="JSON-lines texts for --rule (default: the bundled STS sample)"
    )
    parser.add_argument("--output", required=True, help="folder for the pruned model")
    add_lrd_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``mteb-lrd prune``; returns the exit code."""
    from mteb_lrd.pruning.choose import choose_blocks
    from mteb_lrd.pruning.pruned import prune

    if (args.blocks is None) == (args.rule is None):
        raise ValueError("give either --blocks or --rule with --budget")
    if args.rule is not None and args.budget is None:
        raise ValueError("--rule needs --budget (a fraction in (0, 1], e.g. 0.2)")
    options = lrd_options(args)
    name, model, tokenizer = load_for_mteb(args.model, device=args.device)
    if tokenizer is not None:
        raise ValueError("prune saves SentenceTransformer folders; give a SentenceTransformer model")
    if args.rule is not None:
        from mteb_lrd.cli.profile import read_texts
        from mteb_lrd.defaults import demo_texts

        texts = read_texts(Path(args.texts)) if args.texts else demo_texts()
        blocks = choose_blocks(
            model, args.rule, args.budget, texts, mapping=args.mapping, batch_size=args.batch_size
        )
    else:
        blocks = parse_blocks(args.blocks)
    pruned = prune(model, blocks, rule=args.rule, budget=args.budget, name=name)
    folder = pruned.save(args.output)
    print(f"removed blocks {pruned.removed_blocks} of {pruned.num_blocks}; saved to {folder}")
    if args.task or args.local_task:
        from mteb_lrd.cli.resolve import resolve_tasks

        tasks = resolve_tasks(args.task, args.local_task)
        print_summary(str(folder), evaluate_model(str(folder), tasks, args, options))
    return 0
