"""The report page in a real headless browser (Debian's ``chromium``): it renders with its figures,
its headline columns are on screen at 1,280 px however many tasks there are, and its tables sort.

``.ci/run`` installs chromium when it is absent, so CI runs these; elsewhere they are skipped
without it (``apt-get install chromium``). docs/reports.md gives the same check as a command.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from mteb_lrd.report import write_report
from mteb_lrd.report.html import Page, render_html
from mteb_lrd.report.tables import Table
from tests.test_report import _build

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")


NEEDS_BROWSER = pytest.mark.skipif(BROWSER is None, reason="no chromium installed (apt-get install chromium)")
HEADLINE_BLUE = (219, 231, 246)  # table.board th.headline


def _chromium(*arguments: str) -> subprocess.CompletedProcess[str]:
    """Headless chromium on a fresh profile, with nothing that reaches for the (closed) network."""
    assert BROWSER is not None
    with tempfile.TemporaryDirectory() as profile:
        command = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--disable-quic",
                   "--no-first-run", "--disable-background-networking", "--disable-component-update",
                   "--disable-sync", f"--user-data-dir={profile}", *arguments]  # fmt: skip
        return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


@NEEDS_BROWSER
def test_report_renders_with_its_figures_in_chromium(tmp_path):
    from PIL import Image

    paths = write_report(_build(tmp_path / "cache"), tmp_path / "report")
    shot = tmp_path / "page.png"
    _chromium("--window-size=1400,5000", f"--screenshot={shot}", paths["html"].as_uri())
    assert shot.is_file(), "chromium wrote no screenshot"
    page = np.asarray(Image.open(shot).convert("RGB"))
    assert page.shape[:2] == (5000, 1400)
    rows = np.flatnonzero((page < 250).any(axis=(1, 2)))  # rows with anything drawn on them
    assert rows.size > 2500  # tables and figures fill the page, not one line of text
    colours = np.unique(page.reshape(-1, 3)[::7], axis=0)
    assert len(colours) > 1000  # plot lines and bands: the PNG figures were decoded (text alone: ~400)


def _wide_board(tasks: int) -> Table:
    """A leaderboard of two models over ``tasks`` tasks with long names: wider than any screen."""
    names = [f"LongTaskNameNumber{i:02d}Classification" for i in range(tasks)]
    columns = ["Model", "Variant", "Mean", "Best layer", "d0L [rad]", "NRS mean J", "GFMI mean AUC",
               *names, "Tasks", "Revision"]  # fmt: skip
    rows = [[f"org/model-{m}", "base", 70.0 + m, 5, 10.0 + m, 0.3, 50.0, *([60.0] * tasks), tasks, "r"]
            for m in range(2)]  # fmt: skip
    return Table(columns, rows, tasks=names, groups=["a", "b"])


@NEEDS_BROWSER
def test_the_headline_columns_are_on_screen_at_1280_px_with_thirty_tasks(tmp_path):
    from PIL import Image

    board = _wide_board(30)
    page = Page("wide", "", board, Table(["Model"], [], [], []), [], [], {})
    path = tmp_path / "wide.html"
    path.write_text(render_html(page), encoding="utf-8")
    shot = tmp_path / "wide.png"
    _chromium("--window-size=1280,800", f"--screenshot={shot}", path.as_uri())
    pixels = np.asarray(Image.open(shot).convert("RGB"))
    assert pixels.shape[1] == 1280
    blue = (pixels == HEADLINE_BLUE).all(axis=2)
    row = blue[blue.sum(axis=1).argmax()]  # the heading row, across its headline cells
    runs = np.count_nonzero(np.diff(row.astype(np.int8)) == 1) + int(row[0])
    assert runs == 5, f"{runs} of the 5 headline headings are drawn within the first 1,280 px"


@NEEDS_BROWSER
@pytest.mark.parametrize(
    ("column", "suffix", "descending"), [("d0L [rad]", "", True), ("Mean", ",asc", False)]
)
def test_the_leaderboard_sorts_by_a_column_named_in_the_address(tmp_path, column, suffix, descending):
    paths = write_report(_build(tmp_path / "cache"), tmp_path / "report")
    dom = _chromium("--dump-dom", f"{paths['html'].as_uri()}#sort={column}{suffix}").stdout
    board = dom[dom.index('<table class="board') : dom.index("</table>", dom.index('<table class="board'))]
    heads = [html.unescape(h) for h in re.findall(r"<th[^>]*>([^<]*)</th>", board)]
    assert f'aria-sort="{"descending" if descending else "ascending"}"' in board
    at = heads.index(column)
    groups = board.split('<tbody class="group">')[1:]
    values = [float(re.findall(r"<td[^>]*>([^<]*)</td>", group)[at]) for group in groups]
    assert len(values) == 3 and values == sorted(values, reverse=descending)
