"""The two keys a layer-dynamics run adds to each task subset's scores.

``layer_dynamics``: Frenet / NRS / GFMI of the texts the task encoded (the spec's texts rule per
task type, each family on its own capped sample). ``per_layer``: the task's own evaluator re-run on
every layer's stored vectors through a :class:`~mteb_lrd.adapter.wrapper.LayerView` — no extra
forward pass. :mod:`mteb_lrd.adapter.seams` calls :func:`augment_scores` after each subset.
"""

from __future__ import annotations

import copy
import logging
import warnings
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np
from mteb.abstasks.abstask import AbsTask

from mteb_lrd import _compat
from mteb_lrd.adapter.layer_choice import choice_label
from mteb_lrd.adapter.layer_intervals import captured_pair_scores, pair_interval
from mteb_lrd.adapter.layer_scoring import (
    corpus_chunks,
    main_score_only,
    reused_dataloaders,
    search_depth,
    texts_read_once,
)
from mteb_lrd.adapter.options import (
    SUPPORTED_TASK_TYPES,
    LayerDynamicsOptions,
    is_lrd_call,
    texts_rule,
)
from mteb_lrd.adapter.provenance import run_provenance
from mteb_lrd.io import to_jsonable
from mteb_lrd.progress import Progress
from mteb_lrd.storage.vector_store import release_freed_memory

if TYPE_CHECKING:
    from mteb_lrd.adapter.protocols import LayerDynamicsEncoder
    from mteb_lrd.metrics.lrd import LRDResult
    from mteb_lrd.storage.lrd_sample import LRDSample, SampleDraw
    from mteb_lrd.storage.vector_store import TextKey

__all__ = ["augment_scores", "per_layer_scores", "task_layer_dynamics"]

logger = logging.getLogger(__name__)

SubsetEvaluator = Callable[..., dict[str, Any]]
"""The task's own (unwrapped) subset method: ``(task, model, data_split, **kwargs) -> scores``."""


def task_layer_dynamics(
    sample: LRDSample,
    options: LayerDynamicsOptions,
    info: Mapping[str, Any],
    reencode: Callable[[list[TextKey]], None],
    early: tuple[SampleDraw, LRDResult | None] | None = None,
) -> dict[str, Any]:
    """The ``layer_dynamics`` entry for one task subset.

    Only the rows each metric family samples are read, one layer at a time
    (:meth:`~mteb_lrd.storage.lrd_sample.LRDSample.measure`), so the working set is bounded by
    the caps and one layer; the numbers equal those of the metrics on every usable text with the
    same caps and seed.

    Args:
        sample: every state of the sampled texts, and every text's usability.
        options: caps, seed and metric parameters.
        info: extra fields recorded as they are (texts rule, prompt, pooling, final-norm convention).
        reencode: encodes sampled texts whose states were not kept into ``sample`` (the expected
            number of texts was wrong or unknown, or some texts turned out unusable).
        early: the same measurement made in the background on the same texts, when there is one.

    Returns:
        A JSON-serialisable dict: Frenet / NRS / GFMI profiles and summaries, the flat model-level
        ``summary`` (``frenet_d0L`` first), N used per metric, caps, seed, ``n_dropped`` (texts with
        NaN / Inf / zero vectors at some layer, excluded) and ``sample`` (expected texts, texts
        encoded again, whether it was measured in the background).
    """
    background = early is not None and early[1] is not None
    draw, result = (
        early if early is not None and early[1] is not None else sample.measure(options.params, reencode)
    )
    n = len(draw.keys)
    record: dict[str, Any] = {**info, "n_texts": draw.n_texts, "n_dropped": int(draw.n_texts - n)}
    if result is None:
        record["error"] = f"{n} usable texts: the metrics need at least 4"
        return to_jsonable(record)
    if draw.missing:
        logger.info("mteb-lrd: encoded %d sampled texts again (expected %s texts, %d usable of %d)",
                    len(draw.missing), sample.expected, n, draw.n_texts)  # fmt: skip
    measured = result.to_dict()
    measured.pop("n_dropped")
    measured["n_input"] = n
    record.update(measured)
    record.update(
        {
            "caps": asdict(options.caps),
            "n_used": {metric: int(idx.size) for metric, idx in draw.rows.items()},
            "sample": {
                "expected_texts": sample.expected,
                "n_reencoded": len(draw.missing),
                "background": background,
            },
            "store": sample.store.describe(),
        }
    )
    return to_jsonable(record)


RANDOM_STATES = ("rng_state", "np_rng")
"""Public random generators of mteb tasks (clustering, sub-sampling draw from them while scoring)."""


def random_states(task: AbsTask) -> dict[str, Any]:
    """A deep copy of the task's random generators, to replay the draws of its scoring."""
    return {name: copy.deepcopy(getattr(task, name)) for name in RANDOM_STATES if hasattr(task, name)}


def _set_random_states(task: AbsTask, states: Mapping[str, Any]) -> None:
    for name, value in states.items():
        setattr(task, name, copy.deepcopy(value))


def per_layer_scores(
    task: AbsTask,
    wrapper: LayerDynamicsEncoder,
    evaluate_subset: SubsetEvaluator,
    data_split: Any,
    kwargs: Mapping[str, Any],
    rng_before: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The task's own evaluator run on the stored vectors of each chosen hidden state (no forward pass).

    With ``rng_before`` (:func:`random_states` taken before the ordinary scoring of the subset) every
    layer is scored with the same random draws as the ordinary run, so the last layer's score equals
    the main score also for tasks that sample (clustering); the generators are left as the ordinary
    run left them, so later subsets draw exactly as in a plain run. A tqdm bar counts the layers when
    the encode kwargs ask for progress bars. Work that does not depend on the layer (dataloaders),
    search depth beyond the main score's cutoff and metrics the main score does not use (retrieval
    abstention) are not repeated: see
    :mod:`mteb_lrd.adapter.layer_scoring`.

    Returns:
        ``{"main_score": name, "layer_choice": ..., "num_states": L + 1, "layers": [chosen states],
        "relative_depth": [l / L], "scores": [...]}``, plus ``interval`` (a bootstrap interval over
        pairs of each layer's score, for STS tasks) and ``search_depth`` when a retrieval search was
        cut to the main score's cutoff.
    """
    from mteb.timing import TimingStack

    layers = wrapper.layers
    encode_kwargs = kwargs.get("encode_kwargs") or {}
    bar = Progress(
        layers,
        desc=f"{task.metadata.name}: per-layer scores",
        unit="layer",
        show=bool(encode_kwargs.get("show_progress_bar", False)),
    )
    scores = []
    rng_after = random_states(task) if rng_before is not None else {}
    texts = texts_read_once()
    read_rows = wrapper.memory.read_rows
    with (
        reused_dataloaders(),
        search_depth(task) as depth,
        main_score_only(task),
        corpus_chunks(read_rows),
        captured_pair_scores(task) as pairs,
    ):
        for layer in bar:
            if rng_before is not None:
                _set_random_states(task, rng_before)
            sub_kwargs = {**kwargs, "prediction_folder": None, "timer": TimingStack()}
            # retrieval re-filters data_split["queries"] in place: each layer gets the ordinary
            # run's split, so its inputs (and their dataloaders) are the same for every layer
            layer_split = dict(data_split) if isinstance(data_split, dict) else data_split
            layer_scores = evaluate_subset(task, wrapper.layer_view(layer, texts), layer_split, **sub_kwargs)
            _compat.add_main_score(task, layer_scores)
            scores.append(float(layer_scores["main_score"]))
    _set_random_states(task, rng_after)
    last = wrapper.extractor.num_layers
    record: dict[str, Any] = {
        "main_score": task.metadata.main_score,
        "layer_choice": choice_label(wrapper.options.per_layer_layers),
        "num_states": last + 1,
        "layers": list(layers),
        "relative_depth": [layer / last for layer in layers],
        "scored_on": str(wrapper.search_device(str(task.metadata.type)) or "cpu"),
        "scores": [None if not np.isfinite(s) else s for s in scores],
        "vectors": "L2-normalised pooled hidden state of each layer (h_0 = embeddings)",
    }
    interval = pair_interval(pairs, len(layers))
    if interval is not None:
        record["interval"] = to_jsonable(interval)  # an undefined layer's bounds: null, not NaN
    if depth is not None:
        record["search_depth"] = depth
    return record


def _first_selected_key(task_type: str, calls: list[tuple[Any, list[TextKey]]]) -> TextKey | None:
    """The first text the layer dynamics use (the spec's texts rule: :func:`is_lrd_call`), if any."""
    return next((keys[0] for ptype, keys in calls if keys and is_lrd_call(task_type, ptype)), None)


def augment_scores(
    task: AbsTask,
    wrapper: LayerDynamicsEncoder,
    evaluate_subset: SubsetEvaluator,
    scores: dict[str, Any],
    data_split: Any,
    kwargs: Mapping[str, Any],
    rng_before: Mapping[str, Any] | None = None,
) -> None:
    """Add ``layer_dynamics`` and ``per_layer`` to one subset's ``scores`` (in place).

    When they cannot be computed (no texts, a layer view asked for a text never encoded), each key
    records ``{"error": ...}`` and a warning names the task: the subset keeps its ordinary scores and
    an ``only-missing`` re-run does not retry it forever.
    """
    meta = task.metadata
    if meta.type not in SUPPORTED_TASK_TYPES:
        wrapper.warn_unsupported(meta.name, meta.type)
        return
    hf_split, hf_subset = kwargs.get("hf_split"), kwargs.get("hf_subset")
    calls = wrapper.calls.get((meta.name, str(hf_split), str(hf_subset)), [])
    first = _first_selected_key(meta.type, calls)
    options = wrapper.options
    try:
        if first is None:
            raise RuntimeError("the task encoded no texts through the wrapper")
        release_freed_memory()  # what the extraction freed, before the LRD and per-layer stages
        if options.layer_dynamics:
            info = {
                "texts": texts_rule(meta.type),
                "prompt": first[0],
                **wrapper.last_states_info,
                "run": run_provenance(),
            }
            early = wrapper.background.result(len(wrapper.sample))
            scores["layer_dynamics"] = task_layer_dynamics(
                wrapper.sample, options, info, wrapper.reencode, early
            )
            release_freed_memory()
        if options.per_layer:
            scores["per_layer"] = per_layer_scores(
                task, wrapper, evaluate_subset, data_split, kwargs, rng_before
            )
            scores["per_layer"]["store"] = wrapper.store.describe()
    except (ValueError, KeyError, RuntimeError) as err:
        message = f"mteb-lrd: no layer keys for {meta.name} ({hf_split}/{hf_subset}): {err}"
        logger.warning(message)
        warnings.warn(message, stacklevel=2)
        for key in options.wanted_keys:
            scores.setdefault(key, {"error": str(err)})
    finally:
        wrapper.clear()
