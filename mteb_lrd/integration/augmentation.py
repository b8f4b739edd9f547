"""The two mteb seams behind :func:`mteb_lrd.with_layer_dynamics`, patched in place.

mteb has no evaluator hooks: every task family funnels into ``AbsTask*._evaluate_subset`` and
results are cached by ``mteb.evaluate._check_cache``. :func:`install` wraps both so that, **only
when the model is a layer-dynamics wrapper**, a subset's scores gain ``layer_dynamics`` and
``per_layer``, and a cached result lacking them counts as missing (re-running adds them instead
of silently skipping). For any other model the wrapped functions call the originals unchanged.
Installing is idempotent and happens on the first ``with_layer_dynamics`` call.
"""

from __future__ import annotations

import functools
import importlib
import logging
import warnings
import weakref
from dataclasses import asdict
from typing import Any

import numpy as np

from mteb_lrd.integration.wrapper import _DOCUMENT_TYPES, SUPPORTED_TASK_TYPES, LayerDynamicsOptions, _model_class

__all__ = ["LAYER_KEYS", "augment_scores", "install", "layer_dynamics", "per_layer_scores", "track"]

logger = logging.getLogger(__name__)

LAYER_KEYS = ("layer_dynamics", "per_layer")
_ORIGINAL = "__mteb_lrd_original__"
# id(ModelMeta) -> the wrapper owning it: _check_cache only sees the meta, not the model.
_WRAPPERS: dict[int, weakref.ref] = {}


def track(wrapper: Any) -> None:
    """Remember ``wrapper`` so cached results of its model meta are checked for the layer keys."""
    _WRAPPERS[id(wrapper.mteb_model_meta)] = weakref.ref(wrapper)


def _wrapper_for(meta: Any) -> Any:
    ref = _WRAPPERS.get(id(meta))
    wrapper = ref() if ref is not None else None
    return wrapper if wrapper is not None and wrapper.mteb_model_meta is meta else None


def _wanted_keys(options: LayerDynamicsOptions) -> list[str]:
    return [
        key for key, on in zip(LAYER_KEYS, (options.layer_dynamics, options.per_layer), strict=True) if on
    ]


def layer_dynamics(states: np.ndarray, options: LayerDynamicsOptions, info: dict[str, Any]) -> dict[str, Any]:
    """The ``layer_dynamics`` entry for one task subset.

    Args:
        states: ``(L+1, N, d)`` pooled vectors of the task's texts (see the spec's texts rule).
        options: caps, seed and metric parameters.
        info: extra fields recorded as they are (texts rule, prompt, pooling, final-norm convention).

    Returns:
        A JSON-serialisable dict: Frenet / NRS / GFMI profiles and summaries, the flat model-level
        ``summary`` (``frenet_d0L`` first), N used per metric, caps, seed and ``n_dropped`` (rows with
        NaN / Inf / zero vectors at some layer, excluded).
    """
    from mteb_lrd.metrics import to_jsonable
    from mteb_lrd.pipeline import Caps, MetricParams
    from mteb_lrd.pipeline import layer_dynamics as compute

    with np.errstate(invalid="ignore", over="ignore"):
        valid = (np.isfinite(states).all(axis=2) & (np.abs(states).sum(axis=2) > 0)).all(axis=0)
    x = states[:, valid]
    n = x.shape[1]
    record: dict[str, Any] = {**info, "n_texts": int(states.shape[1]), "n_dropped": int((~valid).sum())}
    if n < 4:
        record["error"] = f"{n} usable texts: the metrics need at least 4"
        return to_jsonable(record)
    caps = Caps(frenet=options.frenet_cap, nrs=options.nrs_cap, gfmi=options.gfmi_cap)
    index = caps.rows(n, options.seed)
    params = MetricParams(  # k's clamped to N-1 on tiny tasks
        rank=options.rank,
        var_threshold=options.var_threshold,
        nrs_k=min(options.nrs_k, index["nrs"].size - 1),
        n_anchors=options.n_anchors,
        gfmi_k=min(options.gfmi_k, index["gfmi"].size - 1),
    )
    # One shared kNN search per layer when the three sub-samples coincide (N below every cap).
    result = compute(x, caps, options.seed, params).to_dict()
    result.pop("n_dropped")
    record.update(result)
    record.update({"caps": asdict(caps), "n_used": {metric: int(idx.size) for metric, idx in index.items()}})
    return to_jsonable(record)


def per_layer_scores(task: Any, wrapper: Any, data_split: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The task's own evaluator run on every layer's stored vectors (no forward pass).

    Returns:
        ``{"main_score": name, "layers": [0..L], "relative_depth": [l / L], "scores": [...]}``.
    """
    from mteb.timing import TimingStack

    num_states = wrapper.store.chunks[0].shape[0]
    scores = []
    for layer in range(num_states):
        sub_kwargs = {**kwargs, "prediction_folder": None, "timer": TimingStack()}
        layer_scores = task._evaluate_subset(wrapper.layer_view(layer), data_split, **sub_kwargs)
        task._add_main_score(layer_scores)
        scores.append(float(layer_scores["main_score"]))
    depth = num_states - 1
    return {
        "main_score": task.metadata.main_score,
        "layers": list(range(num_states)),
        "relative_depth": [layer / depth for layer in range(num_states)],
        "scores": [None if not np.isfinite(s) else s for s in scores],
        "vectors": "L2-normalised pooled hidden state of each layer (h_0 = embeddings)",
    }


def _selected_keys(wrapper: Any, task_type: str, calls: list[tuple[Any, list]]) -> list[tuple[str, str]]:
    if task_type in _DOCUMENT_TYPES:  # retrieval / reranking: corpus documents only (the spec's rule)
        calls = [(ptype, keys) for ptype, keys in calls if str(getattr(ptype, "value", ptype)) == "document"]
    return list(dict.fromkeys(key for _, keys in calls for key in keys))


def _texts_rule(task_type: str) -> str:
    if task_type in _DOCUMENT_TYPES:
        return "corpus documents"
    if task_type in ("STS", "PairClassification"):
        return "unique sentences of both columns, first-appearance order"
    return "unique texts of the evaluation split"


def augment_scores(
    task: Any, wrapper: Any, scores: dict[str, Any], data_split: Any, kwargs: dict[str, Any]
) -> None:
    """Add ``layer_dynamics`` and ``per_layer`` to one subset's ``scores`` (in place)."""
    meta = task.metadata
    if meta.type not in SUPPORTED_TASK_TYPES:
        wrapper.warn_unsupported(meta.name, meta.type)
        return
    hf_split, hf_subset = kwargs.get("hf_split"), kwargs.get("hf_subset")
    calls = wrapper.calls.get((meta.name, hf_split, hf_subset), [])
    keys = _selected_keys(wrapper, meta.type, calls)
    try:
        if not keys:
            raise RuntimeError("the task encoded no texts through the wrapper")
        if wrapper.options.layer_dynamics:
            info = {
                "texts": _texts_rule(meta.type),
                "prompt": keys[0][0],
                **wrapper.last_states_info,
            }
            scores["layer_dynamics"] = layer_dynamics(wrapper.store.gather(keys), wrapper.options, info)
        if wrapper.options.per_layer:
            scores["per_layer"] = per_layer_scores(task, wrapper, data_split, kwargs)
    except (ValueError, KeyError, RuntimeError) as err:
        message = f"mteb-lrd: no layer keys for {meta.name} ({hf_split}/{hf_subset}): {err}"
        logger.warning(message)
        warnings.warn(message, stacklevel=2)
    finally:
        wrapper.store.clear()
        wrapper.calls.clear()


def _wrap_evaluate_subset(original: Any) -> Any:
    @functools.wraps(original)
    def _evaluate_subset(self: Any, model: Any, data_split: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(model, _model_class()) or model.depth > 0:
            return original(self, model, data_split, *args, **kwargs)
        model.depth += 1
        try:
            scores = original(self, model, data_split, *args, **kwargs)
        finally:
            model.depth -= 1
        augment_scores(self, model, scores, data_split, kwargs)
        return scores

    setattr(_evaluate_subset, _ORIGINAL, original)
    return _evaluate_subset


def _wrap_check_cache(original: Any) -> Any:
    @functools.wraps(original)
    def _check_cache(task: Any, meta: Any, cache: Any, overwrite_strategy: Any) -> Any:
        existing, missing = original(task, meta, cache, overwrite_strategy)
        wrapper = _wrapper_for(meta)
        if existing is None or wrapper is None or task.metadata.type not in SUPPORTED_TASK_TYPES:
            return existing, missing
        if str(getattr(overwrite_strategy, "value", overwrite_strategy)) != "only-missing":
            return existing, missing
        wanted = _wanted_keys(wrapper.options)
        for split, rows in existing.scores.items():
            if split not in task.eval_splits:
                continue
            for row in rows:
                if any(key not in row for key in wanted):
                    subsets = missing.setdefault(split, [])
                    if row["hf_subset"] not in subsets:
                        subsets.append(row["hf_subset"])
        return existing, missing

    setattr(_check_cache, _ORIGINAL, original)
    return _check_cache


def _subclasses(cls: type) -> list[type]:
    found, stack = [], [cls]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in found:
                found.append(sub)
                stack.append(sub)
    return found


def install() -> None:
    """Wrap every ``_evaluate_subset`` of mteb's task classes and ``mteb.evaluate._check_cache``.

    Idempotent and cheap (a walk over the task classes); also picks up task classes defined since
    the last call.
    """
    from mteb.abstasks.abstask import AbsTask

    for cls in [AbsTask, *_subclasses(AbsTask)]:
        function = cls.__dict__.get("_evaluate_subset")
        if (
            function is None
            or hasattr(function, _ORIGINAL)
            or getattr(function, "__isabstractmethod__", False)
        ):
            continue
        cls._evaluate_subset = _wrap_evaluate_subset(function)
    evaluate_module = importlib.import_module("mteb.evaluate")
    if not hasattr(evaluate_module._check_cache, _ORIGINAL):
        evaluate_module._check_cache = _wrap_check_cache(evaluate_module._check_cache)
