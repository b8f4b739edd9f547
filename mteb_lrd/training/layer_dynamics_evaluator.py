"""Layer dynamics as a sentence-transformers evaluator: watch LRD (and per-layer STS) while a model trains.

:class:`LayerDynamicsEvaluator` is a ``SentenceEvaluator``: pass it to
``SentenceTransformerTrainer(evaluator=...)`` (or the legacy ``fit``) and every evaluation logs its
metrics with the trainer, appends a row to its CSV and fills the model card's evaluation table.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import io
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sentence_transformers.sentence_transformer.evaluation import SentenceEvaluator

from mteb_lrd.extraction.extractor import LayerExtractor
from mteb_lrd.io import atomic_write_text
from mteb_lrd.keywords import options_or_keywords
from mteb_lrd.metrics.bootstrap import BOOTSTRAP_CONFIDENCE, bootstrap_spearman, check_settings
from mteb_lrd.metrics.lrd import LRDResult, lrd
from mteb_lrd.metrics.params import MetricParams
from mteb_lrd.metrics.permutation import unit_centred_ranks
from mteb_lrd.parameters import DEFAULT_CAPS, DEFAULT_PARAMS, DEFAULT_SEED, Caps
from mteb_lrd.pipeline import layer_dynamics, lrd_summary

__all__ = [
    "DEFAULT_SUMMARIES",
    "EvaluatorOptions",
    "LayerDynamicsEvaluator",
    "layer_spearman",
    "pair_cosines",
    "summary_keys",
]

logger = logging.getLogger(__name__)

DEFAULT_SUMMARIES = ("frenet_d0L", "nrs_mean_jaccard", "nrs_jaccard_first_last", "gfmi_mean_auc")
"""The LRD scores logged by default (any key of :meth:`~mteb_lrd.LRDResult.summary` may be asked for)."""


def layer_spearman(first: np.ndarray, second: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Spearman's ρ between ``gold`` ``(P,)`` and the cosine of each pair at every layer.

    Args:
        first / second: ``(L+1, P, d)`` vectors of the pairs' two sides (any norm).

    Returns:
        ``(L+1,)`` ρ per layer (0 where a layer's cosines are all equal).
    """
    return unit_centred_ranks(pair_cosines(first, second)) @ unit_centred_ranks(
        np.asarray(gold, dtype=np.float64)
    )


def pair_cosines(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The cosine of each pair ``(…, P)`` of ``first`` / ``second`` ``(…, P, d)`` vectors (any norm), float64."""
    a = first / np.linalg.norm(first, axis=-1, keepdims=True)
    b = second / np.linalg.norm(second, axis=-1, keepdims=True)
    return np.einsum("...d,...d->...", a, b, dtype=np.float64)


@contextlib.contextmanager
def _training_state_kept(model: Any) -> Iterator[None]:
    """Restore the model's train / eval mode of every module on exit (extraction switches to eval)."""
    modes = [(module, module.training) for module in model.modules()]
    try:
        yield
    finally:
        for module, training in modes:
            module.train(training)


@dataclass(frozen=True)
class EvaluatorOptions:
    """The settings of a :class:`LayerDynamicsEvaluator` as one validated object (its keywords).

    Attributes:
        name / caps / params / seed / summaries / batch_size / show_progress_bar / write_csv /
            bootstrap: as the evaluator's keywords.

    Raises:
        ValueError: for a value outside its domain (before any model runs).
    """

    name: str = ""
    caps: Caps = DEFAULT_CAPS
    params: MetricParams = DEFAULT_PARAMS
    seed: int = DEFAULT_SEED
    summaries: Sequence[str] | str = DEFAULT_SUMMARIES
    batch_size: int = 32
    show_progress_bar: bool = False
    write_csv: bool = True
    bootstrap: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ValueError(f"name must be a string; got {self.name!r}")
        if not isinstance(self.caps, Caps) or not isinstance(self.params, MetricParams):
            raise ValueError("caps must be a mteb_lrd.parameters.Caps and params a mteb_lrd.MetricParams")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer; got {self.batch_size!r}")
        if self.bootstrap != 0:
            check_settings(self.bootstrap, BOOTSTRAP_CONFIDENCE, name="bootstrap")
        _summaries(self.summaries)


class LayerDynamicsEvaluator(SentenceEvaluator):
    """LRD scores, and with STS pairs per-layer Spearman, of a SentenceTransformer at each evaluation.

    Every call runs one extraction pass over the texts (the pairs' sentences and ``texts``, each once)
    with the model as it is, then :func:`~mteb_lrd.pipeline.layer_dynamics` on the LRD texts (each
    family on its seeded sub-sample of at most ``caps`` texts, as ``mteb-lrd run``). The model's
    train / eval mode, gradients and device are left as they were.

    Args:
        texts: the texts the LRD scores are measured on (default: the pairs' unique sentences).
        sentences1 / sentences2 / scores: STS pairs with gold scores: adds ``spearman_cosine`` (the
            model's embeddings, as ``EmbeddingSimilarityEvaluator``) and ``spearman_cosine_h{l}``
            (the pooled hidden state ``h_l``) for every state.
        name: the data set's name, prefixed to every metric (``"{name}_frenet_d0L"``).
        caps / params / seed: the LRD sub-sampling caps, metric parameters and seed, as for
            :func:`~mteb_lrd.lrd`.
        summaries: which LRD scores to log (default :data:`DEFAULT_SUMMARIES`; ``"all"`` for every one).
        batch_size / show_progress_bar: of the extraction pass.
        write_csv: append one row per call to ``{output_path}/layer_dynamics_evaluation_{name}_results.csv``.
        options: every setting above as one :class:`EvaluatorOptions` (then leave the keywords
            at their defaults).
        bootstrap: with pairs, resamples of a percentile bootstrap over the pairs (the report's draws:
            :func:`~mteb_lrd.metrics.bootstrap.bootstrap_spearman`, seed 0, 95 %) whose interval of
            ``spearman_cosine`` the CSV gets as ``spearman_cosine_low`` / ``_high``, for the
            training figure's band (``0``, the default: none). The LRD scores get no band: each
            resample would need the whole LRD again.

    The primary metric is ``spearman_cosine`` with pairs, else the first summary (``frenet_d0L``);
    every logged score is better when higher (the paper's reading of LRD scores, and Spearman's ρ).

    Raises:
        ValueError: no text, pairs of unequal lengths, fewer than 3 pairs, or an unknown summary.
    """

    def __init__(
        self,
        texts: Sequence[str] | None = None,
        sentences1: Sequence[str] | None = None,
        sentences2: Sequence[str] | None = None,
        scores: Sequence[float] | None = None,
        *,
        name: str = "",
        caps: Caps = DEFAULT_CAPS,
        params: MetricParams = DEFAULT_PARAMS,
        seed: int = DEFAULT_SEED,
        summaries: Sequence[str] | str = DEFAULT_SUMMARIES,
        batch_size: int = 32,
        show_progress_bar: bool = False,
        write_csv: bool = True,
        bootstrap: int = 0,
        options: EvaluatorOptions | None = None,
    ) -> None:
        super().__init__()
        opts = options_or_keywords(EvaluatorOptions, options, "options", name=name, caps=caps, params=params,
                                   seed=seed, summaries=summaries, batch_size=batch_size,
                                   show_progress_bar=show_progress_bar, write_csv=write_csv,
                                   bootstrap=bootstrap)  # fmt: skip
        pairs = _pairs(sentences1, sentences2, scores)
        if opts.bootstrap and not pairs[2]:
            raise ValueError("bootstrap needs STS pairs (sentences1, sentences2, scores): it resamples them")
        lrd_texts = list(texts) if texts is not None else [*pairs[0], *pairs[1]]
        if len(lrd_texts) < 3:
            raise ValueError(f"need at least 3 texts for the layer dynamics, got {len(lrd_texts)}")
        self.unique = list(dict.fromkeys([*lrd_texts, *pairs[0], *pairs[1]]))
        """The texts one call extracts, each once."""
        where = {text: i for i, text in enumerate(self.unique)}
        self._lrd_rows = np.array([where[t] for t in dict.fromkeys(lrd_texts)], dtype=np.intp)
        self._pair_rows = tuple(np.array([where[t] for t in side], dtype=np.intp) for side in pairs[:2])
        self.scores = np.asarray(pairs[2], dtype=np.float64)
        self.summaries = _summaries(opts.summaries)
        self.name, self.caps, self.params, self.seed = opts.name, opts.caps, opts.params, opts.seed
        self.batch_size, self.show_progress_bar = opts.batch_size, opts.show_progress_bar
        self.write_csv, self.bootstrap = opts.write_csv, opts.bootstrap
        self.primary_metric = "spearman_cosine" if self.scores.size else self.summaries[0]
        self.greater_is_better = True
        self.csv_file = f"layer_dynamics_evaluation{'_' + self.name if self.name else ''}_results.csv"
        self._undefined_reported: set[str] = set()
        self.last_result: LRDResult | None = None
        """The full LRD result of the latest call (profiles per layer, not only the logged scores)."""

    def __call__(
        self, model: Any, output_path: str | None = None, epoch: int = -1, steps: int = -1
    ) -> dict[str, float]:
        """Measure ``model`` now; returns the metrics prefixed with ``name`` (and logs them)."""
        with _training_state_kept(model):
            extractor = LayerExtractor(
                model, batch_size=self.batch_size, show_progress_bar=self.show_progress_bar
            )
            extracted = extractor.extract(self.unique)
        result = layer_dynamics(extracted.states[:, self._lrd_rows], self.caps, self.seed, self.params)
        self.last_result = result
        summary = lrd_summary(result)
        metrics: dict[str, float] = {key: float(summary[key]) for key in self.summaries}
        if result.undefined:  # NaN in the log: say which states and why, once per distinct cause
            self._report_undefined(result.undefined)
        bands: dict[str, float] = {}
        if self.scores.size:
            metrics.update(self._sts(extracted.states, extracted.embeddings))
            bands = self._band(extracted.embeddings) if self.bootstrap else {}
        logger.info("layer dynamics%s: %s", f" on {self.name}" if self.name else "",
                    ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()))  # fmt: skip
        if output_path is not None and self.write_csv:
            self._append_csv(Path(output_path), epoch, steps, {**metrics, **bands})
        metrics = self.prefix_name_to_metrics(metrics, self.name)
        self.store_metrics_in_model_card_data(model, metrics, epoch, steps)
        return metrics

    def _report_undefined(self, undefined: dict[str, dict[str, str]]) -> None:
        message = "; ".join(f"{family}: {', '.join(f'{s} {why}' for s, why in reasons.items())}"
                            for family, reasons in undefined.items())  # fmt: skip
        if message not in self._undefined_reported:
            self._undefined_reported.add(message)
            logger.warning(
                "mteb-lrd: uninformative hidden states (%s): the scores reading them are NaN and the "
                "summaries start at the first informative state",
                message,
            )

    def _sts(self, states: np.ndarray, embeddings: np.ndarray) -> dict[str, float]:
        first, second = self._pair_rows
        final = layer_spearman(embeddings[None, first], embeddings[None, second], self.scores)[0]
        per_layer = layer_spearman(states[:, first], states[:, second], self.scores)
        return {
            "spearman_cosine": float(final),
            **{f"spearman_cosine_h{layer}": float(rho) for layer, rho in enumerate(per_layer)},
        }

    def _band(self, embeddings: np.ndarray) -> dict[str, float]:
        """The bootstrap interval of ``spearman_cosine`` over the pairs."""
        first, second = self._pair_rows
        cosine = pair_cosines(embeddings[first], embeddings[second])
        interval = bootstrap_spearman(cosine[None], self.scores, resamples=self.bootstrap)
        return {
            "spearman_cosine_low": float(interval.low[0]),
            "spearman_cosine_high": float(interval.high[0]),
        }

    def _append_csv(self, folder: Path, epoch: int, steps: int, metrics: dict[str, float]) -> None:
        """Append a row, rewriting the file atomically (a crash leaves the old file, never half a row).

        Raises:
            ValueError: when the file's header names other metrics (another evaluator's file).
        """
        path = folder / self.csv_file
        header = ["epoch", "steps", *metrics]
        existing = path.read_text(encoding="utf-8") if path.is_file() else ""
        if existing and next(csv.reader(io.StringIO(existing))) != header:
            raise ValueError(
                f"{path} has other columns than this evaluator's ({', '.join(header)}): give another name"
            )
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        if not existing:
            writer.writerow(header)
        writer.writerow([epoch, steps, *metrics.values()])
        os.makedirs(folder, exist_ok=True)
        atomic_write_text(path, existing + buffer.getvalue())

    def get_config_dict(self) -> dict[str, Any]:
        """What the model card lists about this evaluator."""
        return {"caps": [self.caps.frenet, self.caps.nrs, self.caps.gfmi], "seed": self.seed,
                "texts": int(self._lrd_rows.size), "pairs": int(self.scores.size)}  # fmt: skip


def _pairs(
    sentences1: Sequence[str] | None, sentences2: Sequence[str] | None, scores: Sequence[float] | None
) -> tuple[list[str], list[str], list[float]]:
    given = [x is not None for x in (sentences1, sentences2, scores)]
    if any(given) and not all(given):
        raise ValueError("give sentences1, sentences2 and scores together (or none of them)")
    if not all(given):
        return [], [], []
    one, two, gold = list(sentences1 or []), list(sentences2 or []), [float(s) for s in scores or []]
    if not len(one) == len(two) == len(gold):
        raise ValueError(
            f"sentences1, sentences2 and scores differ in length: {len(one)}, {len(two)}, {len(gold)}"
        )
    if len(gold) < 3:
        raise ValueError(f"need at least 3 pairs for a Spearman correlation, got {len(gold)}")
    if not np.all(np.isfinite(gold)):
        raise ValueError("scores must be finite numbers")
    return one, two, gold


@functools.cache
def summary_keys() -> tuple[str, ...]:
    """Every key of :meth:`~mteb_lrd.LRDResult.summary`, in its order (read off a tiny result)."""
    states = np.random.default_rng(0).normal(size=(3, 8, 4))
    return tuple(lrd(states, nrs_k=2, gfmi_k=2, n_anchors=4).summary())


def _summaries(summaries: Sequence[str] | str) -> tuple[str, ...]:
    known = summary_keys()
    chosen = known if summaries == "all" else tuple([summaries] if isinstance(summaries, str) else summaries)
    unknown = [key for key in chosen if key not in known]
    if not chosen or unknown:
        raise ValueError(f"unknown summaries {unknown or list(chosen)}; known: {', '.join(known)}")
    return chosen
