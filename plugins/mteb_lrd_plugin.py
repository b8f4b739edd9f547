"""Registers mteb-lrd with MTEB: the local STS tasks and layer-dynamics models, for name look-ups,
leaderboard tables and mteb's own ``mteb run`` CLI.

mteb has no entry points. Import this module (``import mteb_lrd_plugin`` with ``plugins/`` on the
path) to register explicitly, or put ``plugins/`` on ``PYTHONPATH`` so that ``sitecustomize.py``
registers lazily, the moment a program imports mteb (see README.md in this folder). What is
registered: :func:`mteb_lrd.register_with_mteb`. This module uses only the package's public API.
"""

from __future__ import annotations

from mteb_lrd import MODEL_PREFIX, load_wrapped, register_with_mteb

__all__ = ["MODEL_PREFIX", "load_wrapped", "register"]


def register() -> list[str]:
    """Register tasks and models (idempotent); returns the names registered."""
    return register_with_mteb()


register()
