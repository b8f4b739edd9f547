"""What a DySem study is told: :class:`StudyOptions` (the options of ``mteb-lrd dysem``), the sizes
``"auto"`` stands for on a GPU and on a CPU, and the checks that need no model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

__all__ = ["AUTO", "CPU_SIZES", "DEFAULT_TASKS", "GPU_SIZES", "StudyOptions", "candidate_languages",
           "checked_tasks", "model_path", "resolve_sizes"]  # fmt: skip

DEFAULT_TASKS: tuple[str, ...] = ("STSBenchmark", "STS12", "STS13", "STS14", "STS15", "STS16", "SICK-R")

AUTO = "auto"
"""The default of ``tasks``, ``dev_pairs`` and ``max_pairs``: sized for the device (see below)."""

GPU_SIZES: dict[str, Any] = {"tasks": DEFAULT_TASKS, "dev_pairs": 200, "max_pairs": None}
"""``auto`` with a GPU: the paper's seven STS sets in full (as the shared data has them: STS12 without
its MSRvid part), 200 dev pairs for the choices."""

CPU_SIZES: dict[str, Any] = {"tasks": ("STSBenchmark",), "dev_pairs": 50, "max_pairs": 200}
"""``auto`` on a CPU: a run of minutes (about 3,000 forward passes with the default 4 languages of
11 candidates): STS Benchmark only, 200 test pairs, 50 dev pairs for the language order."""


@dataclass
class StudyOptions:
    """Everything ``mteb-lrd dysem`` can be told (same names and defaults as its options).

    Attributes:
        model: panel name or folder of a causal LM.
        tasks: task names of :data:`mteb_lrd.dysem.evaluation.STS_TASKS`, or ``"auto"``.
        languages: candidate languages, or ``"auto"`` for the 11 of the parallel data.
        language_order: ``"agreement"`` / ``"consensus"`` (label-free), ``"labels"`` (the
            reference's, on dev labels; warns) or ``"given"`` (as listed).
        num_languages, k, value: DySem's ``L``, set size and value vector when not selected on dev.
        prompt: ``"EP"`` or ``"LP"``.
        component: the representation (``attention``, ``mlp``, ``hidden[:layer]``).
        select_on_dev: choose k, L and value on ``dev_pairs`` pairs of the STS Benchmark dev split
            over ``grid_k`` x ``grid_languages`` x {source, mean}. Only the ``grid_k`` below the
            model's hidden size d are tried (a k >= d selects every consensus dimension, the same
            set for every such k; the smallest k when none is below): the default is the
            reference's 256..2048 for d = 4096 models, plus 128 for small ones.
        max_pairs: sub-sample every test set to this many pairs (seed 42); ``None``: all.
            ``"auto"`` (and ``tasks`` / ``dev_pairs`` ``"auto"``): :data:`GPU_SIZES` when the model
            runs on a GPU, :data:`CPU_SIZES` otherwise (see :func:`resolve_sizes`).
        baselines: also run mean pooling, PromptEOL and the dense attention sum.
        translator: folder of an NLLB-style seq2seq model for texts the parallel data lack.
        sts_dir: the shared STS folder; ``None``: ``$MTEB_LRD_STS_DIR`` or ``../shared/data/sts``.
        output_dir: results, table and summary; cache_dir: caches (``None``: ``<output_dir>/cache``).
        batch_size: texts per forward pass; device: torch device; progress: progress bars.
        dtype: the model's compute dtype (``"float32"``, ``"bfloat16"``, ``"float16"``); ``None``: float32.
            Part of the cache's identity and recorded in the summary.
        rows: ``(start, stop)``: only these test pairs of every task (after ``max_pairs``), a chunk
            of a study too long for one run; the summary then carries the chunk's per-pair
            predictions, and :func:`mteb_lrd.dysem.chunks.assemble` joins the chunks into the whole
            study's table and comparisons. A task with no pair in the range is left out.
        choices_from: a summary of an earlier run of the same model and dev settings (e.g. the
            first chunk's) whose dev-split choices are reused instead of computed again.
    """

    model: str
    tasks: Sequence[str] | str = AUTO
    languages: str | Sequence[str] = "auto"
    language_order: str = "agreement"
    num_languages: int = 4
    k: int = 1024
    value: str = "source"
    prompt: str = "EP"
    component: str = "attention"
    select_on_dev: bool = False
    dev_pairs: int | str = AUTO
    grid_k: Sequence[int] = (128, 256, 512, 1024, 2048)
    grid_languages: Sequence[int] = (1, 2, 4, 6, 8)
    max_pairs: int | str | None = AUTO
    baselines: bool = True
    translator: str | None = None
    sts_dir: str | None = None
    output_dir: str = "results/dysem"
    cache_dir: str | None = None
    batch_size: int = 16
    device: str | None = None
    progress: bool = False
    dtype: str | None = None
    rows: tuple[int, int] | None = None
    choices_from: str | None = None


def model_path(name: str) -> Path:
    """The folder of ``name``: an existing path, or a panel model (built from its installed packages;
    see `mteb-lrd panel prepare`)."""
    path = Path(name)
    if path.exists():
        return path
    from mteb_lrd.models.panel import PANEL
    from mteb_lrd.models.panel_install import prepare

    if name in PANEL:
        return prepare(name)
    raise ValueError(f"--model {name!r} is neither a folder nor a panel name ({', '.join(PANEL)})")


def resolve_sizes(options: StudyOptions, on_gpu: bool | None = None) -> StudyOptions:
    """``options`` with every ``"auto"`` size replaced by :data:`GPU_SIZES` or :data:`CPU_SIZES`.

    Args:
        options: the study's settings.
        on_gpu: whether the model runs on a GPU; default: ``options.device`` names one, or none is
            named and CUDA is available.
    """
    if on_gpu is None:
        import torch

        on_gpu = options.device.startswith("cuda") if options.device else torch.cuda.is_available()
    sizes = GPU_SIZES if on_gpu else CPU_SIZES
    chosen = {name: sizes[name] for name in sizes if getattr(options, name) == AUTO}
    return replace(options, **chosen)


def checked_tasks(options: StudyOptions) -> list[str]:
    """The task list, after the checks that need no model (clear errors before any loading)."""
    from mteb_lrd.dysem.evaluation import STS_TASKS

    if AUTO in (options.tasks, options.dev_pairs, options.max_pairs):
        raise ValueError("resolve the 'auto' sizes first (resolve_sizes)")
    tasks = [t.strip() for t in options.tasks if t.strip()]
    unknown = [t for t in tasks if t not in STS_TASKS]
    if unknown:
        raise ValueError(f"unknown tasks {unknown}; available: {', '.join(STS_TASKS)}")
    if options.max_pairs is not None and int(options.max_pairs) < 1:
        raise ValueError(f"--max-pairs must be positive or 'all', got {options.max_pairs}")
    for option in ("k", "num_languages", "dev_pairs", "batch_size"):
        if int(getattr(options, option)) < 1:
            raise ValueError(f"--{option.replace('_', '-')} must be positive, got {getattr(options, option)}")
    return tasks


def candidate_languages(languages: str | Sequence[str]) -> list[str]:
    from mteb_lrd.dysem.languages import STSB_MULTI_LANGUAGES, normalize_language

    if isinstance(languages, str):
        if languages == "auto":
            return list(STSB_MULTI_LANGUAGES)
        languages = languages.split(",")
    return [normalize_language(x) for x in languages if x.strip()]
