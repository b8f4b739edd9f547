"""Checking local task rows one by one, with the file and line of the first bad one.

Every converter of this package reads its fields through these helpers, so every row (not just the
first) is checked for presence and type, and the error names ``<file>:<line>`` (or ``<task>/<subset>/
<split> row <i>`` for rows given in memory), what was wrong and what is allowed.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mteb_lrd.io import read_jsonl_numbered

__all__ = [
    "LocalTaskError",
    "Rows",
    "field",
    "first_present",
    "identifier",
    "integer",
    "label",
    "number",
    "text",
    "unique_ids",
]


class LocalTaskError(ValueError):
    """A local task's data are malformed; the message starts with the file and line (or row)."""


@dataclass(frozen=True)
class Rows:
    """Rows of one file (or one in-memory list) with where each row came from.

    Attributes:
        rows: the JSON objects.
        locations: ``"<file>:<line>"`` (or ``"<where> row <i>"``) of each row.
        source: the file (or the in-memory name) for messages about the whole list.
    """

    rows: list[dict[str, Any]]
    locations: list[str]
    source: str

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Rows:
        """The rows of a JSON-lines file (blank lines skipped).

        Raises:
            ValueError: ``<file>:<line>: ...`` for a line that is not a JSON object.
        """
        numbered = read_jsonl_numbered(path)
        return cls([row for _, row in numbered], [f"{path}:{line}" for line, _ in numbered], str(path))

    @classmethod
    def of(cls, rows: Rows | Sequence[Mapping[str, Any]], where: str) -> Rows:
        """``rows`` as given, or a list of dicts located as ``"<where> row <i>"`` (from 1).

        Raises:
            LocalTaskError: when ``rows`` is not a list of JSON objects.
        """
        if isinstance(rows, Rows):
            return rows
        if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Sequence):
            raise LocalTaskError(f"{where}: expected a list of rows (dicts), got {type(rows).__name__}")
        locations = [f"{where} row {i}" for i in range(1, len(rows) + 1)]
        for location, row in zip(locations, rows, strict=True):
            if not isinstance(row, Mapping):
                raise LocalTaskError(f"{location}: expected a JSON object, got {type(row).__name__}")
        return cls([dict(row) for row in rows], locations, where)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        return iter(zip(self.locations, self.rows, strict=True))

    def require(self, what: str = "rows") -> Rows:
        """``self``, or an error when there are no rows."""
        if not self.rows:
            raise LocalTaskError(f"{self.source}: no {what}")
        return self


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def field(row: Mapping[str, Any], location: str, name: str) -> Any:
    """``row[name]``, or an error naming the row and the fields it has."""
    if name not in row:
        raise LocalTaskError(f"{location}: missing field {name!r}; the row has {sorted(row)}")
    return row[name]


def first_present(rows: Rows, names: Sequence[str]) -> str:
    """The first of ``names`` (alternative spellings of one field) present in the first row."""
    first = rows.rows[0] if rows.rows else {}
    return next((name for name in names if name in first), names[0])


def text(row: Mapping[str, Any], location: str, name: str, *, default: str | None = None) -> str:
    """A string field (``default`` when absent and a default is given)."""
    if default is not None and name not in row:
        return default
    value = field(row, location, name)
    if not isinstance(value, str):
        raise LocalTaskError(
            f"{location}: field {name!r} must be a string, got {_type_name(value)} {value!r}"
        )
    return value


def number(
    row: Mapping[str, Any], location: str, name: str, *, bounds: tuple[float, float] | None = None
) -> float:
    """A finite number field (int or float, not a boolean or a string), optionally within ``bounds``."""
    value = field(row, location, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LocalTaskError(
            f"{location}: field {name!r} must be a number, got {_type_name(value)} {value!r}"
        )
    if not math.isfinite(value):
        raise LocalTaskError(f"{location}: field {name!r} is {value}; scores must be finite numbers")
    if bounds is not None and not bounds[0] <= value <= bounds[1]:
        raise LocalTaskError(
            f"{location}: field {name!r} is {value}, outside the task's score range [{bounds[0]}, {bounds[1]}] "
            "(set score_range=(low, high) for another scale)"
        )
    return float(value)


def integer(
    row: Mapping[str, Any],
    location: str,
    name: str,
    *,
    allowed: Sequence[int] | None = None,
    minimum: int | None = None,
) -> int:
    """An integer field (``1`` or ``1.0``; never a fraction such as ``0.7``, which is refused, not truncated)."""
    value = field(row, location, name)
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    wanted = f"one of {list(allowed)}" if allowed is not None else "an integer"
    if not isinstance(value, int):
        raise LocalTaskError(
            f"{location}: field {name!r} must be {wanted}, got {_type_name(value)} {value!r}"
        )
    if (allowed is not None and value not in allowed) or (minimum is not None and value < minimum):
        bound = wanted if allowed is not None else f"an integer >= {minimum}"
        raise LocalTaskError(f"{location}: field {name!r} must be {bound}, got {value!r}")
    return value


def identifier(row: Mapping[str, Any], location: str, name: str) -> str:
    """An id field: a non-empty string or an integer, returned as a string."""
    value = field(row, location, name)
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise LocalTaskError(
            f"{location}: field {name!r} must be a non-empty string or an integer, got {_type_name(value)} {value!r}"
        )
    return str(value)


def label(row: Mapping[str, Any], location: str, name: str) -> str | int:
    """A class label: a string or an integer (booleans count as 0 / 1)."""
    value = field(row, location, name)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, (str, int)):
        raise LocalTaskError(
            f"{location}: field {name!r} must be a string or an integer label, got {_type_name(value)} {value!r}"
        )
    return value


def unique_ids(rows: Rows, name: str, what: str) -> dict[str, str]:
    """``{id: location}`` of ``rows``; an error names both rows of a duplicate id."""
    seen: dict[str, str] = {}
    for location, row in rows:
        key = identifier(row, location, name)
        if key in seen:
            raise LocalTaskError(
                f"{location}: duplicate {what} id {key!r} (first at {seen[key]}); ids must be unique"
            )
        seen[key] = location
    return seen
