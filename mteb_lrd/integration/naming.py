"""The name, revision and experiment under which mteb stores a model's results."""

from __future__ import annotations

from typing import Any

from mteb.models import ModelMeta

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
        The encoder's own meta (or an empty one named after the backbone), updated with the explicit
        name / revision and, for a pruned model loaded from its folder, its experiment settings.
    """
    meta = encoder.mteb_model_meta if encoder is not None else None
    if meta is None:
        config = getattr(backbone, "config", None)
        fallback = name or getattr(config, "name_or_path", None)
        meta = ModelMeta.create_empty(overwrites={"name": fallback or "mteb-lrd/unnamed-model"})
    updates: dict[str, Any] = {k: v for k, v in (("name", name), ("revision", revision)) if v is not None}
    if meta.name is None and "name" not in updates:
        updates["name"] = "mteb-lrd/unnamed-model"
    if meta.revision is None and "revision" not in updates:
        updates["revision"] = "no_revision_available"
    pruning = getattr(getattr(backbone, "config", None), "mteb_lrd_pruning", None)
    if pruning and not meta.experiment_kwargs:  # a pruned model loaded from its folder
        updates["experiment_kwargs"] = dict(pruning)
    return meta.model_copy(update=updates) if updates else meta
