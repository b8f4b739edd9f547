"""Registration with MTEB, as the plugin (``plugins/mteb_lrd_plugin.py``) does it: the local STS tasks,
``mteb-lrd/<name>`` models for the default model and every panel model, and ``mteb.get_model`` for
local model folders.

mteb has no entry points, so registration is explicit (:func:`register_with_mteb`, idempotent).
Loading ``mteb-lrd/<name>`` returns the model wrapped by :func:`mteb_lrd.with_layer_dynamics`, so its
``<Task>.json`` gains ``layer_dynamics`` and ``per_layer``. ``mteb.get_model`` (and so ``mteb run -m``)
also accepts a local model folder, which plain mteb cannot load (it looks folders up on the Hub): a
sentence-transformers folder, a transformers model or a folder written by ``mteb-lrd prune`` (stored
as an experiment of its base model), named and stored exactly as ``mteb-lrd run --model <folder>``
stores it.
"""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["MODEL_PREFIX", "get_model", "load_wrapped", "register_with_mteb"]

MODEL_PREFIX = "mteb-lrd/"
_REGISTERED: list[str] = []


def load_wrapped(
    model_name: str,
    revision: str | None = None,
    device: str | None = None,
    mteb_lrd_model: str | None = None,
    **kwargs: Any,
) -> Any:
    """mteb loader: ``mteb-lrd/<name>`` → that model wrapped with layer dynamics.

    Results keep the model's one name (``sentence-transformers/all-MiniLM-L6-v2`` for ``default``, see
    :mod:`mteb_lrd.models.naming`), so they sit next to plain and Python-API runs of the same model.
    """
    from mteb_lrd.adapter.wrapper import with_layer_dynamics
    from mteb_lrd.models.loading import load_for_mteb

    spec = mteb_lrd_model or model_name.removeprefix(MODEL_PREFIX)
    name, model, tokenizer = load_for_mteb(spec, device=device)
    return with_layer_dynamics(model, tokenizer=tokenizer, device=device, name=name, **kwargs)


def _local_folder(model_name: str) -> bool:
    """Whether ``model_name`` is a folder on this machine holding a model (not a Hub id)."""
    from pathlib import Path

    from mteb_lrd.extraction.loading import looks_like_path

    path = Path(model_name).expanduser()
    return path.is_dir() and (looks_like_path(model_name) or (path / "config.json").is_file())


def get_model(model_name: str, revision: str | None = None, device: str | None = None, **kwargs: Any) -> Any:
    """``mteb.get_model`` that also loads a local model folder, wrapped with layer dynamics (as
    ``mteb-lrd run --model <folder>``); any other name goes to mteb's own ``get_model``."""
    if _local_folder(model_name):
        return load_wrapped(model_name, revision=revision, device=device, mteb_lrd_model=model_name)
    return _MTEB_GET_MODEL[0](model_name, revision, device, **kwargs)


_MTEB_GET_MODEL: list[Any] = []


def _install_get_model() -> None:
    """Route ``mteb.get_model`` (public; ``mteb run`` calls it by attribute) through :func:`get_model`."""
    import mteb

    if not _MTEB_GET_MODEL:
        _MTEB_GET_MODEL.append(mteb.get_model)
    mteb.get_model = get_model


def _model_names() -> list[str]:
    from mteb_lrd.models.panel import PANEL

    return ["default", *PANEL]


def register_with_mteb() -> list[str]:
    """Register tasks and models (idempotent); returns the names registered.

    When the installed mteb lacks a private name the plugin needs (:func:`mteb_lrd._compat.check`),
    it warns once, naming what is missing, and registers nothing: ``import mteb`` keeps working.
    """
    if _REGISTERED:
        return list(_REGISTERED)
    from mteb_lrd import _compat

    problems = _compat.check()
    if problems:
        warnings.warn(f"mteb-lrd plugin is off: {'; '.join(problems)}", RuntimeWarning, stacklevel=2)
        return []
    from mteb.models import ModelMeta

    from mteb_lrd.adapter import experiments
    from mteb_lrd.adapter.seams import install_seams
    from mteb_lrd.models.naming import KNOWN_NAMES
    from mteb_lrd.registration.loaded_models import install_load_model_hook
    from mteb_lrd.tasks.shared_tasks import demo_task, register_tasks, sts_tasks

    install_seams()
    _install_get_model()
    install_load_model_hook()  # what mteb's own loaders load is wrapped too ($MTEB_LRD_WRAP)
    experiments.install_hook()  # saved pruned models evaluated by plain mteb are experiments of their base
    names = register_tasks([*sts_tasks().values(), demo_task()])
    registry = _compat.model_registry()
    for short in _model_names():
        name = MODEL_PREFIX + short
        # looked up as mteb-lrd/<short>; results stored under the model's one name (mteb names the
        # results by the registered meta, which it assigns to the loaded model)
        registry[name] = ModelMeta.create_empty(
            overwrites={
                "name": KNOWN_NAMES.get(short, f"local/{short}"),
                "loader": load_wrapped,
                "loader_kwargs": {"mteb_lrd_model": short},
                "framework": ["PyTorch"],
            }
        )
        names.append(name)
    _REGISTERED.extend(names)
    return names
