"""One name per thing: no two modules of the package define a public function or class of the same
name (the sub-commands' ``register`` / ``run`` pair, one per ``cli/`` module, is the one protocol
shared by name), and one module exports ``MetricParams``."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mteb_lrd"
SUB_COMMAND_PROTOCOL = {"register", "run"}


def _public_definitions() -> dict[str, list[str]]:
    found: dict[str, list[str]] = collections.defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE.parent).with_suffix("").as_posix().replace("/", ".")
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                found[node.name].append(module)
    return found


def test_no_two_modules_define_the_same_public_name():
    definitions = _public_definitions()
    assert len(definitions) > 300  # not vacuous: the scan sees the package
    shared = {
        name: modules
        for name, modules in definitions.items()
        if len(modules) > 1
        and not (name in SUB_COMMAND_PROTOCOL and all(m.startswith("mteb_lrd.cli.") for m in modules))
    }
    assert not shared, f"one name, several definitions: {shared}"


def _exports(path: Path) -> list[str]:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return []


def test_metric_params_is_exported_by_one_module():
    exporting = [
        path.relative_to(PACKAGE.parent).as_posix()
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "__init__.py" and "MetricParams" in _exports(path)
    ]
    assert exporting == ["mteb_lrd/metrics/params.py"]
