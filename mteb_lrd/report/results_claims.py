"""The results document's shared vocabulary: a claim row, its verdict by the document's rule (and
whether its test could reach the level at all), what a row's n says, the models' checkpoints in
words, and the table of claims."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from mteb_lrd.metrics.permutation import below
from mteb_lrd.report.studies import markdown_table
from mteb_lrd.studies.selection_analysis import ALPHA

__all__ = [
    "CHECKPOINTS",
    "Claim",
    "cell",
    "claims_table",
    "complete",
    "count",
    "fmt_p",
    "models_of",
    "size",
    "verdict",
]

Claim = dict[str, Any]
"""One row of the claims table: ``claim``, ``paper``, ``ours``, ``n``, ``test``, ``p``, ``p_adj``,
``verdict``, ``study``, and optionally ``p_cell`` (the p column as written, where p is a bound)."""

CHECKPOINTS: dict[str, str] = {
    "smollm2-135m": "SmolLM2-135M-Instruct, Q4_1 GGUF dequantised to float32",
    "gemma-3-270m": "Gemma-3-270M base, Q4_K_M GGUF dequantised to float32",
    "qwen2.5-coder-0.5b": "Qwen2.5-Coder-0.5B-Instruct, GGUF dequantised to float32",
    "qwen2.5-coder-1.5b": "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF dequantised to float32",
}
"""The panel's decoders by panel name, as the document describes them: the checkpoint and its
quantisation as the panel's model table (``source`` in :mod:`mteb_lrd.models.panel`) gives them,
without how the weights are packaged; the records hold the panel name only."""


def count(n: int, noun: str) -> str:
    """``"1 model"``, ``"9 models"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def models_of(records: Sequence[Mapping[str, Any]]) -> set[str]:
    """The model names of ``records``."""
    return {r["model"]["name"] for r in records}


def cell(record: Mapping[str, Any]) -> tuple[str, str]:
    """A record's (model, task)."""
    return record["model"]["name"], record["task"]


def complete(records: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], dict[str, int]]:
    """The records of the models that have every task of the study (those the model-level tests
    use), and the others' task counts."""
    tasks = {r["task"] for r in records}
    held: dict[str, set[str]] = {}
    for r in records:
        held.setdefault(r["model"]["name"], set()).add(r["task"])
    partial = {model: len(have) for model, have in held.items() if have != tasks}
    return [r for r in records if r["model"]["name"] not in partial], partial


def size(records: Sequence[Mapping[str, Any]]) -> str:
    """The unit of the tests first, then what each was measured on: ``"9 models (7 tasks; 1,870–6,384
    texts each, LRD on ≤ 1,000 / 1,000 / 5,000)"``: each task's distinct test texts (its MTEB score is
    over all its test pairs), and the caps the LRD scores sampled them to (Frenet / NRS / GFMI) when
    the records share them."""
    tasks = {r["task"] for r in records}
    texts = sorted({int(r.get("n_texts") or 0) for r in records})
    span = f"{texts[0]:,}" if len(texts) == 1 else f"{texts[0]:,}–{texts[-1]:,}"
    caps = {tuple((r.get("caps") or {}).get(k) for k in ("frenet", "nrs", "gfmi")) for r in records}
    cap = caps.pop() if len(caps) == 1 else ()
    capped = f", LRD on ≤ {' / '.join(f'{c:,}' for c in cap)}" if cap and all(
        isinstance(c, int) and c > 0 for c in cap) else ""  # fmt: skip
    return (
        f"{count(len(models_of(records)), 'model')} ({count(len(tasks), 'task')}; {span} texts each{capped})"
    )


def fmt_p(value: float) -> str:
    """A p-value at three decimals (``"5.0e-04"`` below 0.001, a dash when undefined)."""
    return "–" if not math.isfinite(value) else f"{value:.3f}" if value >= 0.001 else f"{value:.1e}"


def verdict(direction_ok: bool, p_adjusted: float, floor: float, family: int, units: str) -> str:
    """The document's verdict of one tested row.

    Args:
        direction_ok: the estimate has the paper's direction.
        p_adjusted: its Holm-adjusted p.
        floor: the smallest p its test can give on these units (one model's sign flip: 1).
        family: the size of its Holm family (Holm multiplies the family's smallest p by it).
        units: the test's units in words (``"1 model"``).

    Returns:
        ``"not testable with n = …"`` when no outcome could reach α (``family × floor`` not below it;
        ``(Holm over k)`` is added where the test alone could), else ``"replicated"`` /
        ``"contradicted"`` (adjusted p below α) or ``"undecided"``.
    """
    if not below(family * floor, ALPHA):
        return f"not testable with n = {units}" + (f" (Holm over {family})" if below(floor, ALPHA) else "")
    if math.isfinite(p_adjusted) and below(p_adjusted, ALPHA):
        return "replicated" if direction_ok else "contradicted"
    return "undecided"


def claims_table(claims: Sequence[Claim]) -> list[str]:
    """The first table of the document: one row per claim."""
    rows = [[c["claim"], c["paper"], c["ours"], c["n"], c["test"],
             c.get("p_cell") or f"{fmt_p(c['p'])} / {fmt_p(c['p_adj'])}", f"**{c['verdict']}**", c["study"]]
            for c in claims]  # fmt: skip
    return markdown_table(["the paper's claim", "the paper's figure", "ours", "n", "test", "p (raw / Holm)",
                           "verdict", "records"], rows)  # fmt: skip
