"""Values as JSON can hold them: the one conversion every result, record and cache entry goes through."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["to_jsonable"]


def to_jsonable(value: Any) -> Any:
    """Arrays → lists, numpy scalars → Python, NaN / Inf → ``None``, paths → strings (recursively)."""
    if isinstance(value, Mapping):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(item) for item in value]
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value
