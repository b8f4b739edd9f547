"""What both studies share: loading models, a task's texts, one MTEB score, resumable JSON records.

A study model is a panel name (:mod:`mteb_lrd.studies.panel`) or a local folder: a SentenceTransformer
folder, or a transformers decoder / encoder folder (loaded as the base model: hidden states need
no task head). Scores come from ``mteb.evaluate`` through the layer-dynamics wrapper
(:func:`mteb_lrd.with_layer_dynamics`), which is also the encoder for plain decoders.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mteb_lrd.extraction.architectures import locate
from mteb_lrd.extraction.extractor import LayerExtractor
from mteb_lrd.io import atomic_write_json, read_json
from mteb_lrd.metrics.lrd import LRDResult
from mteb_lrd.metrics.states import subsample
from mteb_lrd.parameters import Caps, MetricParams
from mteb_lrd.pipeline import layer_dynamics
from mteb_lrd.studies.panel import PANEL, prepare

__all__ = [
    "CellMeasure",
    "StudyModel",
    "load_records",
    "load_study_model",
    "mteb_encoder",
    "mteb_score",
    "profile_cell",
    "read_record",
    "record_path",
    "run_cells",
    "task_texts",
    "write_record",
]


@dataclass
class StudyModel:
    """A loaded model with the covariates model selection controls for.

    Attributes:
        name: panel name or folder name.
        model: a SentenceTransformer or a transformers base model.
        tokenizer: the tokenizer of a plain transformers model (``None`` for SentenceTransformers).
        family / params / dim / layers / kind: as in :class:`mteb_lrd.studies.panel.PanelModel`.
        max_length: token truncation applied everywhere (SentenceTransformers: their
            ``max_seq_length`` is lowered to it).
    """

    name: str
    model: Any
    tokenizer: Any
    family: str
    params: int
    dim: int
    layers: int
    kind: str
    max_length: int = 512

    def info(self) -> dict[str, Any]:
        """Covariates and description, JSON-serialisable."""
        return {
            k: getattr(self, k) for k in ("name", "family", "params", "dim", "layers", "kind", "max_length")
        }


def load_study_model(
    spec: str, *, cache_dir: str | Path | None = None, tokenizer: Any = None, max_length: int = 512
) -> StudyModel:
    """Load a panel model by name (preparing it when needed) or a model folder.

    Args:
        spec: a panel name or a local folder.
        cache_dir: the panel's cache folder.
        tokenizer: an explicit tokenizer for a plain transformers folder.
        max_length: token truncation (a SentenceTransformer's ``max_seq_length`` is lowered to it).

    Raises:
        ValueError: when ``spec`` is neither a panel name nor an existing folder.
    """
    entry = PANEL.get(spec)
    path = prepare(spec, cache_dir) if entry is not None else Path(spec)
    if not path.is_dir():
        raise ValueError(f"{spec!r} is neither a panel model ({', '.join(PANEL)}) nor a model folder")
    if (path / "modules.json").is_file():
        from sentence_transformers import SentenceTransformer

        model, tok = SentenceTransformer(str(path), device="cpu"), None
        model.max_seq_length = min(int(model.max_seq_length or max_length), max_length)
    else:
        from transformers import AutoModel, AutoTokenizer

        model = AutoModel.from_pretrained(str(path), dtype="float32")
        tok = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(str(path))
    located = locate(model)
    hf = located.model
    params = sum(p.numel() for p in hf.parameters())
    if entry is not None:
        return StudyModel(
            spec, model, tok, entry.family, params, entry.dim, located.num_blocks, entry.kind, max_length
        )
    kind = "decoder" if located.spec.causal else ("sentence-transformer" if tok is None else "encoder")
    family = str(getattr(hf.config, "model_type", type(hf).__name__))
    return StudyModel(
        path.name, model, tok, family, params, int(hf.config.hidden_size), located.num_blocks, kind
    )


def task_texts(task: Any) -> list[str]:
    """The spec's texts of a loaded task's eval split: unique sentences of both columns for STS / pair
    tasks (first-appearance order), the evaluation split's unique texts for classification."""
    task.load_data()
    split = task.metadata.eval_splits[0]
    subsets = task.dataset
    data = subsets["default"][split] if "default" in subsets else next(iter(subsets.values()))[split]
    columns = ("sentence1", "sentence2") if "sentence1" in data.column_names else ("text",)
    texts: list[str] = []
    for column in columns:
        texts.extend(str(t) for t in data[column])
    return list(dict.fromkeys(texts))


def mteb_encoder(model: StudyModel, scored: Any = None) -> Any:
    """The mteb encoder that scores ``model`` (or ``scored``, e.g. a pruned variant of it).

    SentenceTransformers go through mteb's own wrapper (a pruned one from :func:`mteb_lrd.prune` is
    an experiment of its base there); plain transformers models through the layer-dynamics
    wrapper, the package's encoder for them, with its metrics cut to the minimum (the studies measure
    the dynamics themselves, on the spec's texts).
    """
    from mteb.models import SentenceTransformerEncoderWrapper

    from mteb_lrd import with_layer_dynamics

    target = model.model if scored is None else scored
    if hasattr(target, "mteb_model_meta"):
        return target
    if model.tokenizer is None:
        return SentenceTransformerEncoderWrapper(target)
    return with_layer_dynamics(
        target,
        tokenizer=model.tokenizer,
        max_length=model.max_length,
        per_layer=False,
        frenet_cap=3,
        nrs_cap=3,
        gfmi_cap=3,
    )


def mteb_score(encoder: Any, task: Any, *, batch_size: int = 32) -> dict[str, Any]:
    """Evaluate ``encoder`` on ``task`` with ``mteb.evaluate`` (no result cache); main score, time.

    Returns:
        ``{"main_score": float, "seconds": float, "layer_dynamics": dict | None}``.
    """
    import mteb

    start = time.perf_counter()
    result = mteb.evaluate(
        encoder,
        [task],
        cache=None,
        encode_kwargs={"batch_size": batch_size},
        co2_tracker=False,
        show_progress_bar=False,
    )
    seconds = time.perf_counter() - start
    task_result = result.task_results[0]
    split = task.metadata.eval_splits[0]
    subsets = task_result.scores[split]
    main = float(np.mean([s["main_score"] for s in subsets]))
    return {"main_score": main, "seconds": seconds, "layer_dynamics": subsets[0].get("layer_dynamics")}


def record_path(out_dir: str | Path, model: str, task: str, *, partial: bool = False) -> Path:
    """Where a cell's record lives: ``records/<model>/<task>.json`` (``.partial.json`` while unfinished)."""
    suffix = ".partial.json" if partial else ".json"
    return Path(out_dir) / "records" / model.replace("/", "__") / f"{task}{suffix}"


def write_record(path: Path, payload: dict[str, Any]) -> None:
    """Write a JSON record atomically; NaN becomes ``null``."""
    atomic_write_json(path, payload)


def read_record(path: Path) -> dict[str, Any] | None:
    """A record written by :func:`write_record`, or ``None`` when absent.

    Raises:
        ValueError: naming the file when it is not valid JSON.
    """
    return read_json(path) if path.is_file() else None


def load_records(out_dir: str | Path) -> list[dict[str, Any]]:
    """Every finished cell record of a study folder (``records/<model>/<task>.json``; the
    ``.partial.json`` files of unfinished cells are skipped)."""
    paths = sorted(Path(out_dir).glob("records/*/*.json"))
    return [read_json(p) for p in paths if not p.name.endswith(".partial.json")]


CellMeasure = Callable[[StudyModel, str, type], dict[str, Any]]
"""Measures one cell: ``(model, task name, task class) -> record``."""


def run_cells(
    models: Sequence[str | StudyModel],
    tasks: Mapping[str, type],
    out_dir: str | Path,
    measure: CellMeasure,
    *,
    max_length: int = 512,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Measure every (model, task) cell without a record in ``out_dir`` and write its record.

    Models are loaded only when one of their cells is missing; each finished cell is written at
    once (atomically), so an interrupted study resumes with the next missing cell.

    Raises:
        ValueError: with no model or no task.
    """
    if not models or not tasks:
        raise ValueError("need at least one model and one task")
    say = progress or (lambda _message: None)
    for spec in models:
        label = spec.name if isinstance(spec, StudyModel) else Path(str(spec)).name
        missing = [t for t in tasks if read_record(record_path(out_dir, label, t)) is None]
        if not missing:
            say(f"{label}: all {len(tasks)} tasks recorded")
            continue
        model = spec if isinstance(spec, StudyModel) else load_study_model(str(spec), max_length=max_length)
        for task_name in missing:
            say(f"{model.name} × {task_name}")
            record = measure(model, task_name, tasks[task_name])
            write_record(record_path(out_dir, model.name, task_name), record)
    return Path(out_dir)


def profile_cell(
    model: StudyModel, texts: Sequence[str], *, text_cap: int, seed: int, batch_size: int, **lrd_kwargs: Any
) -> tuple[list[str], np.ndarray, LRDResult]:
    """One extraction pass over a capped sample of a cell's texts, and its LRD.

    Returns:
        The sampled texts, their ``(L+1, n, d)`` states and the LRD result (neighbourhood sizes
        clamped to the sample, recorded in ``result.params``).
    """
    chosen = [texts[i] for i in subsample(len(texts), text_cap, seed)]
    extractor = LayerExtractor(
        model.model,
        model.tokenizer,
        batch_size=batch_size,
        max_length=model.max_length,
        show_progress_bar=False,
    )
    states = extractor.extract(chosen).states
    params = MetricParams(**lrd_kwargs)
    result = layer_dynamics(states, Caps(None, None, None), seed, params)
    return chosen, states, result
