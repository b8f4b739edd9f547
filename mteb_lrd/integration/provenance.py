"""What produced a result: the command line and the versions of the libraries that shape the
numbers, recorded with every ``layer_dynamics`` entry so a report can state them per result file."""

from __future__ import annotations

import shlex
import sys
from functools import cache
from importlib import metadata
from typing import Any

__all__ = ["PROVENANCE_PACKAGES", "run_provenance"]

PROVENANCE_PACKAGES = (
    "mteb-lrd",
    "mteb",
    "torch",
    "transformers",
    "sentence-transformers",
    "faiss-cpu",
    "faiss-gpu",
)
"""Distributions whose versions are recorded (those not installed are left out)."""


def _installed(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


@cache
def run_provenance() -> dict[str, Any]:
    """``{"command": the process's command line, "python": version, "versions": {package: version}}``."""
    versions = {name: _installed(name) for name in PROVENANCE_PACKAGES}
    return {
        "command": shlex.join([sys.argv[0].rsplit("/", 1)[-1], *sys.argv[1:]]) if sys.argv else "",
        "python": sys.version.split()[0],
        "versions": {name: version for name, version in versions.items() if version is not None},
    }
