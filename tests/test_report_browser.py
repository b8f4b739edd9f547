"""The report page in a real headless browser (Debian's ``chromium``): it renders, with its figures.

Skipped where no chromium is installed (CI installs none: ~300 MB); ``apt-get install chromium`` and
run this file to check a change to the page. docs/reports.md gives the same check as a command.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from mteb_lrd.report import write_report
from tests.test_report import _build

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(BROWSER is None, reason="no chromium installed (apt-get install chromium)")
def test_report_renders_with_its_figures_in_chromium(tmp_path):
    from PIL import Image

    paths = write_report(_build(tmp_path / "cache"), tmp_path / "report")
    shot = tmp_path / "page.png"
    command = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--window-size=1400,5000", f"--screenshot={shot}", paths["html"].as_uri()]  # fmt: skip
    subprocess.run(command, capture_output=True, timeout=180, check=False)
    assert shot.is_file(), "chromium wrote no screenshot"
    page = np.asarray(Image.open(shot).convert("RGB"))
    assert page.shape[:2] == (5000, 1400)
    rows = np.flatnonzero((page < 250).any(axis=(1, 2)))  # rows with anything drawn on them
    assert rows.size > 2500  # tables and figures fill the page, not one line of text
    colours = np.unique(page.reshape(-1, 3)[::7], axis=0)
    assert len(colours) > 1000  # plot lines and bands: the PNG figures were decoded (text alone: ~400)
