"""Effect of the authors' decoder last-token rule on LRD (a measurement, not a performance target).

For a decoder and the first N unique sentences of the STS Benchmark test set (rows interleaved, as
the authors order them), extract every layer twice — our true last token, and the authors' rule
(``last_token="reference"``: given order, left-padded batches of 4, position ``mask.sum(1) - 1``) —
and print the share of texts whose pooled token is not their last one, and the LRD summaries of
both. With no model given, a randomly initialised 6-layer Llama with the real WordPiece tokenizer of
the bundled all-MiniLM-L6-v2 stands in (realistic text lengths, meaningless weights).

    python -m benchmarks.last_token_effect                       # stand-in decoder, 240 texts
    python -m benchmarks.last_token_effect --model PATH -n 240   # e.g. `mteb-lrd panel path gemma-3-270m`
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from mteb_lrd.extraction.extractor import LayerExtractor
from mteb_lrd.parameters import Caps
from mteb_lrd.pipeline import profile_texts
from mteb_lrd.tasks.shared_tasks import shared_sts_dir

KEYS = ("frenet_d0L", "frenet_rank", "nrs_mean_jaccard", "nrs_jaccard_first_last", "gfmi_mean_auc")


def sts_texts(n: int) -> list[str]:
    path = shared_sts_dir() / "STSBenchmark-multi" / "en" / "test.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = [t for row in rows for t in (row["sentence1"], row["sentence2"])]
    return list(dict.fromkeys(texts))[:n]


def stand_in_decoder(folder: Path) -> tuple[str, object]:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaModel

    from mteb_lrd.defaults import default_model_path

    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=6,
        num_attention_heads=4,
        num_key_value_heads=4,
        pad_token_id=tokenizer.pad_token_id,
    )
    LlamaModel(config).eval().save_pretrained(folder)
    return str(folder), tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", help="a decoder folder (default: a random stand-in)")
    parser.add_argument("-n", type=int, default=240, help="unique STS Benchmark sentences (default 240)")
    args = parser.parse_args()
    texts = sts_texts(args.n)
    with tempfile.TemporaryDirectory() as tmp:
        model, tokenizer = (args.model, None) if args.model else stand_in_decoder(Path(tmp))
        rows = {}
        for rule in ("true", "reference"):
            extractor = LayerExtractor(
                model, tokenizer, last_token=rule, dtype="float32", show_progress_bar=False
            )
            dynamics, _ = profile_texts(extractor, texts, caps=Caps())
            rows[rule] = dynamics.summary()
            rows[rule]["n_dropped"] = dynamics.result.n_dropped
            tok = extractor.loaded.tokenizer
    lengths = np.array([len(tok(t, truncation=True, max_length=512)["input_ids"]) for t in texts])
    longest = np.array([lengths[s : s + 4].max() for s in range(0, len(texts), 4)]).repeat(4)[: len(texts)]
    shorter = lengths < longest
    on_pad = lengths - 1 < longest - lengths  # mask.sum - 1 falls in the left padding
    print(
        f"model: {args.model or 'random 6-layer Llama stand-in (MiniLM WordPiece tokenizer)'}, N = {len(texts)}"
    )
    print(f"texts not pooled at their last token: {shorter.mean():.1%} (on a pad: {on_pad.mean():.1%})")
    print(f"{'summary':<26} {'true last token':>16} {'authors rule':>14}")
    for key in (*KEYS, "n_dropped"):
        print(f"{key:<26} {rows['true'][key]:>16.4f} {rows['reference'][key]:>14.4f}")


if __name__ == "__main__":
    main()
