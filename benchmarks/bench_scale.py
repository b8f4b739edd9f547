"""Scale: what the layer-dynamics wrapper keeps, reads and computes for a 7B decoder on a big corpus.

Synthetic hidden states shaped like a 7B decoder (33 states x 4,096, float16 store, the default
budget of 1,024 MB) stand in for the forward pass, at growing corpus sizes N. Each size runs in its
own subprocess, through the wrapper's own parts: the memory plan, the LRD sample drawn from the
expected count, :class:`~mteb_lrd.extraction.extractor.KeptStates` reducing every extraction
shard (the default layer choice: 9 of 33 states), the two stores, then the LRD stage exactly as a
task's augmentation runs it, and a per-layer retrieval stand-in (each chosen state read back in
corpus chunks of the planned size and searched by 200 queries, top 10). Printed per size: the
seconds of storing, LRD (wall and process CPU) and per-layer scoring, the peak RSS above the process's RSS before the
run, and the spill's peak disk next to the expected ``chosen x N x d x 2 B + sampled rows x 33 x
d x 2 B``. Targets: peak RSS flat in N and within the budget + 200 MB; LRD CPU time flat in N (largest
/ smallest <= 1.5; the sample has the same size at every N); disk equal to the expectation.

The forward pass is not simulated (its time is the model's); a few pool shards of random states
are reused for every shard (the sampled rows get noise so that they are distinct texts).

``--lrd-cost`` instead measures one task's LRD stage alone, as the wrapper runs it
(:func:`~mteb_lrd.pipeline.layer_dynamics` with the default caps on ``--lrd-rows`` sampled rows of
``--states`` x ``--dim``), once in numpy and once per torch device (``--devices``, default ``cpu``
plus ``cuda`` when visible), and on a CUDA device the forward pass of the same number of texts
(``--tokens`` each) through a 7B-shaped decoder (Llama-2-7B's shape, random bfloat16 weights):
the LRD's share of that forward (target <= 10 %). On the CPU the forward of 5,000 texts through
7B weights takes hours, so only the LRD seconds are printed there.

Usage: python -m benchmarks.bench_scale [--sizes 10000,50000,200000] [--states 33] [--dim 4096]
       [--budget 1024] [--spill-dir DIR]
       python -m benchmarks.bench_scale --lrd-cost [--lrd-rows 5000] [--devices cpu,cuda]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this working tree's mteb_lrd first

__all__ = ["child", "main"]

TARGET_RSS_MARGIN_MB = 200
TARGET_LRD_SPREAD = 1.5
TARGET_LRD_SHARE_OF_FORWARD = 0.10
CHUNK = 50_000  # mteb's corpus chunk: the texts of one encode call
QUERIES, TOP = 200, 10


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _pool(states: int, rows: int, dim: int, count: int = 4) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    pool = []
    for _ in range(count):
        x = np.empty((states, rows, dim), dtype=np.float32)
        x[0] = rng.standard_normal((rows, dim), dtype=np.float32)
        for layer in range(1, states):
            x[layer] = x[layer - 1] + 0.3 * rng.standard_normal((rows, dim), dtype=np.float32)
        pool.append(x / np.linalg.norm(x, axis=2, keepdims=True))
    return pool


def child(args: argparse.Namespace) -> dict[str, float]:
    """One size in this process: returns its figures (printed as one JSON line)."""
    from mteb_lrd.adapter import augmentation
    from mteb_lrd.adapter.layer_choice import resolve_layers
    from mteb_lrd.adapter.options import LayerDynamicsOptions
    from mteb_lrd.extraction.extractor import KeptStates
    from mteb_lrd.storage.lrd_sample import LRDSample
    from mteb_lrd.storage.memory_plan import MemoryPlan
    from mteb_lrd.storage.vector_store import VectorStore

    n, dim, states = args.size, args.dim, args.states
    options = LayerDynamicsOptions(
        store_dtype="float16", memory_budget_mb=args.budget, spill_dir=args.spill_dir
    )
    plan = MemoryPlan.of(args.budget, options.caps, states, dim)
    layers = resolve_layers(options.per_layer_layers, states)
    shard_rows = max(32, (64 * 2**20 // (states * dim * 4)) // 32 * 32)  # the wrapper's shard rule, batch 32
    pool = _pool(states, shard_rows, dim)
    rng = np.random.default_rng(1)
    queries = rng.standard_normal((QUERIES, dim), dtype=np.float32)
    store = VectorStore(plan.stores_mb / 2, "float16", args.spill_dir)
    sample = LRDSample(options.caps, options.seed, VectorStore(plan.stores_mb / 2, "float16", args.spill_dir))
    keys = [("", f"document {i}") for i in range(n)]
    base_rss = _rss_mb()
    sample.plan(n)
    start = time.perf_counter()
    for c0 in range(0, n, CHUNK):  # one mteb encode call per corpus chunk
        call = keys[c0 : c0 + CHUNK]
        keep = KeptStates(layers, sample.admit(call), "float16")
        for index, s0 in enumerate(range(0, len(call), shard_rows)):
            positions = np.arange(s0, min(s0 + shard_rows, len(call)))
            full = pool[index % len(pool)][:, : positions.size]
            shard = keep.reduce({"states": full, "embeddings": full[-1]}, positions)
            shard_keys = [call[i] for i in positions]
            store.add(shard_keys, shard["layers"])
            kept = [key for key, k in zip(shard_keys, keep.full_rows[positions], strict=True) if k]
            noisy = shard["full"] + 0.3 * rng.standard_normal(shard["full"].shape, dtype=np.float32)
            sample.record(shard_keys, shard["valid"], kept, noisy.astype(np.float16))
    storing = time.perf_counter() - start
    start, cpu = time.perf_counter(), time.process_time()

    def no_reencode(missing: list) -> None:
        raise AssertionError(f"{len(missing)} sampled texts were not kept")

    result = augmentation.task_layer_dynamics(sample, options, {}, no_reencode)
    lrd_seconds, lrd_cpu = time.perf_counter() - start, time.process_time() - cpu
    start = time.perf_counter()
    for position in range(len(layers)):  # per-layer retrieval stand-in: corpus chunks of the planned size
        best = np.empty((QUERIES, 0), dtype=np.float32)
        for c0 in range(0, n, min(CHUNK, plan.read_rows)):
            chunk = store.layer(position, keys[c0 : c0 + min(CHUNK, plan.read_rows)])
            sims = np.concatenate([best, queries @ chunk.T], axis=1)
            best = -np.partition(-sims, TOP - 1, axis=1)[:, :TOP]
            del chunk, sims
    per_layer_seconds = time.perf_counter() - start
    sampled_rows = len(sample.store)
    expected_disk = (len(layers) * n * dim + sampled_rows * states * dim) * 2
    return {
        "n": n,
        "chosen_states": len(layers),
        "sampled_rows": sampled_rows,
        "storing_s": storing,
        "lrd_s": lrd_seconds,
        "lrd_cpu_s": lrd_cpu,
        "per_layer_s": per_layer_seconds,
        "peak_rss_over_start_mb": _peak_rss_mb() - base_rss,
        "spill_peak_mb": (store.peak_bytes_on_disk + sample.store.peak_bytes_on_disk) / 2**20,
        "spill_in_ram_mb": (store.bytes_in_memory + sample.store.bytes_in_memory) / 2**20,
        "expected_mb": expected_disk / 2**20,
        "stores_budget_mb": plan.stores_mb,
        "read_rows": plan.read_rows,
        "d0L": result.get("summary", {}).get("frenet_d0L"),
    }


def _lrd_seconds(states: np.ndarray, device: str | None) -> tuple[float, dict[str, float]]:
    """Wall seconds of one task's LRD stage (the wrapper's caps and parameters) on ``device``."""
    from mteb_lrd.metrics.params import MetricParams
    from mteb_lrd.pipeline import layer_dynamics

    if device and device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
    start = time.perf_counter()
    result = layer_dynamics(states, params=MetricParams(device=device))
    return time.perf_counter() - start, result.summary()


def _forward_seconds(texts: int, tokens: int, device: str, batch: int = 64) -> float:
    """Seconds of the forward pass of ``texts`` x ``tokens`` through a 7B-shaped decoder (random
    bfloat16 weights, every hidden state returned as the extraction asks) on ``device``."""
    import torch
    from transformers import LlamaConfig, LlamaModel

    config = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=32, vocab_size=32000)  # fmt: skip
    with torch.device(device):
        model = LlamaModel(config).to(torch.bfloat16).eval()
    ids = torch.randint(0, config.vocab_size, (batch, tokens), device=device)
    with torch.no_grad():
        model(input_ids=ids, output_hidden_states=True)  # warm-up: kernels chosen per shape
        torch.cuda.synchronize()
        start = time.perf_counter()
        for done in range(0, texts, batch):
            model(input_ids=ids[: min(batch, texts - done)], output_hidden_states=True)
        torch.cuda.synchronize()
    return time.perf_counter() - start


def lrd_cost(args: argparse.Namespace) -> int:
    """The ``--lrd-cost`` run: one task's LRD seconds per device, and its share of a 7B forward on CUDA."""
    import torch

    devices = (
        args.devices.split(",") if args.devices else ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    )
    states = _pool(args.states, args.lrd_rows, args.dim, count=1)[0]
    print(f"one task's LRD stage: {args.states} states x {args.lrd_rows:,} sampled rows x {args.dim} "
          f"(caps 1000 / 1000 / 5000, the wrapper's parameters)")  # fmt: skip
    seconds, reference = _lrd_seconds(states, None)
    print(f"  numpy (CPU): {seconds:7.1f} s")
    for device in devices:
        seconds, summary = _lrd_seconds(states, device)
        differs = max(abs(summary[k] - v) for k, v in reference.items() if np.isfinite(v))
        line = f"  torch on {device}: {seconds:7.1f} s  (largest summary difference from numpy {differs:.1e})"
        if device.startswith("cuda"):
            forward = _forward_seconds(args.lrd_rows, args.tokens, device)
            share = seconds / forward
            line += (f"; 7B-shaped forward of {args.lrd_rows:,} texts x {args.tokens} tokens {forward:.1f} s: "
                     f"LRD {100 * share:.1f} % of it (target <= {100 * TARGET_LRD_SHARE_OF_FORWARD:.0f} %) "
                     f"{'✔' if share <= TARGET_LRD_SHARE_OF_FORWARD else '✘'}")  # fmt: skip
        print(line, flush=True)
    return 0


def _needed_gb(size: int, args: argparse.Namespace) -> float:
    return (9 * size * args.dim + 7000 * args.states * args.dim) * 2 / 2**30


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,50000,200000")
    parser.add_argument("--states", type=int, default=33)
    parser.add_argument("--dim", type=int, default=4096)
    parser.add_argument("--budget", type=float, default=1024)
    parser.add_argument("--spill-dir", default=None)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)  # a child's size
    parser.add_argument("--lrd-cost", action="store_true", help="one task's LRD stage per device instead")
    parser.add_argument(
        "--lrd-rows", type=int, default=5000, help="sampled rows of --lrd-cost (default 5000)"
    )
    parser.add_argument("--devices", default=None, help="torch devices of --lrd-cost (default cpu[,cuda])")
    parser.add_argument(
        "--tokens", type=int, default=64, help="tokens per text of the 7B forward (default 64)"
    )
    args = parser.parse_args()
    if args.lrd_cost:
        return lrd_cost(args)
    if args.size is not None:
        print(json.dumps(child(args)))
        return 0
    spill = args.spill_dir or tempfile.gettempdir()
    print(
        f"7B-shaped states: {args.states} x {args.dim}, float16 store, budget {args.budget:.0f} MB, spill in {spill}"
    )
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        free = shutil.disk_usage(spill).free / 2**30
        if _needed_gb(size, args) > 0.8 * free:
            print(f"N={size:,}: not run, needs ~{_needed_gb(size, args):.1f} GB of spill, {free:.1f} GB free")
            continue
        command = [sys.executable, __file__, "--size", str(size), "--states", str(args.states),
                   "--dim", str(args.dim), "--budget", str(args.budget)]  # fmt: skip
        if args.spill_dir:
            command += ["--spill-dir", args.spill_dir]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        r = rows[-1]
        print(f"N={r['n']:>8,}  storing {r['storing_s']:7.1f} s  LRD {r['lrd_s']:6.1f} s "
              f"(CPU {r['lrd_cpu_s']:6.1f} s)  per-layer "
              f"{r['per_layer_s']:7.1f} s ({r['chosen_states']} states)  "
              f"peak RSS +{r['peak_rss_over_start_mb']:6.0f} MB  "
              f"spill {r['spill_peak_mb']:8.0f} MB (+{r['spill_in_ram_mb']:.0f} MB in RAM) vs expected "
              f"{r['expected_mb']:8.0f} MB  sampled rows {r['sampled_rows']}", flush=True)  # fmt: skip
    if not rows:
        return 1
    rss = [r["peak_rss_over_start_mb"] for r in rows]
    lrd = [r["lrd_cpu_s"] for r in rows]  # process CPU time: other jobs on the machine disturb it less
    limit = args.budget + TARGET_RSS_MARGIN_MB
    disk_ok = all(
        abs(r["spill_peak_mb"] + r["spill_in_ram_mb"] - r["expected_mb"]) <= 0.01 * r["expected_mb"]
        for r in rows
    )
    print(f"peak RSS over start: {min(rss):.0f} .. {max(rss):.0f} MB (target <= budget + {TARGET_RSS_MARGIN_MB} = "
          f"{limit:.0f} MB at every N) {'✔' if max(rss) <= limit else '✘'}")  # fmt: skip
    print(f"LRD CPU time: {min(lrd):.1f} .. {max(lrd):.1f} s, largest / smallest {max(lrd) / min(lrd):.2f} "
          f"(target <= {TARGET_LRD_SPREAD}) {'✔' if max(lrd) / min(lrd) <= TARGET_LRD_SPREAD else '✘'}")  # fmt: skip
    print(f"disk (spill + RAM share) = chosen x N x d x 2 B + sampled rows x {args.states} x d x 2 B within 1 %: "
          f"{'✔' if disk_ok else '✘'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
