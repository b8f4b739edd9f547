"""``mteb-lrd dysem``: DySem against its baselines on STS tasks, as a table like the paper's."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["register", "run"]

DEFAULT_TASKS = "STSBenchmark,STS12,STS13,STS14,STS15,STS16,SICK-R"

EPILOG = """\
examples:
  mteb-lrd dysem --model qwen2.5-coder-0.5b --select-on-dev --max-pairs 300
  mteb-lrd dysem --model gemma-3-270m --languages en,de,fr,es --num-languages 3 --k 256 --value mean
  mteb-lrd dysem --model path/to/llama --prompt LP --tasks STSBenchmark,STSBenchmark-de
  mteb-lrd dysem --model smollm2-135m --language-order labels   # the reference's order (uses dev labels; warns)

The model is a panel name (see `mteb-lrd panel list`) or a folder of a transformers causal LM.
Translations come from the parallel STS Benchmark data in the shared STS folder; tasks whose texts
it does not cover (STS12-16, SICK-R) get the source-only DySem row (L = 1) unless --translator
points at an NLLB-style seq2seq model. k, L and the value vector are chosen on the STS Benchmark
dev split with --select-on-dev, never on test data. Results are stored as MTEB results under
--output-dir/results; the table and a JSON summary go to --output-dir.
"""


def _ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``dysem`` subcommand."""
    parser = subparsers.add_parser(
        "dysem",
        help="DySem (training-free STS from decoder attention outputs) against its baselines",
        description="Evaluate DySem and the mean-pooling, PromptEOL and dense attention-sum baselines on STS tasks.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", required=True, help="panel name or path of a causal LM")
    parser.add_argument("--tasks", default=DEFAULT_TASKS, help=f"comma-separated (default {DEFAULT_TASKS})")
    parser.add_argument(
        "--languages",
        default="auto",
        help="candidate languages, comma-separated (default: the 11 of the parallel data)",
    )
    parser.add_argument(
        "--language-order",
        choices=("agreement", "consensus", "labels", "given"),
        default="agreement",
        help="agreement/consensus: label-free (default agreement with the source text); labels: the reference's (warns); given: as listed",
    )
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
        "--dev-pairs", type=int, default=200, help="dev pairs for the grid and the language order"
    )
    parser.add_argument(
        "--grid-k", type=_ints, default=[128, 256, 512, 1024], help="k values of the dev grid"
    )
    parser.add_argument(
        "--grid-languages", type=_ints, default=[1, 2, 4, 6, 8], help="L values of the dev grid"
    )
    parser.add_argument("--max-pairs", type=int, default=None, help="sub-sample each test set (seed 42)")
    parser.add_argument("--no-baselines", action="store_true", help="only DySem")
    parser.add_argument(
        "--translator", default=None, help="folder of an NLLB-style seq2seq model for uncovered texts"
    )
    parser.add_argument(
        "--sts-dir", default=None, help="shared STS folder (default $MTEB_LRD_STS_DIR or ../shared/data/sts)"
    )
    parser.add_argument(
        "--output-dir", default="results/dysem", help="where results, caches and the table go"
    )
    parser.add_argument(
        "--cache-dir", default=None, help="representation / translation caches (default <output-dir>/cache)"
    )
    parser.add_argument("--batch-size", type=int, default=16, help="texts per forward pass")
    parser.add_argument("--device", default=None, help="torch device (default cuda when available)")
    parser.add_argument("--progress", action="store_true", help="show progress bars")
    parser.set_defaults(func=run)


def _model_path(name: str) -> Path:
    path = Path(name)
    if path.exists():
        return path
    from mteb_lrd.studies.panel import PANEL, prepare

    if name in PANEL:
        return prepare(name)
    raise ValueError(f"--model {name!r} is neither a folder nor a panel name ({', '.join(PANEL)})")


def run(args: argparse.Namespace) -> int:
    """Run the comparison and print the table."""
    from mteb_lrd.dysem.evaluation import (
        STS_TASKS,
        evaluate_models,
        format_table,
        load_pairs,
        order_languages,
        sts_task,
        task_language,
        write_json_atomic,
    )
    from mteb_lrd.dysem.grid import best_point, grid_search
    from mteb_lrd.dysem.languages import STSB_MULTI_LANGUAGES, normalize_language
    from mteb_lrd.dysem.model import (
        DySemModel,
        attention_sum_baseline,
        mean_pooling_baseline,
        prompteol_baseline,
    )
    from mteb_lrd.dysem.representation import RepresentationExtractor
    from mteb_lrd.dysem.translation import FallbackTranslations, ParallelCorpus, Seq2SeqTranslator
    from mteb_lrd.integration.local_tasks import shared_sts_dir

    started = time.monotonic()
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = [t for t in tasks if t not in STS_TASKS]
    if unknown:
        raise ValueError(f"unknown tasks {unknown}; available: {', '.join(STS_TASKS)}")
    for option in ("k", "num_languages", "dev_pairs", "batch_size"):
        if getattr(args, option) < 1:
            raise ValueError(f"--{option.replace('_', '-')} must be positive, got {getattr(args, option)}")
    sts_dir = Path(args.sts_dir) if args.sts_dir else shared_sts_dir()
    out = Path(args.output_dir)
    cache = Path(args.cache_dir) if args.cache_dir else out / "cache"
    model_path = _model_path(args.model)
    baselines = not args.no_baselines
    extractor = RepresentationExtractor(
        model_path,
        batch_size=args.batch_size,
        device=args.device,
        cache_dir=cache / "representations",
        show_progress_bar=args.progress,
        prefetch=("attention", "hidden") if baselines else (),
    )
    languages = (
        list(STSB_MULTI_LANGUAGES)
        if args.languages == "auto"
        else [normalize_language(x) for x in args.languages.split(",") if x.strip()]
    )
    corpus = ParallelCorpus.from_sts_multi(
        sts_dir / "STSBenchmark-multi", languages=[x for x in languages if x in STSB_MULTI_LANGUAGES]
    )
    sources: list[Any] = [corpus]
    if args.translator:
        sources.append(Seq2SeqTranslator(args.translator, cache_dir=cache / "translations"))
    translations = FallbackTranslations(sources)
    settings = {"k": args.k, "num_languages": min(args.num_languages, len(languages)), "value": args.value}

    def dysem(langs: list[str], **overrides: Any) -> DySemModel:
        kwargs = {**settings, **overrides}
        kwargs["num_languages"] = min(kwargs["num_languages"], len(langs))
        return DySemModel(
            extractor,
            languages=langs,
            translations=translations,
            prompt=args.prompt,
            component=args.component,
            **kwargs,
        )

    dev = load_pairs(sts_dir / "STSBenchmark-multi" / "en" / "dev.jsonl", args.dev_pairs)
    candidates = dysem(languages, num_languages=len(languages))
    if args.language_order == "given":
        order = languages
    else:
        order = order_languages(
            candidates, dev.sentence1 + dev.sentence2, method=args.language_order, pairs=dev
        )
    print(f"language order ({args.language_order}): {', '.join(order)}", file=sys.stderr)
    grid: list[dict[str, Any]] = []
    source_k = args.k
    if args.select_on_dev:
        ordered = dysem(order, num_languages=len(order))
        src_1, stack_1 = ordered.representations(dev.sentence1)
        src_2, stack_2 = ordered.representations(dev.sentence2)
        points = grid_search(
            src_1, stack_1, src_2, stack_2, dev.scores,
            ks=args.grid_k, num_languages=[n for n in args.grid_languages if n <= len(order)],
        )  # fmt: skip
        best = best_point(points)
        settings = {"k": best.k, "num_languages": best.num_languages, "value": best.value}
        single = [p for p in points if p.num_languages == 1]
        source_k = best_point(single).k if single else best.k
        grid = [p.to_dict() for p in points]
        print(f"dev grid ({len(dev.scores)} pairs): best {best}", file=sys.stderr)

    task_classes: dict[str, type] = {}
    sizes: dict[str, int] = {}
    covered: dict[str, bool] = {}
    for name in tasks:
        task_classes[name], sizes[name] = sts_task(name, sts_dir, args.max_pairs)
        pairs = load_pairs(sts_dir / STS_TASKS[name], args.max_pairs)
        covered[name] = args.translator is not None or corpus.covers(
            pairs.sentence1 + pairs.sentence2, task_language(name)
        )
    main = dysem(order)
    label = f"DySem (k={settings['k']}, L={settings['num_languages']}, {settings['value']})"
    models: dict[str, Any] = {label: lambda t: main if covered[t] else None}
    if settings["num_languages"] > 1 or not all(covered.values()):
        models[f"DySem source only (k={source_k}, L=1)"] = lambda t: dysem(
            [task_language(t)], k=source_k, num_languages=1
        )
    if baselines:
        dense = attention_sum_baseline(extractor, args.prompt)
        eol, mean = prompteol_baseline(extractor), mean_pooling_baseline(extractor)
        models.update(
            {
                "attention sum (dense)": lambda t: dense,
                "PromptEOL": lambda t: eol,
                "mean pooling": lambda t: mean,
            }
        )
    table = evaluate_models(models, task_classes, out / "results", batch_size=args.batch_size)
    text = format_table(table, tasks)
    print(text)
    stem = f"dysem-{model_path.name}"
    (out / f"{stem}.md").parent.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.md").write_text(text + "\n", encoding="utf-8")
    write_json_atomic(
        out / f"{stem}.json",
        {
            "model": str(model_path),
            "tasks": {t: {"pairs": sizes[t], "translations": covered[t]} for t in tasks},
            "language_order": order,
            "language_order_method": args.language_order,
            "settings": settings,
            "prompt": args.prompt,
            "component": args.component,
            "dev_pairs": len(dev.scores) if args.select_on_dev or args.language_order == "labels" else 0,
            "grid": grid,
            "table": table,
            "forward_texts": extractor.forward_texts,
            "forward_batches": extractor.forward_batches,
            "wall_seconds": time.monotonic() - started,
        },
    )
    return 0
