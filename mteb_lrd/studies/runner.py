"""What both studies share: loading models, a task's texts, one MTEB score, resumable JSON records.

A study model is a panel name (:mod:`mteb_lrd.studies.panel`) or a local folder: a SentenceTransformer
folder, or a transformers decoder / encoder folder (loaded as the base model: hidden states need
no task head). Scores come from ``mteb.evaluate`` through the layer-dynamics wrapper
(:func:`mteb_lrd.with_layer_dynamics`), which is also the encoder for plain decoders.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mteb_lrd.studies.panel import PANEL, prepare

__all__ = [
    "StudyModel",
    "load_study_model",
    "mteb_encoder",
    "load_records",
    "mteb_score",
    "read_record",
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
    from mteb_lrd.extraction.architectures import locate

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

    SentenceTransformers go through mteb's own wrapper (a ``PrunedModel`` from
    :func:`mteb_lrd.prune` already is one); plain transformers models through the layer-dynamics
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
        name=model.name,
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


def write_record(path: Path, payload: dict[str, Any]) -> None:
    """Write a JSON record atomically (temp file + ``os.replace``); NaN becomes ``null``."""
    from mteb_lrd.metrics import to_jsonable

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(to_jsonable(payload), indent=1))
    os.replace(tmp, path)


def load_records(out_dir: str | Path) -> list[dict[str, Any]]:
    """Every finished cell record of a study folder (``records/<model>/<task>.json``; the
    ``.partial.json`` files of unfinished cells are skipped)."""
    paths = sorted(Path(out_dir).glob("records/*/*.json"))
    return [read_record(p) for p in paths if not p.name.endswith(".partial.json")]  # type: ignore[misc]


def read_record(path: Path) -> dict[str, Any] | None:
    """A record written by :func:`write_record`, or ``None`` when absent."""
    return json.loads(path.read_text()) if path.is_file() else None
