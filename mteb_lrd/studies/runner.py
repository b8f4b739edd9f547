"""What both studies share: loading models, a task's texts, one MTEB score, resumable JSON records.

A study model is a panel name (:mod:`mteb_lrd.models.panel`) or a local folder: a SentenceTransformer
folder, or a transformers decoder / encoder folder (loaded as the base model: hidden states need
no task head). Scores come from ``mteb.evaluate`` through the layer-dynamics wrapper
(:func:`mteb_lrd.with_layer_dynamics`), which is also the encoder for plain decoders.
"""

from __future__ import annotations

import logging
import shutil
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mteb_lrd import _compat
from mteb_lrd.extraction.architectures import locate
from mteb_lrd.extraction.extractor import LayerExtractor
from mteb_lrd.extraction.loading import load_pretrained
from mteb_lrd.extraction.templates import apply_template, resolve_template
from mteb_lrd.metrics.params import MetricParams
from mteb_lrd.metrics.summaries import REPRODUCE_MODES
from mteb_lrd.models.panel import PANEL
from mteb_lrd.models.panel_install import prepare
from mteb_lrd.parameters import DEFAULT_CAPS, Caps, rows_union
from mteb_lrd.pipeline import LayerDynamics, profile_texts
from mteb_lrd.progress import Progress
from mteb_lrd.studies.records import read_record, record_path, scratch_path, write_record

logger = logging.getLogger(__name__)

__all__ = [
    "LRD_PROMPTS",
    "TEXT_ORDERS",
    "CellMeasure",
    "CellProfile",
    "StudyModel",
    "load_study_model",
    "lrd_prompt",
    "mteb_encoder",
    "mteb_score",
    "profile_cell",
    "profile_outputs",
    "run_cells",
    "task_texts",
]


_CACHE_SHARD = 256
"""Texts per extraction shard of a cell's cache: what an interrupted cell recomputes at most (about
3 minutes of a 1.5B decoder on one CPU core)."""
TEXT_ORDERS: tuple[str, ...] = ("interleaved", "columns")
"""Order of a pair task's texts before de-duplication and sub-sampling: ``interleaved`` (the
authors': ``s1_0, s2_0, s1_1, s2_1, …``) or ``columns`` (every ``sentence1``, then every ``sentence2``)."""
LRD_PROMPTS: tuple[str, ...] = ("mteb", "none")
"""Prompt of the LRD extraction: ``mteb`` (the prompt mteb's run of the model uses for the task, so
LRD measures the representation that is scored; none for a plain transformers model) or ``none``
(the texts as they are, as the authors do)."""


@dataclass
class StudyModel:
    """A loaded model with the covariates model selection controls for.

    Attributes:
        name: panel name or folder name.
        model: a SentenceTransformer or a transformers base model.
        tokenizer: the tokenizer of a plain transformers model (``None`` for SentenceTransformers).
        family / params / dim / layers / kind: as in :class:`mteb_lrd.models.panel.PanelModel`.
        max_length: token truncation applied everywhere (SentenceTransformers: their
            ``max_seq_length`` is lowered to it).
        template: the resolved text template (:mod:`mteb_lrd.extraction.templates`) every text of
            the model goes into, for scoring, LRD, block influence and timing alike; ``None``: none.
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
    template: str | None = None

    def info(self) -> dict[str, Any]:
        """Covariates and description, JSON-serialisable."""
        keys = ("name", "family", "params", "dim", "layers", "kind", "max_length", "template")
        return {k: getattr(self, k) for k in keys}

    def texts(self, texts: Sequence[str]) -> list[str]:
        """``texts`` as the model reads them: put into its template when it has one."""
        return apply_template(texts, self.template)


def load_study_model(
    spec: str,
    *,
    cache_dir: str | Path | None = None,
    tokenizer: Any = None,
    max_length: int = 512,
    decoder_template: str | None = None,
) -> StudyModel:
    """Load a panel model by name (preparing it when needed) or a model folder.

    Args:
        spec: a panel name or a local folder.
        cache_dir: the panel's cache folder.
        tokenizer: an explicit tokenizer for a plain transformers folder.
        max_length: token truncation (a SentenceTransformer's ``max_seq_length`` is lowered to it).
        decoder_template: the text template of decoders (:data:`~mteb_lrd.extraction.templates.TEMPLATES`
            name or text; ``None`` / ``"none"``: bare texts); encoders keep their texts.

    Raises:
        ValueError: when ``spec`` is neither a panel name nor an existing folder, or for a bad template.
    """
    template = resolve_template(decoder_template)
    entry = PANEL.get(spec)
    path = prepare(spec, cache_dir) if entry is not None else Path(spec)
    if not path.is_dir():
        raise ValueError(f"{spec!r} is neither a panel model ({', '.join(PANEL)}) nor a model folder")
    sentence_transformer = (path / "modules.json").is_file()
    model, tok = load_pretrained(str(path), head="base", dtype=None if sentence_transformer else "float32",
                                 device="cpu", tokenizer=tokenizer)  # fmt: skip
    if tok is None:
        model.max_seq_length = min(int(model.max_seq_length or max_length), max_length)
    located = locate(model)
    hf = located.model
    params = sum(p.numel() for p in hf.parameters())
    kind: str
    if entry is not None:
        name, family, dim, kind = spec, entry.family, entry.dim, entry.kind
    else:
        name, family = path.name, str(getattr(hf.config, "model_type", type(hf).__name__))
        dim = int(getattr(hf.config, "hidden_size", 0))
        kind = "decoder" if located.spec.causal else ("sentence-transformer" if tok is None else "encoder")
    own_template = template if kind == "decoder" and tok is not None else None  # plain decoders
    return StudyModel(
        name, model, tok, family, params, dim, located.num_blocks, kind, max_length, own_template
    )


def task_texts(task: Any, order: str = "interleaved") -> list[str]:
    """The spec's texts of a loaded task's eval split: unique sentences of both columns for STS / pair
    tasks, the evaluation split's unique texts for classification; first appearance kept.

    Args:
        task: an mteb task instance.
        order: :data:`TEXT_ORDERS`; the authors interleave rows (``s1_0, s2_0, s1_1, …``), which
            decides which texts a capped sub-sample keeps and how texts share batches.

    Raises:
        ValueError: for an unknown order.
    """
    if order not in TEXT_ORDERS:
        raise ValueError(f"order must be one of {TEXT_ORDERS}; got {order!r}")
    task.load_data()
    split = task.metadata.eval_splits[0]
    subsets = task.dataset
    data = subsets["default"][split] if "default" in subsets else next(iter(subsets.values()))[split]
    columns = ("sentence1", "sentence2") if "sentence1" in data.column_names else ("text",)
    values = [[str(t) for t in data[column]] for column in columns]
    if order == "interleaved":
        texts = [text for row in zip(*values, strict=True) for text in row]
    else:
        texts = [text for column in values for text in column]
    return list(dict.fromkeys(texts))


def lrd_prompt(model: StudyModel, task_metadata: Any, policy: str = "mteb") -> str:
    """The prompt of a cell's LRD extraction under ``policy`` (:data:`LRD_PROMPTS`); ``""`` = none.

    ``mteb``: for a SentenceTransformer the prompt mteb's wrapper uses for the task (its
    ``model_prompts``; else the model's default prompt, as ``encode`` applies it); none for a plain
    transformers model (scored without a prompt). ``none``: none. The empty string (not ``None``)
    keeps the extractor from falling back to a SentenceTransformer's default prompt.

    Raises:
        ValueError: for an unknown policy.
    """
    if policy not in LRD_PROMPTS:
        raise ValueError(f"lrd_prompt must be one of {LRD_PROMPTS}; got {policy!r}")
    if policy == "none" or model.tokenizer is not None:
        return ""
    prompts = getattr(mteb_encoder(model), "model_prompts", None)
    prompt = _compat.resolve_prompt(prompts, task_metadata, None) if prompts else None
    if prompt is not None:
        return str(prompt)
    st = model.model
    name = getattr(st, "default_prompt_name", None)
    return str(st.prompts.get(name) or "") if name else ""


def mteb_encoder(model: StudyModel, scored: Any = None, *, cache_dir: str | Path | None = None) -> Any:
    """The mteb encoder that scores ``model`` (or ``scored``, e.g. a pruned variant of it); a plain
    transformers model's keeps its extraction shards in ``cache_dir`` when given (resumable).

    SentenceTransformers go through mteb's own wrapper (a pruned one from :func:`mteb_lrd.prune` is
    an experiment of its base there); plain transformers models through the layer-dynamics
    wrapper, the package's encoder for them, with its metrics cut to the minimum (the studies measure
    the dynamics themselves, on the spec's texts).
    """
    from mteb.models import SentenceTransformerEncoderWrapper

    from mteb_lrd.adapter.wrapper import with_layer_dynamics

    target = model.model if scored is None else scored
    if hasattr(target, "mteb_model_meta"):
        return target
    if model.tokenizer is None:
        with _compat.quiet_renamed_method_calls():  # mteb calls a method sentence-transformers renamed
            return SentenceTransformerEncoderWrapper(target)
    return with_layer_dynamics(
        target,
        tokenizer=model.tokenizer,
        max_length=model.max_length,
        template=model.template,
        per_layer=False,
        frenet_cap=3,
        nrs_cap=3,
        gfmi_cap=3,
        cache_dir=None if cache_dir is None else str(cache_dir),
    )


def mteb_score(encoder: Any, task: Any, *, batch_size: int = 32) -> dict[str, Any]:
    """Evaluate ``encoder`` on ``task`` with ``mteb.evaluate`` (no result cache); main score, time.

    Returns:
        ``{"main_score": float, "seconds": float, "layer_dynamics": dict | None}``.
    """
    import mteb

    start = time.perf_counter()
    with warnings.catch_warnings(), _compat.quiet_renamed_method_calls():
        # mteb_encoder keeps a plain decoder's in-run dynamics at 3 texts on purpose (the cells measure
        # their own on the spec's texts): the wrapper's "degenerate input" warning says nothing here.
        warnings.filterwarnings("ignore", message="mteb-lrd: degenerate input", category=UserWarning)
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


CellMeasure = Callable[[StudyModel, str, type], dict[str, Any]]
"""Measures one cell: ``(model, task name, task class) -> record``."""


def run_cells(
    models: Sequence[str | StudyModel],
    tasks: Mapping[str, type],
    out_dir: str | Path,
    measure: CellMeasure,
    *,
    max_length: int = 512,
    decoder_template: str | None = None,
) -> Path:
    """Measure every (model, task) cell without a record in ``out_dir`` and write its record.

    Models are loaded only when one of their cells is missing; each finished cell is written at
    once (atomically), so an interrupted study resumes with the next missing cell, and its
    :func:`scratch_path` folder is then deleted. Model folders
    are loaded with ``max_length`` and ``decoder_template`` (:func:`load_study_model`).

    Raises:
        ValueError: with no model or no task, or for a bad template.
    """
    template = resolve_template(decoder_template)  # a bad template fails before any model loads
    if not models or not tasks:
        raise ValueError("need at least one model and one task")
    todo: list[tuple[str | StudyModel, list[str]]] = []
    for spec in models:
        label = spec.name if isinstance(spec, StudyModel) else Path(str(spec)).name
        recorded = {t: read_record(record_path(out_dir, label, t)) for t in tasks}
        _check_same_template(recorded, spec.template if isinstance(spec, StudyModel) else template, out_dir)
        missing = [t for t, record in recorded.items() if record is None]
        if missing:
            todo.append((spec, missing))
        else:
            logger.info(f"{label}: all {len(tasks)} tasks recorded")
    cells: Progress[Any] = Progress(total=sum(len(m) for _, m in todo), desc="study cells", unit="cell")
    with cells:
        for spec, missing in todo:
            model = (
                spec
                if isinstance(spec, StudyModel)
                else load_study_model(str(spec), max_length=max_length, decoder_template=decoder_template)
            )
            for task_name in missing:
                logger.info(f"{model.name} × {task_name}")
                record = measure(model, task_name, tasks[task_name])
                write_record(record_path(out_dir, model.name, task_name), record)
                shutil.rmtree(scratch_path(out_dir, model.name, task_name), ignore_errors=True)
                cells.update(1)
    return Path(out_dir)


def _check_same_template(
    records: Mapping[str, dict[str, Any] | None], template: str | None, out_dir: str | Path
) -> None:
    """Refuse to add cells of a decoder under another text template than its recorded cells'."""
    for task, record in records.items():
        info = (record or {}).get("model", {})
        if info.get("kind") == "decoder" and info.get("template") != template:
            raise ValueError(
                f"{out_dir}: {info.get('name')} × {task} was recorded with decoder template "
                f"{info.get('template')!r}, this run asks for {template!r}; a study compares cells of one "
                "setup: use another --out, or the recorded --decoder-template"
            )


@dataclass
class CellProfile:
    """One extraction pass over a cell's sampled texts and its layer dynamics.

    Attributes:
        texts: the texts some family samples (the union of the families' sub-samples, task order).
        states: their ``(L+1, n, d)`` pooled, normalised states.
        dynamics: the LRD result with caps, seed, extraction settings and ``reproduce`` mode.
        rows: each family's sub-sample as positions in ``texts`` (``"frenet"``, ``"nrs"``, ``"gfmi"``).
        embeddings: the model's own output for ``texts`` (what mteb's run of the model encodes).
    """

    texts: list[str]
    states: np.ndarray
    dynamics: LayerDynamics
    rows: dict[str, np.ndarray]
    embeddings: np.ndarray


def profile_outputs(cell: CellProfile, prompt: str | None) -> dict[tuple[str, str], np.ndarray]:
    """``{(prompt, text): output}`` for the cell's extracted texts: what mteb's run of the model would
    compute for them (:class:`~mteb_lrd.studies.known_vectors.KnownVectors` serves them); blank
    texts are left out (extraction encodes them as ``" "``)."""
    return {(prompt or "", text): cell.embeddings[i] for i, text in enumerate(cell.texts) if text.strip()}


def profile_cell(
    model: StudyModel,
    texts: Sequence[str],
    *,
    caps: Caps = DEFAULT_CAPS,
    seed: int = 42,
    batch_size: int = 32,
    reproduce: str = "ours",
    prompt: str | None = None,
    cache_dir: str | Path | None = None,
    **lrd_kwargs: Any,
) -> CellProfile:
    """Per-family sub-samples of a cell's texts (each family its own cap), one extraction pass over
    their union, and the LRD result (neighbourhood sizes clamped to each sample, recorded).

    Args:
        model: the study model.
        texts: the cell's texts (:func:`task_texts`).
        caps: per-family caps (reference: Frenet 1000, NRS 1000, GFMI 5000).
        seed: sub-sampling and anchor seed.
        batch_size: texts per forward pass.
        reproduce: ``"ours"`` or ``"authors"``: the authors' summaries, last-token rule
            (``last_token="reference"``) and pooling override table.
        prompt: the extraction prompt (:func:`lrd_prompt`; ``""`` = none, ``None`` = the
            SentenceTransformer's default prompt).
        cache_dir: the extraction's resumable cache (e.g. the cell's :func:`scratch_path`).
        lrd_kwargs: :class:`~mteb_lrd.parameters.MetricParams` fields.

    Raises:
        ValueError: for an unknown ``reproduce`` mode.
    """
    if reproduce not in REPRODUCE_MODES:
        raise ValueError(f"reproduce must be one of {REPRODUCE_MODES}; got {reproduce!r}")
    authors = reproduce == "authors"
    extractor = LayerExtractor(
        model.model,
        model.tokenizer,
        batch_size=batch_size,
        max_length=model.max_length,
        show_progress_bar=False,
        template=model.template,
        last_token="reference" if authors else "true",
        pooling_overrides="reference" if authors and model.tokenizer is not None else None,
        cache_dir=None if cache_dir is None else str(cache_dir),
        shard_size=_CACHE_SHARD,
    )
    dynamics, extracted = profile_texts(
        extractor,
        list(texts),
        caps=caps,
        seed=seed,
        prompt=prompt,
        params=MetricParams(**lrd_kwargs),
        reproduce=reproduce,
    )
    rows = caps.rows(len(texts), seed)
    union = rows_union(rows)
    chosen = [texts[i] for i in union]
    positions = {name: np.searchsorted(union, idx) for name, idx in rows.items()}
    return CellProfile(chosen, extracted.states, dynamics, positions, extracted.embeddings)
