"""Text templates: each text put into a fixed sentence before tokenisation (e.g. PromptEOL).

A bare decoder pooled at its last token does not embed sentences (SmolLM2-135M: Spearman −0.04 on
STS12); inside PromptEOL's ``This sentence : "…" means in one word:"`` the last token summarises the
sentence (Jiang et al. 2023). A template differs from a prompt, which is only prepended: the text
sits inside it, so the pooled last token is the template's, not the text's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

__all__ = ["TEXT_SLOT", "TEMPLATES", "resolve_template", "apply_template", "template_label"]

TEXT_SLOT = "{text}"
"""Where the text goes in a template (replaced literally: braces in texts are safe)."""

TEMPLATES: dict[str, str] = {
    "prompteol": 'This sentence : "{text}" means in one word:"',
}
"""Named templates: ``prompteol`` is the English PromptEOL of DySem's baseline (DySem also
normalises the sentence's final punctuation; a template here takes the text as it is)."""


def resolve_template(template: str | None) -> str | None:
    """A template name (:data:`TEMPLATES`) or text → the template text; ``None`` / ``"none"`` /
    ``""`` → ``None`` (texts as they are).

    Raises:
        ValueError: for a template that does not hold :data:`TEXT_SLOT` exactly once.
    """
    if template is None or template in ("", "none"):
        return None
    if not isinstance(template, str):
        raise ValueError(f"template must be a string; got {type(template).__name__}")
    text = TEMPLATES.get(template, template)
    if text.count(TEXT_SLOT) != 1:
        raise ValueError(
            f"template must be one of {sorted(TEMPLATES)} or a text holding {TEXT_SLOT!r} exactly once; "
            f"got {template!r}"
        )
    return text


def apply_template(texts: Sequence[str], template: str | None) -> list[str]:
    """Every text put into ``template`` (a resolved one; ``None`` returns the texts unchanged)."""
    if template is None:
        return list(texts)
    head, tail = template.split(TEXT_SLOT)
    return [head + text + tail for text in texts]


def template_label(template: str) -> str:
    """A short, file-name-safe name of a resolved template: its :data:`TEMPLATES` name, else
    ``custom-<first 8 hex digits of its SHA-256>`` (results of a templated run are stored under it)."""
    for name, text in TEMPLATES.items():
        if text == template:
            return name
    return "custom-" + hashlib.sha256(template.encode("utf-8")).hexdigest()[:8]
