"""One source for every metric default: the metric functions' signatures take theirs from
:class:`~mteb_lrd.metrics.params.MetricParams`, so no signature can restate a different value."""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import pytest

from mteb_lrd.metrics.params import MetricParams

frenet, nrs, gfmi, lrd = (
    importlib.import_module(f"mteb_lrd.metrics.{name}") for name in ("frenet", "nrs", "gfmi", "lrd")
)

FIELDS = {f.name: f.default for f in dataclasses.fields(MetricParams)}
ALIASES = {  # a family's own parameter name for a MetricParams field
    "nrs": {"k": "nrs_k"},
    "gfmi": {"k": "gfmi_k"},
}
FUNCTIONS = [
    (module, name)
    for module in (frenet, nrs, gfmi, lrd)
    for name in module.__all__
    if inspect.isfunction(getattr(module, name))
]


@pytest.mark.parametrize(
    ("module", "name"), FUNCTIONS, ids=[f"{m.__name__.rsplit('.', 1)[-1]}.{n}" for m, n in FUNCTIONS]
)
def test_a_signature_restates_no_default_of_its_own(module, name):
    family = module.__name__.rsplit(".", 1)[-1]
    aliases = ALIASES.get(family, {})
    for parameter in inspect.signature(getattr(module, name)).parameters.values():
        field = aliases.get(parameter.name, parameter.name)
        if field in FIELDS and parameter.default is not inspect.Parameter.empty:
            assert parameter.default == FIELDS[field], (
                f"{name}({parameter.name}={parameter.default!r}) vs MetricParams.{field} = {FIELDS[field]!r}"
            )


def test_the_check_sees_the_signatures_it_guards():
    """Not vacuous: the metric entry points with a default of MetricParams' are among those checked."""
    checked = {f"{m.__name__.rsplit('.', 1)[-1]}.{n}" for m, n in FUNCTIONS}
    assert {
        "frenet.frenet",
        "nrs.nrs",
        "nrs.nrs_by_layer",
        "gfmi.gfmi",
        "gfmi.gfmi_by_layer",
        "lrd.lrd",
    } <= checked
    assert inspect.signature(nrs.nrs).parameters["k"].default == MetricParams.nrs_k == 20
