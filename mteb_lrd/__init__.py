"""mteb-lrd: layer-wise representation dynamics (LRD) and DySem for MTEB.

The public API is re-exported here. Heavy modules (torch, mteb) load on first use, so
``import mteb_lrd`` stays cheap for code that only needs the pure metrics.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "frenet": "mteb_lrd.metrics.frenet",
    "FrenetResult": "mteb_lrd.metrics.frenet",
    "nrs": "mteb_lrd.metrics.nrs",
    "NRSResult": "mteb_lrd.metrics.nrs",
    "gfmi": "mteb_lrd.metrics.gfmi",
    "GFMIResult": "mteb_lrd.metrics.gfmi",
    "lrd": "mteb_lrd.metrics.lrd",
    "LRDResult": "mteb_lrd.metrics.lrd",
    "MetricParams": "mteb_lrd.metrics.params",
    "LayerStates": "mteb_lrd.extraction.extractor",
    "LayerExtractor": "mteb_lrd.extraction.extractor",
    "ExtractionOptions": "mteb_lrd.extraction.options",
    "LayerDynamicsOptions": "mteb_lrd.adapter.options",
    "extract_layer_states": "mteb_lrd.extraction.extractor",
    "with_layer_dynamics": "mteb_lrd.adapter.wrapper",
    "LayerDynamicsEvaluator": "mteb_lrd.training.layer_dynamics_evaluator",
    "EvaluatorOptions": "mteb_lrd.training.layer_dynamics_evaluator",
    "prune": "mteb_lrd.registration.pruned_models",
    "PruneOptions": "mteb_lrd.pruning.options",
    "skip_blocks": "mteb_lrd.pruning.surgery",
    "pruning_record": "mteb_lrd.models.pruning_record",
    "choose_blocks": "mteb_lrd.pruning.choose",
    "local_task": "mteb_lrd.tasks.local_tasks",
    "sts_tasks": "mteb_lrd.tasks.shared_tasks",
    "demo_task": "mteb_lrd.tasks.shared_tasks",
    "write_report": "mteb_lrd.report",
    "register_with_mteb": "mteb_lrd.registration.mteb_registration",
    "load_wrapped": "mteb_lrd.registration.mteb_registration",
    "MODEL_PREFIX": "mteb_lrd.registration.mteb_registration",
    "results_table": "mteb_lrd.report",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mteb_lrd' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from mteb_lrd.adapter.options import LayerDynamicsOptions  # noqa: F401
    from mteb_lrd.adapter.wrapper import with_layer_dynamics  # noqa: F401
    from mteb_lrd.extraction.extractor import LayerExtractor, LayerStates, extract_layer_states  # noqa: F401
    from mteb_lrd.extraction.options import ExtractionOptions  # noqa: F401
    from mteb_lrd.metrics.frenet import FrenetResult, frenet  # noqa: F401
    from mteb_lrd.metrics.gfmi import GFMIResult, gfmi  # noqa: F401
    from mteb_lrd.metrics.lrd import LRDResult, lrd  # noqa: F401
    from mteb_lrd.metrics.nrs import NRSResult, nrs  # noqa: F401
    from mteb_lrd.metrics.params import MetricParams  # noqa: F401
    from mteb_lrd.models.pruning_record import pruning_record  # noqa: F401
    from mteb_lrd.pruning.choose import choose_blocks  # noqa: F401
    from mteb_lrd.pruning.options import PruneOptions  # noqa: F401
    from mteb_lrd.pruning.surgery import skip_blocks  # noqa: F401
    from mteb_lrd.registration.mteb_registration import MODEL_PREFIX, load_wrapped, register_with_mteb  # noqa: F401
    from mteb_lrd.registration.pruned_models import prune  # noqa: F401
    from mteb_lrd.report import results_table, write_report  # noqa: F401
    from mteb_lrd.tasks.local_tasks import local_task  # noqa: F401
    from mteb_lrd.tasks.shared_tasks import demo_task, sts_tasks  # noqa: F401
    from mteb_lrd.training.layer_dynamics_evaluator import EvaluatorOptions, LayerDynamicsEvaluator  # noqa: F401
