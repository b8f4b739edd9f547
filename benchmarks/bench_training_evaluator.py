"""What the layer-dynamics evaluator costs inside a training run.

Prints, for one SentenceTransformer on STS Benchmark dev pairs (median of --repeats):
  evaluator      LayerDynamicsEvaluator(model): one extraction pass, LRD at the default caps, per-layer STS
  encode         model.encode of the same unique texts (what a plain STS evaluation's forward passes cost)
  stock          sentence-transformers' EmbeddingSimilarityEvaluator on the same pairs
  training step  one CosineSimilarityLoss step (forward, backward, AdamW) at --batch-size
and the ratios: evaluator / encode, evaluator / stock, evaluator in training steps, and the share of
a run's time spent evaluating every --eval-steps steps.

Usage: python benchmarks/bench_training_evaluator.py [--model FOLDER] [--pairs 1500] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402
from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator  # noqa: E402
from sentence_transformers.sentence_transformer.losses import CosineSimilarityLoss  # noqa: E402

from mteb_lrd import LayerDynamicsEvaluator  # noqa: E402
from mteb_lrd.defaults import default_model_path  # noqa: E402
from mteb_lrd.tasks.shared_tasks import shared_sts_dir  # noqa: E402


def _median_seconds(run, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _step_seconds(model: SentenceTransformer, pairs: list[dict], batch_size: int, steps: int) -> float:
    """Median wall time of one training step (tokenise, forward, backward, AdamW step)."""
    loss = CosineSimilarityLoss(model)
    optimiser = torch.optim.AdamW(model.parameters(), lr=2e-5)
    model.train()
    times = []
    for step in range(steps):
        batch = pairs[step * batch_size : (step + 1) * batch_size]
        start = time.perf_counter()
        features = [model.preprocess([p[key] for p in batch]) for key in ("sentence1", "sentence2")]
        labels = torch.tensor([p["score"] / 5 for p in batch])
        loss(features, labels).backward()
        optimiser.step()
        optimiser.zero_grad()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])  # the first step warms up


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default=str(default_model_path()))
    parser.add_argument("--pairs", type=int, default=1500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--eval-steps", type=int, default=50)
    args = parser.parse_args()
    with (shared_sts_dir() / "STSBenchmark-multi" / "en" / "dev.jsonl").open(encoding="utf-8") as fh:
        pairs = [json.loads(line) for line in fh][: args.pairs]
    one, two, gold = ([p[k] for p in pairs] for k in ("sentence1", "sentence2", "score"))
    model = SentenceTransformer(args.model, device="cpu")
    ours = LayerDynamicsEvaluator(None, one, two, gold, name="dev", write_csv=False)
    stock = EmbeddingSimilarityEvaluator(one, two, gold, name="dev", write_csv=False)
    unique = list(dict.fromkeys([*one, *two]))
    ours(model)  # warm-up
    t_ours = _median_seconds(lambda: ours(model), args.repeats)
    t_encode = _median_seconds(lambda: model.encode(unique, batch_size=32), args.repeats)
    t_stock = _median_seconds(lambda: stock(model), args.repeats)
    t_step = _step_seconds(model, pairs, args.batch_size, steps=12)
    share = t_ours / (args.eval_steps * t_step + t_ours)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")  # fmt: skip
    print(f"model {args.model}: {len(pairs)} dev pairs, {len(unique)} unique texts")
    print(f"evaluator {t_ours:.2f} s | encode {t_encode:.2f} s | stock evaluator {t_stock:.2f} s | "
          f"training step (batch {args.batch_size}) {t_step:.3f} s")  # fmt: skip
    print(f"evaluator / encode {t_ours / t_encode:.2f}x; evaluator / stock {t_ours / t_stock:.2f}x; "
          f"one evaluation = {t_ours / t_step:.0f} training steps; evaluating every {args.eval_steps} steps "
          f"takes {share:.0%} of the run")  # fmt: skip


if __name__ == "__main__":
    main()
