"""One name per model: the name, revision and experiment under which mteb stores a model's results.

Every route (``mteb-lrd run`` / ``prune``, :func:`mteb_lrd.with_layer_dynamics`, the mteb plugin, a
pruned model) names a model with :func:`model_name`, in this order:

1. an explicit name (``--name`` / ``name=``), which must look like ``organization/model``;
2. the base model of a pruned model (its pruning record), so variants sit next to their base;
3. the SentenceTransformer model card (``model_name``, then ``base_model``, as mteb does), when it
   holds a usable ``organization/model`` name;
4. the transformers ``name_or_path``: a Hub id as loaded, or a local folder named by
   :func:`folder_name` (the bundled all-MiniLM-L6-v2 and the panel's SentenceTransformers by their
   Hub ids, any other folder as ``local/<folder name>``);
5. ``local/unnamed-model``.

So the bundled MiniLM is ``sentence-transformers/all-MiniLM-L6-v2`` whether it comes as
``--model default``, as the panel's ``all-MiniLM-L6-v2``, as its folder, or through the plugin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mteb_lrd.models.pruning_record import pruning_record

__all__ = [
    "DEFAULT_MODEL_NAME",
    "KNOWN_NAMES",
    "UNNAMED",
    "check_name",
    "folder_name",
    "is_usable_name",
    "model_name",
    "model_revision",
]

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
UNNAMED = "local/unnamed-model"
PANEL_MARKER = (
    ".mteb-lrd-panel.json"  # mteb_lrd.models.panel_install.MARKER, not imported: the installer pulls pip
)

KNOWN_NAMES: dict[str, str] = {
    "default": DEFAULT_MODEL_NAME,
    "all-MiniLM-L6-v2": DEFAULT_MODEL_NAME,
    "all-mpnet-base-v2": "sentence-transformers/all-mpnet-base-v2",
}
"""Short names whose weights are exactly a Hub model's. The other panel models (a fine-tune without a
Hub id, GGUF-dequantised decoders) are not the Hub's weights and keep ``local/<panel name>``."""


def is_usable_name(name: object) -> bool:
    return isinstance(name, str) and "/" in name.strip("/") and not any(c.isspace() for c in name)


def check_name(name: str) -> str:
    """Validate an explicit model name (mteb's format ``organization/model``).

    Raises:
        ValueError: naming what is allowed.
    """
    if not is_usable_name(name):
        raise ValueError(
            f"model name {name!r} is not of the form organization/model (no spaces), as mteb requires; "
            "e.g. --name my-org/my-model"
        )
    return name


def _default_folder() -> Path | None:
    try:
        from mteb_lrd.defaults import default_model_path

        return default_model_path().resolve()
    except (ModuleNotFoundError, OSError):
        return None


def folder_name(path: str | Path) -> str:
    """The name of a model folder: a known model's Hub id, else ``local/<folder name>``."""
    folder = Path(path).expanduser().resolve()
    if folder == _default_folder():
        return DEFAULT_MODEL_NAME
    marker = folder / PANEL_MARKER
    if marker.is_file():
        import json

        try:
            short = json.loads(marker.read_text(encoding="utf-8"))["panel_model"]["name"]
        except (OSError, ValueError, KeyError, TypeError):
            short = folder.name
        return KNOWN_NAMES.get(short, f"local/{short}")
    return f"local/{folder.name}"


def _config(model: object) -> Any:
    from mteb_lrd.extraction.architectures import UnsupportedArchitectureError, unwrap_transformers_model

    for candidate in (model, getattr(model, "model", None)):
        if candidate is None:
            continue
        try:
            return getattr(unwrap_transformers_model(candidate), "config", None)
        except UnsupportedArchitectureError:
            continue
    return None


def _sentence_transformer(model: object) -> Any:
    for candidate in (model, getattr(model, "model", None)):
        if getattr(candidate, "model_card_data", None) is not None:
            return candidate
    return None


def model_name(model: object, name: str | None = None) -> str:
    """The one name of ``model`` (a SentenceTransformer, transformers model or mteb wrapper of one).

    Args:
        model: the model.
        name: an explicit name, which wins (checked by :func:`check_name`).

    Raises:
        ValueError: for an explicit name that is not ``organization/model``.
    """
    if name is not None:
        return check_name(name)
    record = pruning_record(model)
    if record and is_usable_name(record.get("base_model")):
        return str(record["base_model"])
    st = _sentence_transformer(model)
    card = getattr(st, "model_card_data", None)
    for candidate in (getattr(card, "model_name", None), getattr(card, "base_model", None)):
        if is_usable_name(candidate):
            return str(candidate)
    path = getattr(_config(model), "name_or_path", None)
    if isinstance(path, str) and path:
        if Path(path).expanduser().is_dir():
            return folder_name(path)
        if is_usable_name(path):
            return path
    return UNNAMED


def model_revision(model: object, revision: str | None = None) -> str | None:
    """The revision of ``model``: explicit, the pruned model's base revision, the card's, the Hub commit."""
    if revision is not None:
        return revision
    record = pruning_record(model)
    if record and record.get("base_model"):
        return record.get("base_revision")
    card = getattr(_sentence_transformer(model), "model_card_data", None)
    found = getattr(card, "base_model_revision", None) or getattr(_config(model), "_commit_hash", None)
    return str(found) if found else None
