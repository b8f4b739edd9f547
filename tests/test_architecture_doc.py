"""docs/architecture.md names every module of the package, in the row of its own package: a module
added without a word there fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
ROWS = [line for line in DOC.splitlines() if line.startswith("| ") and "`" in line]
MODULES = sorted(
    p.relative_to(ROOT / "mteb_lrd")
    for p in (ROOT / "mteb_lrd").rglob("*.py")
    if p.name not in ("__init__.py", "__main__.py")
)


def _row_of(package: str) -> str:
    """The table row whose 'where' cell names ``package/`` (``""`` for the package root: every row)."""
    if not package:
        return "\n".join(ROWS)
    found = [row for row in ROWS if re.search(rf"`{re.escape(package)}/`", row.split("|")[2])]
    return "\n".join(found)


@pytest.mark.parametrize("module", MODULES, ids=str)
def test_every_module_is_named_in_its_packages_row(module):
    package = module.parts[0] if len(module.parts) > 1 else ""
    row = _row_of(package)
    assert row, f"docs/architecture.md has no row for {package}/"
    assert f"`{module.name}`" in row, (
        f"docs/architecture.md does not name {module} in the {package or 'root'} row"
    )


def test_the_check_covers_the_packages():
    packages = {m.parts[0] for m in MODULES if len(m.parts) > 1}
    assert {
        "metrics",
        "extraction",
        "adapter",
        "registration",
        "dysem",
        "studies",
        "report",
        "cli",
    } <= packages
