"""The DySem study: language order and the k / L / value grid on the dev split, DySem and its
baselines on the test sets through ``mteb.evaluate``, and the paper-style table.

:func:`run_study` is the body of ``mteb-lrd dysem`` (the command only parses arguments); it reads
nothing but the shared STS data and the model, and writes MTEB results under
``<output_dir>/results``, representation / translation caches under ``cache_dir`` and the table
(``dysem-<model>.md``) plus a JSON summary (``dysem-<model>.json``) under ``output_dir``.
Choices (language order, grid) only ever see the STS Benchmark dev split.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mteb_lrd.io import atomic_write_text

__all__ = ["AUTO", "CPU_SIZES", "DEFAULT_TASKS", "GPU_SIZES", "StudyOptions", "StudyResult", "assemble_summaries",
           "chunk_files", "model_path", "read_chunks", "resolve_sizes", "run_study", "task_order"]  # fmt: skip

logger = logging.getLogger(__name__)

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


@dataclass
class StudyResult:
    """What :func:`run_study` produced: the markdown table, the JSON summary and their paths."""

    table_text: str
    summary: dict[str, Any]
    table_path: Path
    summary_path: Path
    table: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)


def model_path(name: str) -> Path:
    """The folder of ``name``: an existing path, or a panel model (built from its installed packages; see `mteb-lrd panel prepare`)."""
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


def _check(options: StudyOptions) -> list[str]:
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


def _candidate_languages(languages: str | Sequence[str]) -> list[str]:
    from mteb_lrd.dysem.languages import STSB_MULTI_LANGUAGES, normalize_language

    if isinstance(languages, str):
        if languages == "auto":
            return list(STSB_MULTI_LANGUAGES)
        languages = languages.split(",")
    return [normalize_language(x) for x in languages if x.strip()]


def _test_plan(sizes: dict[str, int], num_languages: int, done: int, seconds: float) -> str:
    """One line: what the test stage encodes, and how long that takes at the rate seen so far."""
    passes = sum(2 * pairs * (1 + num_languages) for pairs in sizes.values())
    line = (
        f"test sets: {sum(sizes.values()):,} pairs of {len(sizes)} task(s), up to {passes:,} forward passes"
    )
    if done and seconds > 0:
        line += f", about {passes / (done / seconds) / 60:.0f} min at the {done / seconds:.1f} texts/s seen so far"
    return line


@dataclass(frozen=True)
class _Setup:
    """What every stage of a study shares: the resolved options, folders, model and translations."""

    options: StudyOptions
    tasks: list[str]
    sts_dir: Path
    out: Path
    path: Path
    extractor: Any
    languages: list[str]
    corpus: Any
    translations: Any
    started: float
    test_sets: dict[str, Any]
    """Per task: its test pairs (:class:`~mteb_lrd.dysem.evaluation.LabelledPairs`, all of a chunk's task)."""
    identity: dict[str, Any]
    """What the run's results depend on, as asked (the summary's ``run``; see :func:`_run_identity`)."""

    def dysem(self, langs: list[str], settings: dict[str, Any], **overrides: Any) -> Any:
        """A DySem model over ``langs`` with ``settings`` (k, L, value) and ``overrides``."""
        from mteb_lrd.dysem.model import DySemModel

        kwargs = {**settings, **overrides}
        kwargs["num_languages"] = min(kwargs["num_languages"], len(langs))
        return DySemModel(self.extractor, languages=langs, translations=self.translations,
                          prompt=self.options.prompt, component=self.options.component, **kwargs)  # fmt: skip


@dataclass(frozen=True)
class _DevChoices:
    """What the dev split decided: the language order, k / L / value, the source-only k, the grid."""

    pairs: int
    order: list[str]
    settings: dict[str, Any]
    source_k: int
    grid: list[dict[str, Any]]


def _set_up(options: StudyOptions) -> _Setup:
    """Checks (before any model loads), folders, the representation extractor and the translations."""
    import torch

    from mteb_lrd.dysem.evaluation import load_test_set
    from mteb_lrd.dysem.languages import STSB_MULTI_LANGUAGES
    from mteb_lrd.dysem.representation import RepresentationExtractor
    from mteb_lrd.dysem.translation import FallbackTranslations, ParallelCorpus, Seq2SeqTranslator
    from mteb_lrd.extraction.loading import resolve_dtype
    from mteb_lrd.integration.shared_tasks import shared_sts_dir

    started = time.monotonic()
    options = resolve_sizes(options)
    tasks = _check(options)
    sts_dir = Path(options.sts_dir) if options.sts_dir else shared_sts_dir()
    max_pairs = None if options.max_pairs is None else int(options.max_pairs)
    test_sets = {name: load_test_set(name, sts_dir, max_pairs) for name in tasks}
    if options.rows is not None:
        _check_rows(options.rows, {name: len(pairs.scores) for name, pairs in test_sets.items()})
    out = Path(options.output_dir)
    cache = Path(options.cache_dir) if options.cache_dir else out / "cache"
    path = model_path(options.model)
    dtype = resolve_dtype(options.dtype) or torch.float32
    languages = _candidate_languages(options.languages)
    identity = _run_identity(path, options, tasks, languages, dtype)
    _refuse_another_run(out / f"{_stem(path, options.rows)}.json", identity)
    extractor = RepresentationExtractor(
        path,
        batch_size=options.batch_size,
        device=options.device,
        dtype=dtype,
        cache_dir=cache / "representations",
        show_progress_bar=options.progress,
        prefetch=("attention", "hidden") if options.baselines else (),
    )
    corpus = ParallelCorpus.from_sts_multi(
        sts_dir / "STSBenchmark-multi", languages=[x for x in languages if x in STSB_MULTI_LANGUAGES]
    )
    sources: list[Any] = [corpus]
    if options.translator:
        sources.append(Seq2SeqTranslator(options.translator, cache_dir=cache / "translations"))
    return _Setup(options, tasks, sts_dir, out, path, extractor, languages, corpus,
                  FallbackTranslations(sources), started, test_sets, identity)  # fmt: skip


def _check_rows(rows: tuple[int, int], sizes: Mapping[str, int]) -> None:
    """Refuse a chunk's rows that are no range (:func:`~mteb_lrd.dysem.evaluation.row_range`) or hold
    no pair of any task (before the model loads)."""
    from mteb_lrd.dysem.evaluation import row_range

    start, stop = (int(x) for x in rows)
    if 0 <= start < stop and start >= max(sizes.values()):
        held = ", ".join(f"{name} {n}" for name, n in sizes.items())
        raise ValueError(f"--rows {start}:{stop} holds no test pair: the test sets have {held} pairs")
    row_range(rows, max(sizes.values()))


def _stem(path: Path, rows: tuple[int, int] | None) -> str:
    """The file name (no suffix) of a run's table and summary: the model's folder and the chunk's rows."""
    return f"dysem-{path.name}" + ("" if rows is None else "-rows{}-{}".format(*rows))


def _run_identity(
    path: Path, options: StudyOptions, tasks: Sequence[str], languages: Sequence[str], dtype: Any
) -> dict[str, Any]:
    """What a run's results depend on, as asked (the summary's ``run``): the model, tasks, languages,
    translator, representation and sizes, and the inputs of the dev choices the run makes (none
    when it reuses another run's, ``choices_from``)."""
    identity: dict[str, Any] = {
        "model": str(path.resolve()), "tasks": list(tasks), "languages": list(languages),
        "translator": options.translator, "prompt": options.prompt, "component": options.component,
        "dtype": str(dtype).removeprefix("torch."), "max_pairs": options.max_pairs,
        "baselines": options.baselines, "language_order": options.language_order,
    }  # fmt: skip
    if options.choices_from is not None:
        return identity
    if options.language_order != "given" or options.select_on_dev:
        identity["dev_pairs"] = int(options.dev_pairs)
    if options.select_on_dev:
        identity.update(select_on_dev=True, grid_k=[int(k) for k in options.grid_k],
                        grid_languages=[int(n) for n in options.grid_languages])  # fmt: skip
    else:
        identity.update(k=int(options.k), num_languages=int(options.num_languages), value=options.value)
    return identity


def _refuse_another_run(summary_path: Path, identity: Mapping[str, Any]) -> None:
    """Refuse (before any model loads) a run whose summary would replace another run's: same model
    and rows in the same folder, other settings (among those both runs record in ``run``). A rerun of
    the same run may replace its summary.

    Raises:
        ValueError: naming the file and the settings that differ, or a summary that records no ``run``.
    """
    if not summary_path.is_file():
        return
    recorded = json.loads(summary_path.read_text(encoding="utf-8")).get("run")
    if recorded is None:
        raise ValueError(f"{summary_path} holds a run that records no settings to compare with; writing "
                         "this run there would replace it: move it away or use another --output-dir")  # fmt: skip
    differ = [
        f"{k} {recorded[k]!r} -> {v!r}" for k, v in identity.items() if k in recorded and recorded[k] != v
    ]
    if differ:
        raise ValueError(
            f"{summary_path} holds a run with other settings ({'; '.join(differ)}); writing this run there "
            "would replace it: use another --output-dir"
        )


def _choose_on_dev(setup: _Setup) -> _DevChoices:
    """The language order and (``select_on_dev``) k, L and value, from the STS Benchmark dev split only."""
    from mteb_lrd.dysem.evaluation import load_pairs, order_languages
    from mteb_lrd.dysem.grid import best_point, grid_search

    if setup.options.choices_from is not None:
        return _reused_choices(setup, Path(setup.options.choices_from))
    options, languages = setup.options, setup.languages
    settings: dict[str, Any] = {"k": options.k, "num_languages": min(options.num_languages, len(languages)),
                                "value": options.value}  # fmt: skip
    dev = load_pairs(setup.sts_dir / "STSBenchmark-multi" / "en" / "dev.jsonl", int(options.dev_pairs))
    order = languages
    if options.language_order != "given":
        texts = len(set(dev.sentence1 + dev.sentence2))
        logger.info(f"language order ({options.language_order}): {texts} dev texts in {len(languages)} languages "
            f"and the source, about {texts * (len(languages) + 1):,} forward passes")  # fmt: skip
        candidates = setup.dysem(languages, settings, num_languages=len(languages))
        order = order_languages(candidates, dev.sentence1 + dev.sentence2, method=options.language_order,
                                pairs=dev)  # fmt: skip
    logger.info(f"language order ({options.language_order}): {', '.join(order)}")
    if not options.select_on_dev:
        return _DevChoices(len(dev.scores), order, settings, options.k, [])
    ordered = setup.dysem(order, settings, num_languages=len(order))
    src_1, stack_1 = ordered.representations(dev.sentence1)
    src_2, stack_2 = ordered.representations(dev.sentence2)
    hidden = setup.extractor.hidden_size
    ks = [k for k in options.grid_k if k < hidden] or [min(options.grid_k)]
    points = grid_search(
        src_1, stack_1, src_2, stack_2, dev.scores,
        ks=ks, num_languages=[n for n in options.grid_languages if n <= len(order)],
    )  # fmt: skip
    best = best_point(points)
    # the source-only row's k: on the source texts' own dimensions (L = 1 above reads order[0]'s)
    alone = grid_search(src_1, src_1[None], src_2, src_2[None], dev.scores, ks=ks, num_languages=[1],
                        values=("source",))  # fmt: skip
    logger.info(f"dev grid ({len(dev.scores)} pairs): best {best}")
    return _DevChoices(len(dev.scores), order, {"k": best.k, "num_languages": best.num_languages,
                       "value": best.value}, best_point(alone).k, [p.to_dict() for p in points])  # fmt: skip


def _dev_inputs(setup: _Setup) -> dict[str, Any]:
    """Everything the dev-split choices depend on: the model (weights, tokenizer, dtype), the
    candidate languages and the settings of the order and the grid."""
    o = setup.options
    return {"model": setup.extractor.identity, "languages": list(setup.languages),
            "language_order": o.language_order, "select_on_dev": o.select_on_dev, "dev_pairs": int(o.dev_pairs),
            "grid_k": [int(k) for k in o.grid_k], "grid_languages": [int(n) for n in o.grid_languages],
            "k": o.k, "num_languages": o.num_languages, "value": o.value, "prompt": o.prompt,
            "component": o.component, "translator": o.translator}  # fmt: skip


def _reused_choices(setup: _Setup, path: Path) -> _DevChoices:
    """The dev choices of the summary at ``path``, after checking they were made for this run.

    Raises:
        ValueError: a summary without its dev inputs, or made with other ones (named).
    """
    summary = json.loads(path.read_text(encoding="utf-8"))
    recorded = summary.get("dev")
    if not isinstance(recorded, dict) or "source_k" not in summary:
        raise ValueError(f"--choices-from {path}: the summary records no dev inputs; run without it")
    o = setup.options  # and what the chunks of one study share, refused now rather than when joined
    inputs = {**_dev_inputs(setup), "max_pairs": o.max_pairs, "baselines": o.baselines}
    found = {**recorded, "max_pairs": summary.get("max_pairs"), "baselines": summary.get("baselines")}
    differ = sorted(key for key, value in inputs.items() if found.get(key) != value)
    if differ:
        raise ValueError(f"--choices-from {path}: made with other {', '.join(differ)} than this run's")
    logger.info(f"dev choices from {path}: language order {', '.join(summary['language_order'])}, "
                f"{summary['settings']}")  # fmt: skip
    return _DevChoices(int(summary["dev_pairs"]), list(summary["language_order"]), dict(summary["settings"]),
                       int(summary["source_k"]), list(summary["grid"]))  # fmt: skip


@dataclass(frozen=True)
class _TestSets:
    """Per task: the mteb task class, its gold scores, whether translations cover it (every task of
    the run, a chunk's left-out ones too), and what it holds: ``{"pairs": n, "translations": bool}``,
    plus ``rows`` and ``total_pairs`` for a chunk."""

    classes: dict[str, type]
    gold: dict[str, tuple[type, list[float]]]
    covered: dict[str, bool]
    described: dict[str, dict[str, Any]]


def _test_sets(setup: _Setup) -> _TestSets:
    """The test sets of the run (a chunk's rows of them for ``rows``)."""
    from mteb_lrd.dysem.evaluation import row_range, sts_task, task_language

    sets = _TestSets({}, {}, {}, {})
    rows = setup.options.rows
    for name, whole in setup.test_sets.items():
        # judged on every task and all its pairs: a chunk runs the methods a run over every pair runs
        sets.covered[name] = setup.options.translator is not None or setup.corpus.covers(
            whole.sentence1 + whole.sentence2, task_language(name)
        )
        total = len(whole.scores)
        if rows is not None and int(rows[0]) >= total:
            logger.info(f"{name}: no test pair in rows {rows[0]}:{rows[1]} of its {total}; left out")
            continue
        sets.classes[name], pairs_count = sts_task(name, whole, rows=rows)
        sets.gold[name] = (sets.classes[name], (whole if rows is None else whole.chunk(rows)).scores)
        sets.described[name] = {"pairs": pairs_count, "translations": sets.covered[name]}
        if rows is not None:
            sets.described[name].update(rows=list(row_range(rows, total)), total_pairs=total)
    return sets


def task_order(order: Sequence[str], language: str, method: str) -> list[str]:
    """The language order for a task written in ``language``.

    The order is found once, on the English dev texts. Under ``"agreement"`` a text's own language
    leads (its vector is the source's: English leads on the English texts), so a task in another
    candidate language moves its own to the front and keeps the others' order; other methods keep
    the order as found.
    """
    if method != "agreement" or language not in order:
        return list(order)
    return [language, *(code for code in order if code != language)]


def _compared_models(
    setup: _Setup, choices: _DevChoices, covered: dict[str, bool]
) -> tuple[str, dict[str, Any]]:
    """DySem's label and ``{label: task name -> model}`` of DySem, source-only DySem and the baselines."""
    from mteb_lrd.dysem.evaluation import task_language
    from mteb_lrd.dysem.model import attention_sum_baseline, mean_pooling_baseline, prompteol_baseline

    settings = choices.settings
    method = setup.options.language_order
    mains: dict[str, Any] = {}  # one DySem model per source language

    def main(task: str) -> Any:
        order = task_order(choices.order, task_language(task), method)
        return mains.setdefault(order[0], setup.dysem(order, settings)) if covered[task] else None

    label = f"DySem (k={settings['k']}, L={settings['num_languages']}, {settings['value']})"
    models: dict[str, Callable[[str], Any]] = {label: main}
    if settings["num_languages"] > 1 or not all(covered.values()):
        models[f"DySem source only (k={choices.source_k}, L=1)"] = lambda t: setup.dysem(
            [task_language(t)], settings, k=choices.source_k, num_languages=1
        )
    if setup.options.baselines:
        extractor = setup.extractor
        dense = attention_sum_baseline(extractor, setup.options.prompt)
        eol, mean = prompteol_baseline(extractor), mean_pooling_baseline(extractor)
        models.update({"attention sum (dense)": lambda t: dense, "PromptEOL": lambda t: eol,
                       "mean pooling": lambda t: mean})  # fmt: skip
    return label, models


def _chunk_predictions(
    predictions: Path, table: dict[str, Any], task: str, cls: type
) -> dict[str, list[float]]:
    """Every model's per-pair similarities on ``task`` (the models that ran it)."""
    from mteb_lrd.dysem.evaluation import read_similarities

    return {
        label: read_similarities(predictions, label, cls()).tolist()
        for label in table
        if task in table[label]
    }


def run_study(options: StudyOptions) -> StudyResult:
    """Run the comparison: dev-split choices, then every model on every task; write table and summary.

    Args:
        options: the study's settings (see :class:`StudyOptions`).

    The progress lines (language order, the dev grid's best point, the test plan) are INFO
    records of this module's logger.

    Raises:
        ValueError: unknown tasks, non-positive sizes, rows past every test set, a summary of a run
            with other settings in the way, a model that is neither a folder nor a panel name (all
            before any model is loaded); a ``choices_from`` summary made with another model or dev
            settings (once the model is loaded: its identity is part of the check).
        FileNotFoundError: missing STS data (before any model is loaded).
    """
    from mteb_lrd.dysem.evaluation import evaluate_models, paired_comparisons
    from mteb_lrd.metrics.statistics import PAIRED_RESAMPLES, PAIRED_SEED

    setup = _set_up(options)
    options = setup.options
    choices = _choose_on_dev(setup)
    sets = _test_sets(setup)
    label, models = _compared_models(setup, choices, sets.covered)
    extractor = setup.extractor
    sizes = {t: d["pairs"] for t, d in sets.described.items()}
    logger.info(_test_plan(sizes, choices.settings["num_languages"], extractor.forward_texts,
                   time.monotonic() - setup.started))  # fmt: skip
    predictions = setup.out / "predictions"
    table = evaluate_models(models, sets.classes, setup.out / "results", batch_size=options.batch_size,
                            predictions_dir=predictions)  # fmt: skip
    others = [m for m in models if m != label]
    # a chunk's comparisons come from the joined chunks (a chunk of a few pairs has none of its own)
    comparisons = paired_comparisons(predictions, label, others, sets.gold) if options.rows is None else {}
    summary = {
        "model": str(setup.path),
        "run": setup.identity,
        "tasks": sets.described,
        "language_order": choices.order,
        "language_order_method": options.language_order,
        "settings": choices.settings,
        "source_k": choices.source_k,
        "prompt": options.prompt,
        "component": options.component,
        "dtype": str(extractor.dtype).removeprefix("torch."),
        "max_pairs": options.max_pairs,
        "baselines": options.baselines,
        "dev": _dev_inputs(setup),
        "dev_pairs": choices.pairs if options.select_on_dev or options.language_order != "given" else 0,
        "dev_labels_used": options.select_on_dev or options.language_order == "labels",
        "grid": choices.grid,
        "table": table,
        "paired": {
            "reference": label,
            "n_resamples": PAIRED_RESAMPLES,
            "seed": PAIRED_SEED,
            "tasks": comparisons,
        },  # fmt: skip
        "forward_texts": extractor.forward_texts,
        "forward_batches": extractor.forward_batches,
        "wall_seconds": time.monotonic() - setup.started,
    }
    if options.rows is not None:  # a chunk: what joining the chunks needs, per pair
        summary["predictions"] = {
            task: {"gold": list(gold), "models": _chunk_predictions(predictions, table, task, cls)}
            for task, (cls, gold) in sets.gold.items()
        }
    return _written(setup.out, _stem(setup.path, options.rows), summary)


def chunk_files(paths: Sequence[str | Path]) -> list[Path]:
    """The chunk summary files in ``paths``: JSON files, or folders of them (``dysem-*-rows*.json``).

    Raises:
        ValueError: none found.
    """
    files = [
        f for p in map(Path, paths) for f in (sorted(p.glob("dysem-*-rows*.json")) if p.is_dir() else [p])
    ]
    if not files:
        raise ValueError(f"no chunk summaries in {', '.join(map(str, paths))}")
    return files


def read_chunks(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """The chunk summaries in ``paths`` (:func:`chunk_files`), in that order."""
    return [json.loads(f.read_text(encoding="utf-8")) for f in chunk_files(paths)]


def assemble_summaries(paths: Sequence[str | Path], output_dir: str | Path) -> StudyResult:
    """Join chunk summaries (:func:`mteb_lrd.dysem.chunks.assemble`) and write the whole study's
    table and summary (``dysem-<model>.md`` / ``.json``) to ``output_dir``."""
    from mteb_lrd.dysem.chunks import assemble

    files = chunk_files(paths)
    try:
        summary = assemble([json.loads(f.read_text(encoding="utf-8")) for f in files])
    except ValueError as error:  # its "chunk i" is the i-th file
        named = "; ".join(f"chunk {i}: {f}" for i, f in enumerate(files))
        raise ValueError(f"{error} ({named})") from error
    stem = f"dysem-{Path(str(summary['model'])).name}"
    _refuse_another_run(Path(output_dir) / f"{stem}.json", summary["run"])
    return _written(Path(output_dir), stem, summary)


def _written(folder: Path, stem: str, summary: dict[str, Any]) -> StudyResult:
    """Write a study's table (``<stem>.md``: the paper-style table and the paired comparisons) and
    its summary (``<stem>.json``) to ``folder``."""
    from mteb_lrd.dysem.evaluation import format_comparisons, format_table, write_json_atomic

    paired, table = summary["paired"], summary["table"]
    text = (
        format_table(table, list(summary["tasks"]))
        + "\n\n"
        + format_comparisons(paired["reference"], paired["tasks"])
    )
    table_path, summary_path = folder / f"{stem}.md", folder / f"{stem}.json"
    atomic_write_text(table_path, text + "\n")
    write_json_atomic(summary_path, summary)
    return StudyResult(text, summary, table_path, summary_path, table)
