"""Tidy study records: one small CSV per study, one row per (model, task, score) or scored variant.

A study folder's cell records (``records/<model>/<task>.json``) hold profiles and settings; the tidy
file keeps what the results documents are computed from, small enough to commit, and turns back
into records the analyses read (:func:`records_from_rows`), so every number of the results documents
is regenerated from committed files.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mteb_lrd.io import atomic_write_text
from mteb_lrd.pruning.rules import block_key

__all__ = [
    "COLUMNS",
    "merge_rows",
    "read_rows",
    "records_from_rows",
    "study_kind",
    "tidy_rows",
    "write_rows",
]

COLUMNS: tuple[str, ...] = (
    "study", "model", "family", "kind", "params", "dim", "layers", "template", "task", "split",
    "n_texts", "row", "score", "value", "method", "budget", "seed", "blocks", "speedup", "options", "versions",
)  # fmt: skip
"""The tidy file's columns. ``row`` says what a row is: ``score`` (an LRD score or ``main_score`` of a
selection cell), ``base`` (a pruning cell's unpruned score), ``choice`` (a method's variant: ``value``
is its score change) or ``subset`` (an exhaustively scored block set: ``value`` is its change). A
cell's ``options`` and ``versions`` are on its first row; its other rows leave them empty."""

_MODEL_KEYS = ("family", "kind", "params", "dim", "layers", "template")


def study_kind(records: Sequence[Mapping[str, Any]]) -> str:
    """``"pruning"`` when the records hold pruning choices, else ``"selection"``.

    Raises:
        ValueError: no record, or records of both kinds.
    """
    kinds = {"pruning" if "choices" in rec else "selection" for rec in records}
    if len(kinds) != 1:
        raise ValueError(f"expected the records of one study, got {sorted(kinds) or 'none'}")
    return kinds.pop()


def _common(rec: Mapping[str, Any], study: str, options: Mapping[str, Any]) -> dict[str, Any]:
    model = rec["model"]
    return {
        "study": study, "model": model["name"], **{k: model.get(k) for k in _MODEL_KEYS}, "task": rec["task"],
        "split": "test", "n_texts": rec.get("n_texts"), "options": json.dumps(options, sort_keys=True),
        "versions": json.dumps((rec.get("run") or {}).get("versions", {}), sort_keys=True),
    }  # fmt: skip


def _selection_rows(rec: Mapping[str, Any], study: str, scores: Mapping[str, float]) -> list[dict[str, Any]]:
    options = {"caps": rec.get("caps"), "reproduce": rec.get("reproduce", "ours"), "prompt": rec.get("prompt"),
               "text_order": rec.get("text_order"), "main_score_name": rec.get("main_score_name")}  # fmt: skip
    if "max_length" in rec["model"]:  # the truncation, as recorded (None: the model's own limit)
        options["max_length"] = rec["model"]["max_length"]
    if "undefined_states" in rec:  # recorded since uninformative states give no number
        options["undefined_states"] = rec["undefined_states"]
        options["undefined"] = rec.get("undefined") or {}
    common = _common(rec, study, options)
    seed = (rec.get("lrd_params") or {}).get("seed")
    rows = [{**common, "row": "score", "score": "main_score", "value": rec["main_score"], "seed": seed}]
    return rows + [
        {**common, "row": "score", "score": k, "value": v, "seed": seed} for k, v in scores.items()
    ]


def _pruning_rows(rec: Mapping[str, Any], study: str) -> list[dict[str, Any]]:
    settings = rec.get("settings", {})
    options = {
        k: settings.get(k) for k in ("protect", "mapping", "caps", "reproduce", "prompt", "text_order")
    }
    options["main_score_name"] = rec.get("main_score_name")
    if "variant_encoding" in settings:  # how the variants were encoded (recorded since it varies)
        options["variant_encoding"] = settings["variant_encoding"]
    common = _common(rec, study, options)
    rows = [{**common, "row": "base", "score": "main_score", "value": rec["base_score"]}]
    for c in rec["choices"]:
        rows.append({**common, "row": "choice", "score": "delta", "value": c["delta"], "method": c["method"],
                     "budget": c["budget"], "seed": c.get("seed"), "blocks": block_key(c["blocks"]),
                     "speedup": c.get("speedup")})  # fmt: skip
    for size, sets in (rec.get("subsets") or {}).items():
        rows += [{**common, "row": "subset", "score": "delta", "value": v, "budget": None, "method": f"size {size}",
                  "blocks": key} for key, v in sets.items()]  # fmt: skip
    return rows


def tidy_rows(records: Sequence[Mapping[str, Any]], study: str) -> list[dict[str, Any]]:
    """The tidy rows of a study's cell records (selection scores in the records' own ``reproduce``
    definitions, as the analysis reads them).

    Raises:
        ValueError: as :func:`study_kind`.
    """
    if study_kind(records) == "pruning":
        return [row for rec in records for row in _settings_once(_pruning_rows(rec, study))]
    from mteb_lrd.studies.selection_analysis import record_scores, records_reproduce

    mode = records_reproduce(records)
    return [
        row
        for rec in records
        for row in _settings_once(_selection_rows(rec, study, record_scores(rec, mode)))
    ]


def _settings_once(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One cell's rows with its ``options`` and ``versions`` on the first row only (the same on every
    row of a cell; written once, they keep a 9-model study's file a few hundred kB)."""
    return [rows[0], *({**row, "options": None, "versions": None} for row in rows[1:])]


def _cell(rows: list[dict[str, Any]]) -> dict[str, Any]:
    first = rows[0]
    options = json.loads(first["options"] or "{}")
    model = {"name": first["model"], **{k: first[k] for k in _MODEL_KEYS}}
    if "max_length" in options:  # recorded since tidy files keep the truncation
        model["max_length"] = options["max_length"]
    extra = {k: options[k] for k in ("undefined_states", "undefined") if k in options}
    rec: dict[str, Any] = {"model": model, "task": first["task"], "n_texts": first["n_texts"],
                           "reproduce": options.get("reproduce") or "ours", "caps": options.get("caps"),
                           "main_score_name": options.get("main_score_name"), **extra}  # fmt: skip
    if any(r["row"] == "base" for r in rows):
        rec["base_score"] = next(r["value"] for r in rows if r["row"] == "base")
        rec["choices"] = [{"method": r["method"], "budget": r["budget"], "seed": r["seed"], "delta": r["value"],
                           "blocks": _blocks(r["blocks"]), "speedup": r["speedup"]}
                          for r in rows if r["row"] == "choice"]  # fmt: skip
        subsets: dict[str, dict[str, float]] = {}
        for r in (r for r in rows if r["row"] == "subset"):
            subsets.setdefault(str(r["method"]).removeprefix("size "), {})[r["blocks"]] = r["value"]
        rec["subsets"] = subsets
        return rec
    rec["main_score"] = next(r["value"] for r in rows if r["score"] == "main_score")
    rec["scores"] = {r["score"]: r["value"] for r in rows if r["score"] != "main_score"}
    return rec


def _blocks(text: Any) -> list[int]:
    return [int(b) for b in str(text).split(",") if b != ""] if text not in (None, "") else []


def records_from_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Cell records the analyses read (:func:`~mteb_lrd.studies.selection_analysis.analyse_selection`,
    :func:`~mteb_lrd.studies.pruning_analysis.analyse_pruning`), one per (model, task), in file order."""
    cells: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        cells.setdefault((row["model"], row["task"]), []).append(dict(row))
    return [_cell(group) for group in cells.values()]


def _cell_key(row: Mapping[str, Any]) -> tuple[str, str]:
    return (str(row["model"]), str(row["task"]))


def merge_rows(
    existing: Sequence[Mapping[str, Any]], update: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """``existing`` tidy rows with ``update``'s cells in them: a (model, task) cell of ``update``
    replaces the same cell in place, a new one is appended, every other cell is kept as it is. A
    study run in parts (on other machines, or resumed without its folder) thus adds to its file.

    Raises:
        ValueError: the two mix study kinds (selection and pruning) or ``reproduce`` modes.
    """
    from mteb_lrd.studies.selection_analysis import records_reproduce

    new: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in update:
        new.setdefault(_cell_key(row), []).append(dict(row))
    merged: list[dict[str, Any]] = []
    for row in existing:
        key = _cell_key(row)
        if key not in new:
            merged.append(dict(row))
        elif new[key]:
            merged += new[key]
            new[key] = []
    merged += [row for rows in new.values() for row in rows]
    records = records_from_rows(merged)
    study_kind(records)
    records_reproduce(records)
    _same_study_options([row for row in existing if _cell_key(row) not in new], update)
    return merged


_STUDY_OPTIONS = ("caps", "reproduce", "text_order", "protect", "mapping", "max_length")
"""Options every cell of one study shares (a model's prompt or a task's main score may differ)."""


def _same_study_options(kept: Sequence[Mapping[str, Any]], update: Sequence[Mapping[str, Any]]) -> None:
    """Raises ValueError when ``update``'s cells were made with other study options than the cells
    the file keeps (an option is compared where both record it)."""

    def options(rows: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, str, str]]:
        found: dict[str, tuple[str, str, str]] = {}
        for row in rows:
            if row.get("options"):
                settings = json.loads(str(row["options"]))
                for key in (k for k in _STUDY_OPTIONS if k in settings):
                    found.setdefault(
                        key, (json.dumps(settings.get(key), sort_keys=True), row["model"], row["task"])
                    )
        return found

    ours, theirs = options(kept), options(update)
    for key in set(ours) & set(theirs):
        if ours[key][0] != theirs[key][0]:
            raise ValueError(f"{theirs[key][1]} × {theirs[key][2]} was made with {key} {theirs[key][0]}, the "
                             f"file's cells with {ours[key][0]}: not one study")  # fmt: skip


def _text(value: Any) -> str:
    return "" if value is None else repr(value) if isinstance(value, float) else str(value)


def write_rows(path: str | Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write tidy rows as CSV (:data:`COLUMNS`, floats at full precision), atomically."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows([_text(row.get(column)) for column in COLUMNS] for row in rows)
    return atomic_write_text(path, buffer.getvalue())


_NUMBERS = {"params": int, "dim": int, "layers": int, "n_texts": int, "value": float, "budget": float,
            "seed": int, "speedup": float}  # fmt: skip


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Read a tidy CSV back (numbers as numbers, empty cells as ``None``).

    Raises:
        ValueError: a file whose header is not :data:`COLUMNS`, or an unreadable number (naming the line).
    """
    with Path(path).open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise ValueError(f"{path}: not a tidy study record (columns {reader.fieldnames})")
        rows = []
        for line, row in enumerate(reader, 2):
            try:
                rows.append(
                    {k: (None if v == "" else _NUMBERS[k](v) if k in _NUMBERS else v) for k, v in row.items()}
                )
            except ValueError as error:
                raise ValueError(f"{path}, line {line}: {error}") from None
    return rows
