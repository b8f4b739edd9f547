"""A self-contained HTML report page: the leaderboard and every figure embedded as data URIs."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path

from mteb_lrd.report.tables import Leaderboard, _format

__all__ = ["render_html"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; font-size: 14px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0 1.5em; }
p.note { color: #555; max-width: 60em; }
"""


def render_html(
    board: Leaderboard, figures: Sequence[tuple[str, Path]], title: str = "mteb-lrd report"
) -> str:
    """The report page as one HTML string (no external files: PNGs are base64 data URIs).

    Args:
        board: the leaderboard.
        figures: ``(caption, png path)`` pairs.
        title: page title.
    """
    head = "".join(f"<th>{html.escape(c)}</th>" for c in board.columns)
    body = []
    for row in board.rows:
        cells = [
            f'<td class="num">{html.escape(_format(cell))}</td>'
            if index >= 2
            else f"<td>{html.escape(_format(cell))}</td>"
            for index, cell in enumerate(row)
        ]
        body.append("<tr>" + "".join(cells) + "</tr>")
    images = []
    for caption, path in figures:
        data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
        images.append(
            f"<h3>{html.escape(caption)}</h3>"
            f'<img alt="layer profiles of {html.escape(caption)}" src="data:image/png;base64,{data}">'
        )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        '<p class="note">One row per model or pruned variant (variants are never averaged together). Task '
        "columns: main score × 100. LRD columns: model-level scores averaged over tasks, d0L first.</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        f"<h2>Layer profiles</h2>{''.join(images) or '<p>No layer dynamics in these results.</p>'}"
        "</body></html>\n"
    )
