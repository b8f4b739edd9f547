"""Opt-in hook: with ``plugins/`` on ``PYTHONPATH``, register mteb-lrd the moment mteb is imported.

Costs nothing to programs that never import mteb: it only adds a finder that compares module names
until ``mteb`` is imported, then removes itself. ``MTEB_LRD_PLUGIN=0`` switches it off. Another
``sitecustomize`` further down ``sys.path`` is still executed.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

__all__ = ["MtebImportHook"]


class _RegisterAfterExec(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader, hook: MtebImportHook) -> None:
        self.inner = inner
        self.hook = hook

    def create_module(self, spec):  # noqa: ANN001, ANN201 - importlib protocol
        return self.inner.create_module(spec)

    def exec_module(self, module) -> None:  # noqa: ANN001 - importlib protocol
        self.inner.exec_module(module)
        if self.hook in sys.meta_path:  # mteb is imported: the hook's work is done
            sys.meta_path.remove(self.hook)
        try:
            import mteb_lrd_plugin  # noqa: F401 - importing registers
        except Exception as err:  # noqa: BLE001 - the plugin must never break `import mteb`
            import warnings

            warnings.warn(
                f"mteb-lrd plugin is off: {type(err).__name__}: {err}", RuntimeWarning, stacklevel=2
            )

    def __getattr__(self, name: str):  # noqa: ANN204 - delegate resource readers etc.
        return getattr(self.inner, name)


class MtebImportHook(importlib.abc.MetaPathFinder):
    """Wraps the loader of the top-level ``mteb`` package so registration runs right after it.

    It stays on ``sys.meta_path`` until mteb is executed: ``python -m mteb`` looks the package up
    (``find_spec``) before importing it, and both look-ups must see the wrapped loader.
    """

    def __init__(self) -> None:
        self._searching = False

    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001, ANN201 - importlib protocol
        if fullname != "mteb" or self._searching:
            return None
        self._searching = True  # the look-up below asks every finder again, this one included
        try:
            spec = importlib.util.find_spec("mteb")
        finally:
            self._searching = False
        if spec is not None and spec.loader is not None:
            spec.loader = _RegisterAfterExec(spec.loader, self)
        return spec


def _chain_next_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if os.path.abspath(entry or ".") == here:
            continue
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [entry])
        if spec is not None and spec.loader is not None:
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


if os.environ.get("MTEB_LRD_PLUGIN", "1") != "0" and "mteb" not in sys.modules:
    sys.meta_path.insert(0, MtebImportHook())
_chain_next_sitecustomize()
