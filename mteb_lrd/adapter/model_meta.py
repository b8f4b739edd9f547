"""The mteb metadata of a wrapped model: its one name and revision, and for a pruned model the
experiment of its base (:mod:`mteb_lrd.adapter.experiments`)."""

from __future__ import annotations

from typing import Any

from mteb.models import ModelMeta

from mteb_lrd.adapter.experiments import pruned_meta
from mteb_lrd.models.naming import check_name, is_usable_name, model_name, model_revision

__all__ = ["model_meta"]


def model_meta(
    encoder: Any, backbone: Any, name: str | None = None, revision: str | None = None
) -> ModelMeta:
    """The mteb metadata of a wrapped model.

    Args:
        encoder: the mteb encoder around the model (``None`` for a plain transformers model).
        backbone: the transformers model (its config names it and may carry a pruning record).
        name / revision: explicit values, which win.

    Returns:
        The encoder's own meta (or an empty one), named by :func:`model_name` / :func:`model_revision`
        and, for a pruned model, carrying its experiment settings and real parameter count.

    Raises:
        ValueError: for an explicit name that is not ``organization/model``.
    """
    model = encoder if encoder is not None else backbone
    meta = encoder.mteb_model_meta if encoder is not None else ModelMeta.create_empty()
    meta = pruned_meta(meta, getattr(encoder, "model", None) or backbone)
    own = meta.name if is_usable_name(meta.name) and meta.name != "no_model_name/available" else None
    own_revision = meta.revision if meta.revision != "no_revision_available" else None
    updates: dict[str, Any] = {
        "name": check_name(name) if name is not None else own or model_name(model),
        "revision": revision or own_revision or model_revision(model) or "no_revision_available",
    }
    return meta.model_copy(update=updates)
