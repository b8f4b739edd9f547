"""The self-contained HTML report page: tables, figures and the CSV / JSON exports embedded as data
URIs, so the one file can be mailed or opened anywhere."""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from mteb_lrd.integration.results import UnreadableResult
from mteb_lrd.report.tables import Table, format_cell

__all__ = ["HEADLINE_LEAD", "VARIANTS_NOTE", "EmbeddedFigure", "Page", "headline_order", "render_html"]

VARIANTS_NOTE = (
    "mteb's own BenchmarkResults.to_dataframe() keys rows by model name: a base model and its pruned "
    "variants (mteb experiments) are averaged into one number there. This report, its CSV / JSON "
    "exports and mteb_lrd.results_table(folder) keep one row per model, revision and variant."
)

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1500px; padding: 0 1em; color: #222; }
table { border-collapse: collapse; font-size: 13px; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 3px 7px; white-space: nowrap; }
th { background: #f0f0f0; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tbody.group { border-top: 3px solid #888; }
tr.variant td:first-child { color: #888; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.3em 0 1.2em; }
p.note { color: #555; max-width: 75em; }
div.warning { background: #fff3cd; border: 1px solid #e0b000; padding: 0.6em 1em; margin: 1em 0; }
div.warning code { word-break: break-all; }
table.provenance th { text-align: left; position: static; }
table.provenance td { white-space: normal; }
.scroll { overflow-x: auto; }
table.board th { white-space: normal; max-width: 9em; vertical-align: bottom; }
table.board td:first-child, table.board th:first-child { position: sticky; left: 0; background: #fff; z-index: 1; }
table.board th:first-child { background: #f0f0f0; z-index: 2; }
"""

HEADLINE_LEAD = 2
"""Leading leaderboard columns kept in place on the page: ``Model`` and ``Variant``."""


@dataclass(frozen=True)
class EmbeddedFigure:
    """One embedded figure: section heading, caption and the PNG bytes."""

    section: str
    caption: str
    png: bytes


@dataclass
class Page:
    """Everything the page shows."""

    title: str
    summary: str
    leaderboard: Table
    tasks: Table
    figures: Sequence[EmbeddedFigure]
    unreadable: Sequence[UnreadableResult]
    provenance: Mapping[str, str]
    downloads: Mapping[str, str] = field(default_factory=dict)  # file name -> text content
    notes: Sequence[str] = ()


def headline_order(table: Table) -> Table:
    """The leaderboard as the page shows it: after ``Model`` and ``Variant`` the model-level columns
    (``Mean``, best layer, the LRD scores), then the task columns, ``Tasks`` and ``Revision``, so that
    the headline numbers are on screen however many tasks there are."""
    lead = table.columns[:HEADLINE_LEAD]
    tail = [*table.tasks, "Tasks", "Revision"]
    model_level = [c for c in table.columns if c not in lead and c not in tail]
    order = [table.columns.index(c) for c in [*lead, *model_level, *(c for c in tail if c in table.columns)]]
    return replace(
        table, columns=[table.columns[i] for i in order], rows=[[row[i] for i in order] for row in table.rows]
    )


def _table(table: Table, numeric_from: int, group_rows: bool, css: str = "") -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    groups: list[list[str]] = []
    previous = None
    for index, row in enumerate(table.rows):
        cells = "".join(
            f'<td class="num">{html.escape(format_cell(cell))}</td>'
            if column >= numeric_from and (cell is None or isinstance(cell, (int, float)))
            else f"<td>{html.escape(format_cell(cell))}</td>"
            for column, cell in enumerate(row)
        )
        group = table.groups[index]
        if not groups or group != previous or not group_rows:
            groups.append([])
        row_class = ' class="variant"' if groups[-1] else ""
        groups[-1].append(f"<tr{row_class}>{cells}</tr>")
        previous = group
    body = "".join(f'<tbody class="group">{"".join(rows)}</tbody>' for rows in groups)
    attribute = f' class="{css}"' if css else ""
    return f'<div class="scroll"><table{attribute}><thead><tr>{head}</tr></thead>{body}</table></div>'


def _download(name: str, text: str) -> str:
    mime = "text/csv" if name.endswith(".csv") else "application/json"
    data = base64.b64encode(text.encode("utf-8")).decode("ascii")
    return f'<a download="{html.escape(name)}" href="data:{mime};base64,{data}">{html.escape(name)}</a>'


def render_html(page: Page) -> str:
    """The report page as one HTML string (no external files)."""
    parts = [
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(page.title)}</title>'
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(page.title)}</h1>",
        f'<p class="note">{html.escape(page.summary)}</p>',
    ]
    if page.unreadable:
        items = "".join(
            f"<li><code>{html.escape(str(u.path))}</code>: {html.escape(u.reason)}</li>"
            for u in page.unreadable
        )
        parts.append(
            f'<div class="warning"><strong>{len(page.unreadable)} result file(s) could not be used and are NOT '
            f"in any score or mean below.</strong> Fix or remove them and rebuild the report:<ul>{items}</ul></div>"
        )
    parts.append(
        f'<p class="note"><strong>Variants are never averaged.</strong> {html.escape(VARIANTS_NOTE)}</p>'
    )
    parts.append("<h2>Leaderboard</h2>")
    parts.extend(f'<p class="note">{html.escape(note)}</p>' for note in page.notes)
    parts.append(_table(headline_order(page.leaderboard), HEADLINE_LEAD, group_rows=True, css="board"))
    if page.downloads:
        parts.append(
            "<p>Download the tables: "
            + " · ".join(_download(n, t) for n, t in page.downloads.items())
            + "</p>"
        )
    section = None
    for figure in page.figures:
        if figure.section != section:
            parts.append(f"<h2>{html.escape(figure.section)}</h2>")
            section = figure.section
        data = base64.b64encode(figure.png).decode("ascii")
        parts.append(
            f"<h3>{html.escape(figure.caption)}</h3>"
            f'<img alt="{html.escape(figure.caption)}" src="data:image/png;base64,{data}">'
        )
    if not page.figures:
        parts.append("<h2>Figures</h2><p>No layer dynamics or per-layer scores in these results.</p>")
    parts.append("<h2>Per task</h2>")
    parts.append(
        '<p class="note">main_score and best_layer_score as in the result files (0–1); best_layer in the base '
        "model's numbering (0 = embeddings); n_used_*: texts each LRD metric used (smallest over subsets).</p>"
    )
    parts.append(_table(page.tasks, 6, group_rows=True))
    parts.append('<h2>Provenance</h2><table class="provenance">')
    parts.extend(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in page.provenance.items()
    )
    parts.append("</table></body></html>\n")
    return "".join(parts)
