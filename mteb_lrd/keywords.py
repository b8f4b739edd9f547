"""Entry points that take either their keywords or the one options object those keywords map onto
(as scikit-learn estimators take parameters and sentence-transformers takes keyword arguments)."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any, TypeVar

__all__ = ["options_or_keywords"]

T = TypeVar("T")


def options_or_keywords(cls: type[T], options: T | None, label: str = "options", /, **keywords: Any) -> T:
    """``options`` when given (every keyword then at its field's default), else ``cls(**keywords)``.

    Args:
        cls: a dataclass whose fields the keywords are.
        options: an instance of ``cls`` or ``None``.
        label: the entry point's name for ``options`` (in the error message).
        **keywords: the entry point's keywords, by field name.

    Raises:
        TypeError: when ``options`` is not a ``cls``.
        ValueError: when both ``options`` and a keyword away from its default are given, or (from
            ``cls``) for an invalid keyword.
    """
    if options is None:
        return cls(**keywords)
    if not isinstance(options, cls):
        raise TypeError(f"{label} must be a {cls.__name__}; got {type(options).__name__}")
    defaults = {f.name: f.default for f in fields(cls) if f.default is not MISSING}  # type: ignore[arg-type]
    changed = sorted(
        name for name, value in keywords.items() if name not in defaults or value != defaults[name]
    )
    if changed:
        raise ValueError(
            f"give the settings either as {label}= or as keywords, not both (keywords given: {', '.join(changed)})"
        )
    return options
