"""The self-contained HTML report page: tables, figures and the CSV / JSON exports embedded as data
URIs, so the one file can be mailed or opened anywhere."""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from mteb_lrd.report.result_files import UnreadableResult
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
table.board th.headline { background: #dbe7f6; }
table.sortable th { cursor: pointer; }
th[aria-sort="ascending"]::after { content: " \\25B2"; }
th[aria-sort="descending"]::after { content: " \\25BC"; }
"""

_SORTING = """
function cellKey(row, column) {
  var text = row.cells[column] ? row.cells[column].textContent.trim() : "";
  var number = Number(text);
  return text === "" || text === "\\u2013" || isNaN(number) ? [1, text] : [0, number];
}
function sortTable(table, column, descending) {
  table.querySelectorAll("thead th").forEach(function (h) { h.removeAttribute("aria-sort"); });
  table.tHead.rows[0].cells[column].setAttribute("aria-sort", descending ? "descending" : "ascending");
  var groups = Array.prototype.slice.call(table.tBodies);
  groups.sort(function (a, b) {
    var x = cellKey(a.rows[0], column), y = cellKey(b.rows[0], column);
    if (x[0] !== y[0]) { return x[0] - y[0]; }
    var order = x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0;
    return descending && x[0] === 0 ? -order : order;
  });
  groups.forEach(function (group) { table.appendChild(group); });
}
document.querySelectorAll("table.sortable").forEach(function (table) {
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, column) {
    th.title = "sort by this column (click again to reverse)";
    th.addEventListener("click", function () {
      sortTable(table, column, th.getAttribute("aria-sort") !== "descending");
    });
  });
});
(function () {
  var wanted = /^#sort=([^,]+)(,asc)?$/.exec(decodeURIComponent(location.hash));
  var board = document.querySelector("table.board");
  if (!wanted || !board) { return; }
  Array.prototype.forEach.call(board.tHead.rows[0].cells, function (th, column) {
    if (th.textContent === wanted[1]) { sortTable(board, column, !wanted[2]); }
  });
})();
"""
"""Sorting of every ``sortable`` table in plain JavaScript: a click on a column's heading sorts the
row groups (a model with its variants) by their first row, numbers descending first, missing
values last; ``report.html#sort=<column>`` (``,asc`` for ascending) opens the leaderboard sorted."""

_HEADLINE = ' class="headline"'

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


def _model_level(table: Table) -> list[str]:
    tail = [*table.tasks, "Tasks", "Revision"]
    return [c for c in table.columns[HEADLINE_LEAD:] if c not in tail]


def headline_order(table: Table) -> Table:
    """The leaderboard as the page shows it: after ``Model`` and ``Variant`` the model-level columns
    (``Mean``, best layer, the LRD scores), then the task columns, ``Tasks`` and ``Revision``, so that
    the headline numbers are on screen however many tasks there are."""
    lead = table.columns[:HEADLINE_LEAD]
    tail = [*table.tasks, "Tasks", "Revision"]
    model_level = _model_level(table)
    order = [table.columns.index(c) for c in [*lead, *model_level, *(c for c in tail if c in table.columns)]]
    return replace(
        table, columns=[table.columns[i] for i in order], rows=[[row[i] for i in order] for row in table.rows]
    )


def _table(
    table: Table, numeric_from: int, group_rows: bool, css: str = "", headline: Sequence[str] = ()
) -> str:
    """``headline``: the model-level columns, marked in the heading."""
    head = "".join(f"<th{_HEADLINE if c in headline else ''}>{html.escape(c)}</th>" for c in table.columns)
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
    attribute = f' class="{" ".join([css, "sortable"]) if css else "sortable"}"'
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
    board = headline_order(page.leaderboard)
    parts.append(_table(board, HEADLINE_LEAD, True, css="board", headline=_model_level(board)))
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
    parts.append(f"</table><script>{_SORTING}</script></body></html>\n")
    return "".join(parts)
