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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mteb_lrd.dysem.study_files import StudyResult, refuse_another_run, summary_stem, write_study
from mteb_lrd.dysem.study_options import (
    StudyOptions,
    candidate_languages,
    checked_tasks,
    model_path,
    resolve_sizes,
)

__all__ = ["run_study", "task_order"]

logger = logging.getLogger(__name__)


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
    from mteb_lrd.tasks.shared_tasks import shared_sts_dir

    started = time.monotonic()
    options = resolve_sizes(options)
    tasks = checked_tasks(options)
    sts_dir = Path(options.sts_dir) if options.sts_dir else shared_sts_dir()
    max_pairs = None if options.max_pairs is None else int(options.max_pairs)
    test_sets = {name: load_test_set(name, sts_dir, max_pairs) for name in tasks}
    if options.rows is not None:
        _check_rows(options.rows, {name: len(pairs.scores) for name, pairs in test_sets.items()})
    out = Path(options.output_dir)
    cache = Path(options.cache_dir) if options.cache_dir else out / "cache"
    path = model_path(options.model)
    dtype = resolve_dtype(options.dtype) or torch.float32
    languages = candidate_languages(options.languages)
    identity = _run_identity(path, options, tasks, languages, dtype)
    refuse_another_run(out / f"{summary_stem(path, options.rows)}.json", identity)
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
    return write_study(setup.out, summary_stem(setup.path, options.rows), summary)
