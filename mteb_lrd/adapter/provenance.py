"""What produced a result: the command line and the versions of the libraries that shape the
numbers, recorded with every ``layer_dynamics`` entry so a report can state them per result file."""

from __future__ import annotations

import shlex
import sys
from functools import cache
from typing import Any

from mteb_lrd._compat import installed_version

__all__ = ["PROVENANCE_PACKAGES", "process_command", "record_command", "run_provenance"]

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


_COMMAND: list[str] = []


def process_command() -> str:
    """This process's command line (program name without its folder)."""
    return shlex.join([sys.argv[0].rsplit("/", 1)[-1], *sys.argv[1:]]) if sys.argv else ""


def record_command(command: str) -> None:
    """Record ``command`` instead of this process's own (a Ray worker runs the driver's command)."""
    _COMMAND[:] = [command]


@cache
def _versions() -> dict[str, str]:
    versions = {name: installed_version(name) for name in PROVENANCE_PACKAGES}
    return {name: version for name, version in versions.items() if version is not None}


def run_provenance() -> dict[str, Any]:
    """``{"command": the command line of the run, "python": version, "versions": {package: version}}``."""
    return {
        "command": _COMMAND[0] if _COMMAND else process_command(),
        "python": sys.version.split()[0],
        "versions": _versions(),
    }
