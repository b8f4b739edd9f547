"""One model on some tasks through ``mteb.evaluate`` with layer dynamics: the step every executor
runs (the sequential ``mteb-lrd run`` for all tasks of a model, a Ray unit for one task), so both
name, store and cache a model the same way."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from mteb_lrd.runners.atomic_cache import AtomicResultCache
    from mteb_lrd.runners.run_config import UnitConfig

__all__ = ["Evaluated", "evaluate_model"]


@dataclass(frozen=True)
class Evaluated:
    """What :func:`evaluate_model` produced: the wrapped model, mteb's task results, the cache written."""

    wrapped: Any
    task_results: list[Any]
    cache: AtomicResultCache


def _registered(spec: str, config: UnitConfig, cache_dir: str | None, options: dict[str, Any]) -> Any | None:
    """``spec`` loaded by mteb's registered loader and wrapped (the revision and prompts of a stock
    ``mteb run -m spec``); ``None`` when ``spec`` is not a registered name, or is one whose weights
    are not in the Hugging Face cache but that mteb-lrd installs itself (the default model, the
    panel's): then mteb-lrd's loader takes it, as the record says.

    Raises:
        ValueError: for a registered model whose forward passes the wrapper cannot reproduce, or
            one mteb's loader cannot load (naming the error).
    """
    import logging

    from mteb_lrd.models.naming import KNOWN_NAMES
    from mteb_lrd.registration.loaded_models import registered_encoder, unwrappable_reason, wrap_under_meta

    if config.name is not None or config.revision is not None:
        return None  # an explicit name or revision: the caller's, not the registry's
    try:
        encoder = registered_encoder(spec, device=config.device)
    except OSError as err:
        if spec in KNOWN_NAMES.values():
            logging.getLogger(__name__).info(
                "mteb's loader cannot load %s (%s): mteb-lrd's copy is used", spec, err
            )
            return None
        raise ValueError(f"mteb's registered loader cannot load {spec!r}: {err}") from err
    if encoder is None:
        return None
    reason = unwrappable_reason(encoder)
    if reason is not None:
        raise ValueError(f"{spec}: no layer dynamics, {reason}; run it with plain mteb")
    wrapped = wrap_under_meta(encoder, device=config.device, cache_dir=cache_dir, **options)
    wrapped.loaded_by = (
        f"mteb registry ({type(encoder).__name__}, revision {wrapped.mteb_model_meta.revision})"
    )
    return wrapped


def evaluate_model(
    spec: str,
    tasks: Sequence[Any],
    config: UnitConfig,
    cache_dir: str | None,
    *,
    blocks: Sequence[int] = (),
    progress: bool = False,
) -> Evaluated:
    """Load ``spec`` (named by ``config.name`` / ``config.revision`` when given), remove ``blocks``,
    wrap it with ``config.options`` and the extraction cache ``cache_dir``, and evaluate ``tasks``
    into ``config.results`` (atomic writes; finished tasks skipped unless ``config.overwrite``).

    Raises:
        ValueError: for an unknown model (the message says what is allowed).
    """
    import mteb

    from mteb_lrd.adapter.provenance import record_command
    from mteb_lrd.adapter.wrapper import with_layer_dynamics
    from mteb_lrd.models.loading import load_for_mteb
    from mteb_lrd.runners.atomic_cache import AtomicResultCache

    record_command(config.command)
    options = {key: value for key, value in config.options.items() if key != "cache_dir"}
    wrapped: Any = _registered(spec, config, cache_dir, options) if not blocks else None
    if wrapped is None:
        name, model, tokenizer = load_for_mteb(
            spec, device=config.device, name=config.name, revision=config.revision
        )
        if blocks:
            from mteb_lrd.pruning.pruned import pruned_copy

            model = pruned_copy(model, list(blocks), name=name, tokenizer=tokenizer)
        wrapped = with_layer_dynamics(model, tokenizer=tokenizer, device=config.device, name=name,
                                      revision=config.revision, cache_dir=cache_dir, **options)  # fmt: skip
        wrapped.loaded_by = "mteb-lrd"
    cache = AtomicResultCache(config.results)
    result = mteb.evaluate(
        wrapped,
        list(tasks),
        cache=cache,
        encode_kwargs={"batch_size": config.batch_size, "show_progress_bar": progress},
        overwrite_strategy="always" if config.overwrite else "only-missing",
        co2_tracker=False,
        show_progress_bar=progress,
    )
    return Evaluated(wrapped, list(result.task_results), cache)
