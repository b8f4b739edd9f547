"""What a DySem study writes and reads: its table and JSON summary (``dysem-<model>[-rows<a>-<b>]``),
the refusal to overwrite another run's summary, and chunk summaries joined into one study."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mteb_lrd.io import atomic_write_text

__all__ = ["StudyResult", "assemble_summaries", "chunk_files", "read_chunks", "refuse_another_run",
           "summary_stem", "write_study"]  # fmt: skip


@dataclass
class StudyResult:
    """What :func:`run_study` produced: the markdown table, the JSON summary and their paths."""

    table_text: str
    summary: dict[str, Any]
    table_path: Path
    summary_path: Path
    table: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)


def summary_stem(path: Path, rows: tuple[int, int] | None) -> str:
    """The file name (no suffix) of a run's table and summary: the model's folder and the chunk's rows."""
    return f"dysem-{path.name}" + ("" if rows is None else "-rows{}-{}".format(*rows))


def refuse_another_run(summary_path: Path, identity: Mapping[str, Any]) -> None:
    """Refuse (before any model loads) a run whose summary would replace another run's: same model
    and rows in the same folder, other settings (among those both runs record in ``run``). A rerun of
    the same run may replace its summary.

    Raises:
        ValueError: naming the file and the settings that differ, or a summary that records no ``run``.
    """
    if not summary_path.is_file():
        return
    recorded = json.loads(summary_path.read_text(encoding="utf-8")).get("run")
    if recorded is None:
        raise ValueError(f"{summary_path} holds a run that records no settings to compare with; writing "
                         "this run there would replace it: move it away or use another --output-dir")  # fmt: skip
    differ = [
        f"{k} {recorded[k]!r} -> {v!r}" for k, v in identity.items() if k in recorded and recorded[k] != v
    ]
    if differ:
        raise ValueError(
            f"{summary_path} holds a run with other settings ({'; '.join(differ)}); writing this run there "
            "would replace it: use another --output-dir"
        )


def chunk_files(paths: Sequence[str | Path]) -> list[Path]:
    """The chunk summary files in ``paths``: JSON files, or folders of them (``dysem-*-rows*.json``).

    Raises:
        ValueError: none found.
    """
    files = [
        f for p in map(Path, paths) for f in (sorted(p.glob("dysem-*-rows*.json")) if p.is_dir() else [p])
    ]
    if not files:
        raise ValueError(f"no chunk summaries in {', '.join(map(str, paths))}")
    return files


def read_chunks(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """The chunk summaries in ``paths`` (:func:`chunk_files`), in that order."""
    return [json.loads(f.read_text(encoding="utf-8")) for f in chunk_files(paths)]


def assemble_summaries(paths: Sequence[str | Path], output_dir: str | Path) -> StudyResult:
    """Join chunk summaries (:func:`mteb_lrd.dysem.chunks.assemble`) and write the whole study's
    table and summary (``dysem-<model>.md`` / ``.json``) to ``output_dir``."""
    from mteb_lrd.dysem.chunks import assemble

    files = chunk_files(paths)
    try:
        summary = assemble([json.loads(f.read_text(encoding="utf-8")) for f in files])
    except ValueError as error:  # its "chunk i" is the i-th file
        named = "; ".join(f"chunk {i}: {f}" for i, f in enumerate(files))
        raise ValueError(f"{error} ({named})") from error
    stem = f"dysem-{Path(str(summary['model'])).name}"
    refuse_another_run(Path(output_dir) / f"{stem}.json", summary["run"])
    return write_study(Path(output_dir), stem, summary)


def write_study(folder: Path, stem: str, summary: dict[str, Any]) -> StudyResult:
    """Write a study's table (``<stem>.md``: the paper-style table and the paired comparisons) and
    its summary (``<stem>.json``) to ``folder``."""
    from mteb_lrd.dysem.evaluation import format_comparisons, format_table, write_json_atomic

    paired, table = summary["paired"], summary["table"]
    text = (
        format_table(table, list(summary["tasks"]))
        + "\n\n"
        + format_comparisons(paired["reference"], paired["tasks"])
    )
    table_path, summary_path = folder / f"{stem}.md", folder / f"{stem}.json"
    atomic_write_text(table_path, text + "\n")
    write_json_atomic(summary_path, summary)
    return StudyResult(text, summary, table_path, summary_path, table)
