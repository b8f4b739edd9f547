"""Every model mteb's own loaders load, wrapped with layer dynamics while the plugin is on.

``mteb.get_model`` (and so ``mteb run -m <name>``) loads a registered model through its
``ModelMeta.load_model``: the pinned revision, prompts, instruction templates and loader settings
are mteb's. With the plugin on, the encoder that loader returns is handed to
:func:`~mteb_lrd.adapter.wrapper.with_layer_dynamics`, keeping mteb's meta, so the results land
where a plain run puts them and gain ``layer_dynamics`` and ``per_layer``.

Only encoders whose forward passes the wrapper reproduces to the bit are wrapped: mteb's
``SentenceTransformerEncoderWrapper`` around a SentenceTransformer without ``truncate_dim``. Any
other encoder (API models, instruction wrappers with their own ``encode``, custom encoders without
an inner transformers module) runs plain, with one warning naming the model and the reason.

Stock ``mteb run`` has no flags for the plugin, so it is set from the environment:

* ``MTEB_LRD_WRAP``: ``all`` (default) wraps every model mteb loads; ``named`` only ``mteb-lrd/...``
  names and local folders.
* ``MTEB_LRD_OPTIONS``: the layer-dynamics options
  (:class:`~mteb_lrd.adapter.options.LayerDynamicsOptions` fields) as a JSON object, or the path
  of a JSON file holding one, e.g. ``{"per_layer_layers": "last:4", "memory_budget_mb": 512}``.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any

from mteb_lrd.adapter.options import LayerDynamicsOptions

__all__ = [
    "OPTIONS_ENV",
    "registered_encoder",
    "WRAP_ENV",
    "WRAP_MODES",
    "environment_options",
    "install_load_model_hook",
    "unwrappable_reason",
    "wrap_loaded",
    "wrap_mode",
    "wrap_under_meta",
]

logger = logging.getLogger(__name__)

WRAP_ENV = "MTEB_LRD_WRAP"
OPTIONS_ENV = "MTEB_LRD_OPTIONS"
WRAP_MODES: tuple[str, ...] = ("all", "named")
"""``all``: every model mteb loads; ``named``: only ``mteb-lrd/...`` names and local folders."""

_ORIGINAL_LOAD_MODEL: list[Any] = []
_WARNED: set[str] = set()


def wrap_mode() -> str:
    """``$MTEB_LRD_WRAP`` (default ``all``).

    Raises:
        ValueError: for a value not in :data:`WRAP_MODES`.
    """
    mode = os.environ.get(WRAP_ENV, "all").strip().lower() or "all"
    if mode not in WRAP_MODES:
        raise ValueError(f"{WRAP_ENV} must be one of {WRAP_MODES}; got {mode!r}")
    return mode


def environment_options() -> LayerDynamicsOptions:
    """The layer-dynamics options of ``$MTEB_LRD_OPTIONS`` (a JSON object or a JSON file's path;
    unset: the defaults).

    Raises:
        ValueError: naming the variable, for a missing file, text that is not a JSON object, or an
            invalid option (the message of :class:`LayerDynamicsOptions` names the field).
    """
    raw = os.environ.get(OPTIONS_ENV, "").strip()
    if not raw:
        return LayerDynamicsOptions()
    text = raw
    if not raw.startswith("{"):
        path = Path(raw).expanduser()
        if not path.is_file():
            raise ValueError(f"{OPTIONS_ENV}={raw!r} is neither a JSON object nor an existing file")
        text = path.read_text(encoding="utf-8")
    try:
        fields = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{OPTIONS_ENV}: not valid JSON ({err})") from None
    if not isinstance(fields, dict):
        raise ValueError(f"{OPTIONS_ENV} must hold a JSON object of options; got {type(fields).__name__}")
    try:
        return LayerDynamicsOptions.from_kwargs(fields)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{OPTIONS_ENV}: {err}") from None


def unwrappable_reason(model: Any) -> str | None:
    """Why the wrapper cannot reproduce ``model``'s forward passes (``None``: it can)."""
    from mteb.models import SentenceTransformerEncoderWrapper

    if type(model) is not SentenceTransformerEncoderWrapper:
        return (
            f"its encoder class {type(model).__name__} has an encode of its own; only mteb's "
            "SentenceTransformerEncoderWrapper is reproduced to the bit"
        )
    if getattr(model.model, "truncate_dim", None) is not None:
        return "its SentenceTransformer truncates embeddings (truncate_dim)"
    return None


def _warn_once(name: str, reason: str) -> None:
    if name in _WARNED:
        return
    _WARNED.add(name)
    message = f"mteb-lrd: {name} runs plain (no layer_dynamics / per_layer): {reason}"
    logger.warning(message)
    warnings.warn(message, UserWarning, stacklevel=3)


def wrap_under_meta(encoder: Any, **settings: Any) -> Any:
    """``encoder`` (as an mteb loader returned it) wrapped by
    :func:`~mteb_lrd.adapter.wrapper.with_layer_dynamics` with ``settings``, keeping mteb's meta:
    its name, revision, prompts and loader settings."""
    from mteb_lrd.adapter.wrapper import with_layer_dynamics

    meta = encoder.mteb_model_meta
    wrapped = with_layer_dynamics(encoder, **settings)
    wrapped.mteb_model_meta = meta
    return wrapped


def wrap_loaded(model: Any, options: LayerDynamicsOptions | None = None) -> Any:
    """``model`` (as an mteb loader returned it, its ``mteb_model_meta`` set) wrapped with layer
    dynamics under mteb's own meta (:func:`wrap_under_meta`); the model as it is when wrapped
    already, and with one warning when it cannot be wrapped."""
    if getattr(model, "is_layer_dynamics_model", False):
        return model
    reason = unwrappable_reason(model)
    if reason is None:
        try:
            return wrap_under_meta(model, options=options or environment_options())
        except (ValueError, TypeError, RuntimeError) as err:
            reason = f"its hidden states cannot be reached ({err})"
    _warn_once(str(model.mteb_model_meta.name), reason)
    return model


def registered_encoder(spec: str, device: str | None = None) -> Any | None:
    """The encoder mteb's registered loader gives for the model name ``spec`` (its pinned revision,
    prompts and loader settings), unwrapped; ``None`` when ``spec`` is a local path or not a name in
    mteb's registry.

    Raises:
        OSError: when the loader cannot load the weights (offline: not in the Hugging Face cache).
    """
    import mteb
    from mteb.models import ModelMeta

    if Path(spec).expanduser().exists():
        return None
    try:
        meta = mteb.get_model_meta(spec, fetch_from_hf=False)
    except KeyError:
        return None
    if meta.loader is None:
        return None
    load = _ORIGINAL_LOAD_MODEL[0] if _ORIGINAL_LOAD_MODEL else ModelMeta.load_model
    return load(meta, device=device)


def _load_model(self: Any, device: str | None = None, *, embed_dim: int | None = None, **kwargs: Any) -> Any:
    model = _ORIGINAL_LOAD_MODEL[0](self, device=device, embed_dim=embed_dim, **kwargs)
    if wrap_mode() == "named":
        return model
    return wrap_loaded(model)


def install_load_model_hook() -> None:
    """Wrap what ``ModelMeta.load_model`` returns (idempotent; ``mteb.get_model`` calls it)."""
    from mteb.models import ModelMeta

    if not _ORIGINAL_LOAD_MODEL:
        _ORIGINAL_LOAD_MODEL.append(ModelMeta.load_model)
        ModelMeta.load_model = _load_model  # type: ignore[method-assign]
