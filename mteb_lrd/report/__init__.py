"""Leaderboard-style reports from an mteb results folder: Markdown, PNG figures, one HTML page."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from mteb_lrd.integration.results import load_variants
from mteb_lrd.io import atomic_write_text
from mteb_lrd.report.html import render_html
from mteb_lrd.report.plots import plot_profiles
from mteb_lrd.report.tables import LRD_COLUMNS, Leaderboard, leaderboard, to_markdown

__all__ = [
    "LRD_COLUMNS",
    "Leaderboard",
    "leaderboard",
    "render_html",
    "to_markdown",
    "plot_profiles",
    "write_report",
]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:120] or "model"


def write_report(
    results: str | Path, output: str | Path, tasks: Sequence[str] | None = None
) -> dict[str, Path]:
    """Write ``leaderboard.md``, ``report.html`` and ``figures/<variant>.png`` to ``output``.

    Args:
        results: an mteb results folder (``ResultCache`` folder or its ``results/``).
        output: the report folder (created).
        tasks: task columns; default every task found.

    Returns:
        ``{"markdown": path, "html": path, "figures": [paths]}``.

    Raises:
        ValueError: when the folder holds no results.
    """
    variants = load_variants(results)
    if not variants:
        raise ValueError(f"no mteb results found under {results}")
    output = Path(output)
    (output / "figures").mkdir(parents=True, exist_ok=True)
    board = leaderboard(variants, tasks)
    figures = []
    for variant in variants:
        png = plot_profiles(variant, output / "figures" / f"{_slug(variant.label)}.png")
        if png is not None:
            figures.append((variant.label, png))
    markdown = "# mteb-lrd leaderboard\n\n" + to_markdown(board)
    if figures:
        markdown += "\n## Layer profiles\n\n" + "".join(
            f"![{label}](figures/{png.name})\n\n" for label, png in figures
        )
    atomic_write_text(output / "leaderboard.md", markdown)
    atomic_write_text(output / "report.html", render_html(board, figures))
    return {
        "markdown": output / "leaderboard.md",
        "html": output / "report.html",
        "figures": [p for _, p in figures],
    }
