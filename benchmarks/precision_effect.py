"""Effect of the compute precision of a decoder on LRD (a measurement, not a performance target).

The authors run decoders in float16 (on a GPU); we run every model of the studies in float32. For a
decoder and the first N unique sentences of the STS Benchmark test set, extract every layer in
float32, float16 and bfloat16 (our true last token, one thread) and print the LRD summaries of each
and the seconds each took. A precision whose vectors are unusable (every text non-finite at some
layer, e.g. an overflow) is reported with the error instead of numbers.

    python -m benchmarks.precision_effect --model PATH -n 240   # e.g. `mteb-lrd panel path smollm2-135m`
"""

from __future__ import annotations

import argparse
import logging
import math
import time

import torch

from benchmarks.last_token_effect import KEYS, sts_texts
from mteb_lrd.extraction.extractor import LayerExtractor
from mteb_lrd.parameters import Caps
from mteb_lrd.pipeline import profile_texts

DTYPES = ("float32", "float16", "bfloat16")
logger = logging.getLogger(__name__)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", required=True, help="a decoder folder")
    parser.add_argument("-n", type=int, default=240, help="unique STS Benchmark sentences (default 240)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    torch.set_num_threads(1)
    texts = sts_texts(args.n)
    rows, seconds = {}, {}
    for dtype in DTYPES:
        extractor = LayerExtractor(args.model, None, dtype=dtype, show_progress_bar=False)
        start = time.perf_counter()
        try:
            dynamics, _ = profile_texts(extractor, texts, caps=Caps())
        except ValueError as error:
            logger.warning("%s: %s", dtype, error)
            dynamics = None
        seconds[dtype] = time.perf_counter() - start
        rows[dtype] = dynamics.summary() if dynamics is not None else dict.fromkeys(KEYS, math.nan)
    print(f"model: {args.model}, N = {len(texts)}, 1 thread")
    print(f"{'summary':<26}" + "".join(f"{dtype:>12}" for dtype in DTYPES))
    for key in KEYS:
        print(f"{key:<26}" + "".join(f"{rows[dtype][key]:>12.4f}" for dtype in DTYPES))
    print(f"{'seconds':<26}" + "".join(f"{seconds[dtype]:>12.1f}" for dtype in DTYPES))


if __name__ == "__main__":
    main()
