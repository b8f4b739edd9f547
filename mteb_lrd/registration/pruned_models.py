"""``mteb_lrd.prune``: :func:`mteb_lrd.pruning.pruned.pruned_copy`, with mteb's metadata hook installed
when a pruned model is built, so that plain ``mteb.evaluate`` stores its results as an experiment
of the base model (:mod:`mteb_lrd.adapter.experiments`). The pruning itself knows nothing of mteb."""

from __future__ import annotations

import inspect
from typing import Any

from mteb_lrd.adapter import experiments
from mteb_lrd.pruning import pruned

__all__ = ["prune"]


def prune(*args: Any, **kwargs: Any) -> Any:  # noqa: D103 - the docstring is the pruning's own
    experiments.install_hook()
    return pruned.pruned_copy(*args, **kwargs)


prune.__doc__ = pruned.pruned_copy.__doc__
prune.__signature__ = inspect.signature(pruned.pruned_copy)  # type: ignore[attr-defined]
