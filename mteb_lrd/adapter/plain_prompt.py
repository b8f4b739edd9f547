"""The prompt a plain mteb run of a SentenceTransformer prepends to a task's texts."""

from __future__ import annotations

from typing import Any

from mteb_lrd import _compat

__all__ = ["plain_run_prompt"]


def plain_run_prompt(encoder: Any, task_metadata: Any, prompt_type: Any) -> str | None:
    """The prompt text mteb's ``SentenceTransformerEncoderWrapper`` ``encoder`` would have
    sentence-transformers prepend for this task and prompt type (``None``: no prompt).

    mteb picks a prompt from the wrapper's ``model_prompts``; without one, sentence-transformers'
    ``encode_query`` / ``encode_document`` try their prompt names, then (like ``encode``) the model's
    default prompt.
    """
    if encoder is None or not hasattr(encoder, "model_prompts"):
        return None
    prompt = _compat.resolve_prompt(encoder.model_prompts, task_metadata, prompt_type)
    if prompt is not None:
        return prompt
    st = encoder.model
    prompts = getattr(st, "prompts", None) or {}
    names: tuple[str, ...] = ()
    if prompt_type is not None:
        is_query = str(getattr(prompt_type, "value", prompt_type)) == "query"
        names = ("query",) if is_query else ("document", "passage", "corpus")
    for candidate in (*names, getattr(st, "default_prompt_name", None)):
        if candidate is not None and candidate in prompts:
            return prompts[candidate]
    return None
