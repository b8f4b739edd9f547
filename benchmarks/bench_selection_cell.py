"""What one cell of the selection study costs, against scoring it as a plain mteb run would.

Prints, for one panel model on one study task (``--pairs`` STS pairs, reference caps):
  reference  the cell's LRD profile (one extraction pass over the sampled texts) and a plain
             mteb.evaluate of the model on the task: every text of each column encoded again
  ours       mteb_lrd.studies.selection.measure_selection_cell: the profile, then mteb scoring
             through KnownVectors (the profiled texts' outputs reused, each distinct text of a
             column encoded once)
and the ratio reference / ours, with both main scores.

Usage: python benchmarks/bench_selection_cell.py [--model smollm2-135m] [--task LocalSTS16] [--pairs 600]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

from mteb_lrd.studies.options import CellOptions  # noqa: E402
from mteb_lrd.studies.runner import (  # noqa: E402
    load_study_model,
    lrd_prompt,
    mteb_encoder,
    mteb_score,
    profile_cell,
    task_texts,
)
from mteb_lrd.studies.selection import measure_selection_cell  # noqa: E402
from mteb_lrd.studies.tasks import TaskSizes, study_tasks  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m", help="a panel name or a model folder")
    parser.add_argument("--task", default="LocalSTS16")
    parser.add_argument("--pairs", type=int, default=600)
    parser.add_argument("--template", default="prompteol", help="decoder template ('none': bare texts)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        task = study_tasks([args.task], TaskSizes(max_pairs=args.pairs), data_dir=data_dir)[args.task]
        model = load_study_model(args.model, decoder_template=args.template)
        options = CellOptions(decoder_template=model.template)

        start = time.perf_counter()
        instance = task()
        texts = task_texts(instance, options.text_order)
        profile_cell(model, texts, caps=options.caps, seed=options.seed, batch_size=options.batch_size,
                     prompt=lrd_prompt(model, task.metadata))  # fmt: skip
        plain = mteb_score(mteb_encoder(model), instance, batch_size=options.batch_size)["main_score"]
        reference_s = time.perf_counter() - start

        start = time.perf_counter()
        record = measure_selection_cell(model, task, options)
        ours_s = time.perf_counter() - start

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch threads {torch.get_num_threads()}")  # fmt: skip
    print(f"{args.model} on {args.task}: {args.pairs} pairs, {record['n_texts']} distinct texts, "
          f"{record['outputs_reused']} outputs reused")  # fmt: skip
    print(f"reference {reference_s:8.1f} s   main score {plain:.6f}")
    print(f"ours      {ours_s:8.1f} s   main score {record['main_score']:.6f}")
    print(f"ratio reference / ours: {reference_s / ours_s:.2f}x")


if __name__ == "__main__":
    main()
