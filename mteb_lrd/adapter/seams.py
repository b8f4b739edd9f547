"""The two mteb seams behind :func:`mteb_lrd.with_layer_dynamics`, patched in place.

mteb has no evaluator hooks: every task family scores a subset through one of
:data:`~mteb_lrd._compat.SUBSET_METHODS`, and results are cached through
``mteb.evaluate._check_cache``. :func:`install_seams` wraps both so that, **only when the model is a
layer-dynamics wrapper** (recognised by its ``is_layer_dynamics_model`` marker), a subset's scores
gain ``layer_dynamics`` and ``per_layer``, and a cached result lacking them counts as missing
(re-running adds them instead of silently skipping), as does one whose ``per_layer`` lacks a
hidden state the wrapper's layer choice names. For any other model the wrapped functions
call the originals unchanged, except that an existing result file mteb cannot parse (torn, edited)
stops the run with a :class:`ResultFileError` naming the file, for every model. Wrappers take
``*args, **kwargs`` and bind them to the original's own signature, so a new mteb parameter
passes straight through. Installing is idempotent.
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeGuard

from mteb_lrd import _compat

if TYPE_CHECKING:
    from mteb_lrd.adapter.protocols import LayerDynamicsEncoder

__all__ = [
    "ORIGINAL",
    "ResultFileError",
    "install_seams",
    "installed_seams",
    "is_layer_dynamics_model",
    "track",
]

ORIGINAL = "__mteb_lrd_original__"
"""Attribute of every patched function holding the function it wraps."""

_LIVE: weakref.WeakSet[Any] = weakref.WeakSet()


class ResultFileError(ValueError):
    """An existing mteb result file (``<Task>.json``) cannot be read: torn or edited by hand."""


def _unreadable_result(bound: inspect.BoundArguments, err: Exception) -> ResultFileError | None:
    """The error naming the result file mteb failed to read, or ``None`` when no file is to blame."""
    cache: Any = bound.arguments.get("cache")
    task: Any = bound.arguments.get("task")
    meta: Any = bound.arguments.get("meta")
    try:
        path = cache.get_task_result_path(task_name=task.metadata.name, model_name=meta)
    except Exception:  # noqa: BLE001 - no cache / an unexpected mteb: keep mteb's own error
        return None
    if not path.is_file():
        return None
    reason = " ".join(str(err).split())[:200]
    return ResultFileError(
        f"{path}: cannot read this mteb result file, it is torn or was edited ({type(err).__name__}: {reason}); "
        "move it away or delete it to re-run the task, or re-run everything with --overwrite "
        "(overwrite_strategy='always')"
    )


def is_layer_dynamics_model(model: object) -> TypeGuard[LayerDynamicsEncoder]:
    """Whether ``model`` is a layer-dynamics wrapper (by its marker, not by class identity)."""
    return getattr(model, "is_layer_dynamics_model", False) is True


def track(wrapper: Any) -> None:
    """Remember a live wrapper, so cached results of its model are checked for the layer keys."""
    _LIVE.add(wrapper)


def _wrappers_for(meta: Any) -> list[Any]:
    """Live wrappers of this model.

    ``_check_cache`` sees only the model's meta, which mteb may have copied (``encode_kwargs``
    precision folds into ``experiment_kwargs``): a wrapper matches when name and revision agree and
    its own experiment settings are all present in the meta's.
    """
    found = []
    experiment = dict(getattr(meta, "experiment_kwargs", None) or {})
    for wrapper in list(_LIVE):
        own = wrapper.mteb_model_meta
        if (own.name, own.revision) != (getattr(meta, "name", None), getattr(meta, "revision", None)):
            continue
        if all(experiment.get(k) == v for k, v in (own.experiment_kwargs or {}).items()):
            found.append(wrapper)
    return found


def _bind(
    original: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> inspect.BoundArguments:
    bound = inspect.signature(original).bind(*args, **kwargs)
    bound.apply_defaults()
    return bound


def _plan(model: LayerDynamicsEncoder, task: Any, data_split: Any) -> None:
    """Tell the wrapper how many texts the subset's layer dynamics will see, before it encodes them."""
    from mteb_lrd.adapter.expected_texts import expected_texts

    meta = task.metadata

    def prompt_of(prompt_type: Any) -> str:
        return model.resolve_prompt(meta, prompt_type) or ""

    expected = expected_texts(task, data_split, prompt_of) if model.options.layer_dynamics else None
    model.plan_subset(meta.name, expected)


def _wrap_subset_method(original: Callable[..., Any]) -> Callable[..., Any]:
    from mteb_lrd.adapter.augmentation import augment_scores, random_states

    @functools.wraps(original)
    def evaluate_subset(*args: Any, **kwargs: Any) -> Any:
        bound = _bind(original, args, kwargs)
        task: Any = bound.arguments.get("self")
        model = bound.arguments.get("model")
        if not is_layer_dynamics_model(model) or model.depth > 0:
            return original(*args, **kwargs)
        rng_before = random_states(task)
        _plan(model, task, bound.arguments.get("data_split"))
        model.depth += 1
        try:
            scores = original(*args, **kwargs)
        finally:
            model.depth -= 1
        extra = dict(bound.arguments.pop("kwargs", {}) or {})
        rest = {k: v for k, v in bound.arguments.items() if k not in ("self", "model", "data_split")}
        augment_scores(
            task, model, original, scores, bound.arguments.get("data_split"), {**rest, **extra}, rng_before
        )
        return scores

    setattr(evaluate_subset, ORIGINAL, original)
    return evaluate_subset


def _wrap_cache_check(original: Callable[..., Any]) -> Callable[..., Any]:
    from mteb_lrd.adapter.options import SUPPORTED_TASK_TYPES, row_is_complete

    @functools.wraps(original)
    def check_cache(*args: Any, **kwargs: Any) -> Any:
        try:
            existing, missing = original(*args, **kwargs)
        except (
            ValueError,
            KeyError,
            TypeError,
            AttributeError,
        ) as err:  # JSON / pydantic errors are ValueErrors
            named = _unreadable_result(_bind(original, args, kwargs), err)
            if named is None:
                raise
            raise named from err
        if existing is None:
            return existing, missing
        bound = _bind(original, args, kwargs)
        task, meta = bound.arguments.get("task"), bound.arguments.get("meta")
        strategy = bound.arguments.get("overwrite_strategy")
        if task is None or str(getattr(task.metadata, "type", "")) not in SUPPORTED_TASK_TYPES:
            return existing, missing
        if str(getattr(strategy, "value", strategy)) != "only-missing":
            return existing, missing
        wrappers = _wrappers_for(meta)
        if not wrappers:
            return existing, missing
        for split, rows in existing.scores.items():
            if split not in task.eval_splits:
                continue
            for row in rows:
                if not all(
                    row_is_complete(row, w.options.wanted_keys, w.options.per_layer_layers) for w in wrappers
                ):
                    subsets = missing.setdefault(split, [])
                    if row["hf_subset"] not in subsets:
                        subsets.append(row["hf_subset"])
        return existing, missing

    setattr(check_cache, ORIGINAL, original)
    return check_cache


def _subclasses(cls: type) -> list[type]:
    found: list[type] = []
    stack: list[type] = [cls]
    while stack:
        children: list[type] = type.__subclasses__(stack.pop())
        for sub in children:
            if sub not in found:
                found.append(sub)
                stack.append(sub)
    return found


def installed_seams() -> dict[str, list[str]]:
    """What is patched now: ``{"subset_methods": ["Class.method", ...], "cache_check": [...]}``."""
    from mteb.abstasks.abstask import AbsTask

    methods = [
        f"{cls.__qualname__}.{name}"
        for cls in [AbsTask, *_subclasses(AbsTask)]
        for name in _compat.SUBSET_METHODS
        if hasattr(cls.__dict__.get(name), ORIGINAL)
    ]
    owner = _compat.cache_check_owner()
    cache = (
        [f"mteb.evaluate.{_compat.CACHE_CHECK}"]
        if hasattr(getattr(owner, _compat.CACHE_CHECK), ORIGINAL)
        else []
    )
    return {"subset_methods": methods, "cache_check": cache}


def install_seams() -> None:
    """Wrap every subset method of mteb's task classes and ``mteb.evaluate._check_cache``.

    Idempotent and cheap (a walk over the task classes); also picks up task classes defined since
    the last call.

    Raises:
        SeamError: when the installed mteb lacks a name the seams need (named in the message).
    """
    from mteb.abstasks.abstask import AbsTask

    owner = _compat.cache_check_owner()
    for cls in [AbsTask, *_subclasses(AbsTask)]:
        for name in _compat.SUBSET_METHODS:
            function = cls.__dict__.get(name)
            if (
                function is None
                or hasattr(function, ORIGINAL)
                or getattr(function, "__isabstractmethod__", False)
            ):
                continue
            setattr(cls, name, _wrap_subset_method(function))
    current = getattr(owner, _compat.CACHE_CHECK)
    if not hasattr(current, ORIGINAL):
        setattr(owner, _compat.CACHE_CHECK, _wrap_cache_check(current))
