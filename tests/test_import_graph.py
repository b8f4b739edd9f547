"""No import circle in ``mteb_lrd``, counting every import statement: at module level, inside
functions (a deferred import that hides a circle is still a circle) and under ``TYPE_CHECKING``."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

PACKAGE = Path(__file__).resolve().parents[1] / "mteb_lrd"


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports anywhere in its file (``from a import b``: ``a.b`` when
    that is a module, else ``a``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names)  # fmt: skip
    return {t for t in targets if t in modules and t != name}


def import_graph() -> dict[str, set[str]]:
    """``{module: modules of the package it imports}`` for every module of ``mteb_lrd``."""
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (each one an import circle)."""
    names = sorted(graph)
    index = {name: i for i, name in enumerate(names)}
    rows = [index[a] for a in names for _ in graph[a]]
    cols = [index[b] for a in names for b in graph[a]]
    matrix = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(names), len(names)))
    _, labels = connected_components(matrix, directed=True, connection="strong")
    groups: dict[int, list[str]] = {}
    for name, label in zip(names, labels, strict=True):
        groups.setdefault(int(label), []).append(name)
    return [group for group in groups.values() if len(group) > 1]


def test_the_package_has_no_import_circle():
    graph = import_graph()
    assert len(graph) > 80 and "mteb_lrd.adapter.seams" in graph["mteb_lrd.adapter.wrapper"]
    assert "mteb_lrd.adapter.augmentation" in graph["mteb_lrd.adapter.seams"]  # a deferred import
    assert circles(graph) == []


def test_the_scan_sees_deferred_and_relative_imports(tmp_path):
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert [sorted(c) for c in circles(graph)] == [["a", "b", "c"]]
    modules = {
        "p": tmp_path / "p" / "__init__.py",
        "p.x": tmp_path / "p" / "x.py",
        "p.y": tmp_path / "p" / "y.py",
    }
    for path in modules.values():
        path.parent.mkdir(exist_ok=True)
    modules["p.x"].write_text("def f():\n    from . import y\n")  # deferred and relative
    assert _imports("p.x", modules["p.x"], modules) == {"p.y"}
