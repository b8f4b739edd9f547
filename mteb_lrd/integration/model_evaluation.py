"""One model on some tasks through ``mteb.evaluate`` with layer dynamics: the step every executor
runs (the sequential ``mteb-lrd run`` for all tasks of a model, a Ray unit for one task), so both
name, store and cache a model the same way."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from mteb_lrd.integration.atomic_cache import AtomicResultCache
    from mteb_lrd.integration.run_config import UnitConfig

__all__ = ["Evaluated", "evaluate_model"]


@dataclass(frozen=True)
class Evaluated:
    """What :func:`evaluate_model` produced: the wrapped model, mteb's task results, the cache written."""

    wrapped: Any
    task_results: list[Any]
    cache: AtomicResultCache


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

    from mteb_lrd.integration.atomic_cache import AtomicResultCache
    from mteb_lrd.integration.provenance import record_command
    from mteb_lrd.integration.wrapper import with_layer_dynamics
    from mteb_lrd.models.loading import load_for_mteb

    record_command(config.command)
    name, model, tokenizer = load_for_mteb(
        spec, device=config.device, name=config.name, revision=config.revision
    )
    if blocks:
        from mteb_lrd.pruning.pruned import prune

        model = prune(model, list(blocks), name=name, tokenizer=tokenizer)
    options = {key: value for key, value in config.options.items() if key != "cache_dir"}
    wrapped: Any = with_layer_dynamics(model, tokenizer=tokenizer, device=config.device, name=name,
                                       revision=config.revision, cache_dir=cache_dir, **options)  # fmt: skip
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
