"""What encoding every pruned variant from the blocks they share saves in the exhaustive prune study.

Prints, for one model on STS Benchmark dev pairs (a SentenceTransformer, or a decoder inside its
template), the variants being every block set of the given sizes among the candidate blocks (3
layers protected at each end):
  separate   the full model and each pruned copy encode the texts of both columns on their own
             (``encode``; a decoder's through the extractor, as the study's scoring wrapper does)
  shared     mteb_lrd.pruning.shared_prefix.encode_variants: one pass of the full model per batch of
             distinct texts, each single-block variant running only its blocks after its removed one,
             each pair (a, b) only those after b, from the state variant (a,) had there
and the ratio separate / shared, the blocks run per text by each, and the largest difference between
the two sets of vectors.

Usage: python benchmarks/bench_shared_prefix.py [--model all-mpnet-base-v2] [--pairs 100] [--sizes 1,2]
       python benchmarks/bench_shared_prefix.py --model smollm2-135m --decoder-template prompteol --sizes 1 --pairs 20
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

from mteb_lrd.extraction.architectures import locate  # noqa: E402
from mteb_lrd.extraction.extractor import LayerExtractor  # noqa: E402
from mteb_lrd.pruning.pruned import pruned_copy as prune  # noqa: E402
from mteb_lrd.pruning.rules import candidate_block_sets  # noqa: E402
from mteb_lrd.pruning.shared_prefix import encode_variants  # noqa: E402
from mteb_lrd.studies.runner import StudyModel, load_study_model  # noqa: E402
from mteb_lrd.tasks.shared_tasks import shared_sts_dir  # noqa: E402


def _resumed_at(blocks: list[int], num_blocks: int) -> int:
    """The block a variant resumes after: its last one, unless nothing runs after it (then its first)."""
    return blocks[-1] if blocks[-1] < num_blocks - 1 else blocks[0]


def _encode(study: StudyModel, model: object, texts: list[str], batch_size: int) -> np.ndarray:
    """What scoring ``model`` (the study's model or a pruned copy) encodes ``texts`` to, on its own."""
    if study.tokenizer is None:
        return model.encode(texts, batch_size=batch_size)  # type: ignore[attr-defined]
    extractor = LayerExtractor(model, study.tokenizer, template=study.template, max_length=study.max_length,
                               batch_size=batch_size, show_progress_bar=False)  # fmt: skip
    return extractor.extract(texts).embeddings


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="all-mpnet-base-v2", help="a panel name or a model folder")
    parser.add_argument("--decoder-template", default=None, help="a decoder's text template (e.g. prompteol)")
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--sizes", default="1,2", help="sizes of the candidate block sets (default 1,2)")
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    with (shared_sts_dir() / "STSBenchmark-multi" / "en" / "dev.jsonl").open(encoding="utf-8") as fh:
        pairs = [json.loads(line) for line in fh][: args.pairs]
    texts = [p["sentence1"] for p in pairs] + [p["sentence2"] for p in pairs]
    study = load_study_model(args.model, decoder_template=args.decoder_template)
    model = study.model
    num_blocks = locate(model).num_blocks
    sizes = [int(size) for size in args.sizes.split(",")]
    sets = [b for size in sizes for b in candidate_block_sets(num_blocks + 1, size)]

    start = time.perf_counter()
    separate = {(): _encode(study, model, texts, args.batch_size)}
    for blocks in sets:
        separate[tuple(blocks)] = _encode(study, prune(model, blocks), texts, args.batch_size)
    separate_s = time.perf_counter() - start

    plain = {} if study.tokenizer is None else {
        "tokenizer": study.tokenizer, "template": study.template, "max_length": study.max_length
    }  # fmt: skip
    start = time.perf_counter()
    codes, shared = encode_variants(model, texts, sets, batch_size=args.batch_size, **plain)
    shared_s = time.perf_counter() - start

    diff = max(float(np.abs(shared[key][codes] - vectors).max()) for key, vectors in separate.items())
    blocks_separate = num_blocks + sum(num_blocks - len(b) for b in sets)
    blocks_shared = num_blocks + sum(num_blocks - 1 - _resumed_at(b, num_blocks) for b in sets)
    distinct = len(set(texts))
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch threads "
          f"{__import__('torch').get_num_threads()}")  # fmt: skip
    print(f"model {args.model} (template {study.template!r}): {num_blocks} blocks, {len(sets)} variants + "
          f"the full model; {len(texts)} texts ({distinct} distinct)")  # fmt: skip
    print(f"separate {separate_s:8.1f} s   blocks run per text {blocks_separate}")
    print(f"shared   {shared_s:8.1f} s   blocks run per distinct text {blocks_shared}")
    print(f"ratio separate / shared: {separate_s / shared_s:.2f}x "
          f"(blocks {blocks_separate / blocks_shared:.2f}x, texts {len(texts) / distinct:.2f}x); "
          f"largest |difference| of the vectors {diff:.1e}")  # fmt: skip


if __name__ == "__main__":
    main()
