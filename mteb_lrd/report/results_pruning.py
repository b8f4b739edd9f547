"""The results document's layer-pruning part: the paper's pruning claims as rows of the claims table
(tested against Random with the model as the unit, or described), and a pruning study's section."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from mteb_lrd.metrics.permutation import holm
from mteb_lrd.pruning.rules import RULES
from mteb_lrd.report.results_claims import Claim, cell, count, fmt_p, size, verdict
from mteb_lrd.report.studies import exhaustive_cells_table, exhaustive_summary_table
from mteb_lrd.report.studies import markdown_table as _table
from mteb_lrd.studies.pruning_analysis import analyse_pruning, pooled_vs_random

__all__ = ["PRUNING_CLAIMS", "PRUNING_FAMILY", "candidates_phrase", "pruning_claims", "pruning_section"]

PRUNING_CLAIMS: tuple[tuple[str, str, tuple[float, ...] | None, str], ...] = (
    ("gfmi", "GFMI beats Random by mean at {budgets}", (0.15, 0.2), "better"),
    ("frenet", "Frenet helps at the lightest budget ({budgets})", (0.05,), "better"),
    ("nrs", "NRS does not transfer (no gain over Random, all budgets)", None, "no gain"),
)
"""The paper's pruning claims: method, wording, budgets (``None``: pooled over budgets), direction.
A ``"better"`` claim is tested (budgets of it that remove the same blocks are one test, one row);
a ``"no gain"`` claim would need an equivalence margin, which the paper does not state: its row
describes the records and tests nothing."""
PRUNING_FAMILY = sum(
    len(budgets or ()) for _, _, budgets, direction in PRUNING_CLAIMS if direction == "better"
)
"""The most tested rows one pruning study's Holm family can have."""
_NO_MARGIN = "descriptive (a claim of no gain needs an equivalence margin; none is stated)"


def _budget_groups(records: Sequence[Mapping[str, Any]], analysis: Mapping[str, Any]) -> list[list[str]]:
    """The study's budgets (keys of ``analysis["table"]``), those at which every method made the same
    choices in every cell (the same blocks removed: one comparison) grouped, in budget order."""
    choices: dict[str, list[tuple[str, str, str, Any, list[int]]]] = {}
    for record in records:
        for c in record.get("choices", ()):
            key = f"{float(c['budget']):g}"
            choices.setdefault(key, []).append(
                (*cell(record), c["method"], c.get("seed"), sorted(c["blocks"]))
            )
    groups: dict[str, list[str]] = {}
    for budget in (f"{b:g}" for b in analysis["budgets"]):
        groups.setdefault(json.dumps(sorted(choices.get(budget, []), key=str)), []).append(budget)
    return list(groups.values())


def _percents(budgets: Sequence[str]) -> str:
    """``"15 %"``, ``"15 % and 20 %"``, ``"5 %, 10 % and 15 %"``."""
    named = [f"{float(b):.0%}".replace("%", " %") for b in budgets]
    return named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"


def _percentiles(analysis: Mapping[str, Any]) -> dict[tuple[str, str], float]:
    """Each (method, set size)'s mean percentile in the exhaustive reference (empty without one)."""
    summary = (analysis.get("exhaustive") or {}).get("summary") or []
    return {(r["method"], str(r["size"])): r["mean_percentile"] for r in summary}


def _percentile_phrase(percentiles: Mapping[tuple[str, str], float], method: str, size_: str) -> str:
    """``"percentile 32 among the sets of 2 blocks vs Random's 54"`` (``", the top of 8 methods"`` added
    where no method's is higher), or ``""`` without an exhaustive reference."""
    if (method, size_) not in percentiles:
        return ""
    mine, random = percentiles[(method, size_)], percentiles.get(("random", size_))
    peers = [v for (_, s), v in percentiles.items() if s == size_]
    top = f", the top of {len(peers)} methods" if len(peers) > 1 and mine >= max(peers) else ""
    against = f" vs Random's {random:.0f}" if random is not None else ""
    return f"percentile {mine:.0f} among the sets of {_blocks(size_)}{against}{top}"


def _side(difference: float) -> str:
    return "above Random" if difference > 0 else "below Random" if difference < 0 else "level with Random"


def _against(difference: float, ranks: Sequence[tuple[float, float | None]], gain: bool) -> bool:
    """Whether the mean difference and every percentile (mine, Random's) point against the paper's
    ``gain`` (True: the method is better than Random; False: no gain)."""
    wrong = (lambda d: d < 0) if gain else (lambda d: d > 0)
    return wrong(difference) and all(wrong(mine - random) for mine, random in ranks if random is not None)


def _ours(difference: float, phrases: Sequence[str], ranks: Sequence[tuple[float, float | None]],
          gain: bool, pooled: bool) -> str:  # fmt: skip
    """The ``ours`` cell of a pruning row: the mean difference, the percentiles, and whether they point
    the other way from the paper."""
    over = " over all budgets" if pooled else ""
    text = f"mean Δ − Random {difference:+.4f}{over} ({_side(difference)})"
    text += "".join(f"; {p}" for p in phrases if p)
    return text + (": our data point the other way" if _against(difference, ranks, gain) else "")


def _tested(records: list[dict[str, Any]], analysis: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One entry per distinct test of the ``"better"`` claims the records allow: wording, the method's mean
    Δ minus Random's, the sign-flip p over models, the models, and the ``ours`` cell."""
    table, sizes, percentiles = analysis["table"], _budget_sizes(records), _percentiles(analysis)
    tests: list[dict[str, Any]] = []
    for method, wording, budgets, direction in PRUNING_CLAIMS:
        if direction != "better" or budgets is None:
            continue
        asked = {f"{b:g}" for b in budgets}
        for group in analysis["budget_groups"]:
            held = [
                b for b in group if b in asked and b in table.get(method, {}) and b in table.get("random", {})
            ]
            if not held:
                continue
            size_, entry = sizes.get(float(held[0]), "?"), table[method][held[0]]
            difference = entry["mean"] - table["random"][held[0]]["mean"]
            ranks = [(percentiles[(method, size_)], percentiles.get(("random", size_)))] if (
                method, size_) in percentiles else []  # fmt: skip
            tests.append({
                "claim": wording.format(budgets=_percents(held))
                + ("" if len(held) == 1 else f" ({_blocks(size_)}: one test)"),
                "difference": difference, "p": entry["model_p_vs_random"], "models": int(entry["n_models"]),
                "ours": _ours(difference, [_percentile_phrase(percentiles, method, size_)],
                              ranks, True, False),
            })  # fmt: skip
    return tests


def _described(study: str, records: list[dict[str, Any]], analysis: Mapping[str, Any]) -> list[Claim]:
    """The ``"no gain"`` claims' rows: the pooled mean difference from Random and the percentiles at
    every set size, no test."""
    percentiles, claims = _percentiles(analysis), []
    for method, wording, _, direction in PRUNING_CLAIMS:
        pooled = pooled_vs_random(records, [method]).get(method) if direction == "no gain" else None
        if pooled is None:
            continue
        held = sorted({s for m, s in percentiles if m == method}, key=int)
        claims.append({
            "claim": wording, "paper": "no gain (Fig. 2)",
            "ours": _ours(pooled["difference"], [_percentile_phrase(percentiles, method, s) for s in held],
                          [(percentiles[(method, s)], percentiles.get(("random", s))) for s in held], False, True),
            "n": size(records), "test": _NO_MARGIN, "p": float("nan"), "p_adj": float("nan"),
            "verdict": "descriptive", "study": study,
        })  # fmt: skip
    return claims


def pruning_claims(study: str, records: list[dict[str, Any]]) -> tuple[list[Claim], dict[str, Any]]:
    """A pruning study's rows of the claims table (the tested ones Holm-adjusted together) and its
    analysis (:func:`~mteb_lrd.studies.pruning_analysis.analyse_pruning` with the budget groups)."""
    analysis = analyse_pruning(records, n_resamples=2000)
    analysis["budget_groups"] = _budget_groups(records, analysis)
    found = _tested(records, analysis)
    adjusted: Any = holm([test["p"] for test in found]) if found else []
    claims = [{
        "claim": test["claim"], "paper": "Fig. 2 (no value published)", "ours": test["ours"], "n": size(records),
        "test": "exact sign flip over models (cells averaged within a model)", "p": test["p"], "p_adj": float(p_adj),
        "verdict": verdict(test["difference"] > 0, float(p_adj), 2.0 ** (1 - test["models"]), len(found),
                           count(test["models"], "model")),
        "study": study,
    } for test, p_adj in zip(found, adjusted, strict=True)]  # fmt: skip
    claims += _described(study, records, analysis)
    closest = _closest_median(analysis)
    if closest is not None:
        claims.append({"claim": "GFMI's median change is the guided rules' closest to zero at every budget",
                       "paper": "every budget (Fig. 2)", "ours": closest, "n": size(records), "test": "descriptive",
                       "p": float("nan"), "p_adj": float("nan"), "verdict": "descriptive", "study": study})  # fmt: skip
    return claims, analysis


def _closest_median(analysis: Mapping[str, Any]) -> str | None:
    """At how many distinct budgets (those removing the same blocks counted once) GFMI's median change
    is the closest to zero of the guided rules (ties count), with GFMI's and the closest other rule's
    medians at each, in words."""
    table = analysis["table"]
    rules = [m for m in RULES if m in table]
    if "gfmi" not in table or len(rules) < 2:
        return None
    groups, wins, shown = analysis["budget_groups"], 0, []
    for group in groups:
        median = {m: table[m][group[0]]["median"] for m in rules}
        other = min((m for m in rules if m != "gfmi"), key=lambda m: abs(median[m]))
        wins += abs(median["gfmi"]) <= abs(median[other])
        shown.append(
            f"at {_percents(group)} GFMI {median['gfmi']:+.4f}, the closest other rule {other} "
            f"{median[other]:+.4f}"
        )
    budgets = sum(map(len, groups))
    merged = (
        "" if budgets == len(groups) else f" (the {budgets} asked for make {len(groups)} distinct choices)"
    )
    return f"at {wins} of {len(groups)} budgets{merged}; median Δ {'; '.join(shown)}"


def _budget_sizes(records: list[dict[str, Any]]) -> dict[float, str]:
    """How many blocks each budget removed, over every choice of every cell (``"1"`` or ``"1–2"``)."""
    found: dict[float, set[int]] = {}
    for record in records:
        for choice in record.get("choices", ()):
            found.setdefault(float(choice["budget"]), set()).add(len(choice["blocks"]))
    return {b: _span(n) for b, n in found.items()}


def _span(values: set[int]) -> str:
    """``"3"`` for one value, ``"1–2"`` for a range."""
    return "–".join(dict.fromkeys(map(str, (min(values), max(values)))))


def _blocks(n: str) -> str:
    return f"{n} block" if n == "1" else f"{n} blocks"


def candidates_phrase(rows: Sequence[Mapping[str, Any]]) -> str:
    """Which candidate blocks a pruning study's rows chose among, in words (empty when not recorded)."""
    options = [json.loads(r["options"] or "{}") for r in rows]
    found = {int(o["protect"]) for o in options if o.get("protect") is not None}
    if not found:
        return ""
    return f" (those left after protecting {_span(found)} at each end)"


def _random_spread(analysis: Mapping[str, Any], groups: Sequence[Sequence[str]]) -> list[str]:
    """One line: Random's spread over its seeds at each budget column (each seed's mean Δ over the
    cells), so a rule's mean can be read against the draws, not only their average."""
    spreads = analysis.get("random_seeds") or {}
    parts = [
        f"{_percents(g)} {spread['min']:+.4f} to {spread['max']:+.4f} (sd {spread['std']:.4f})"
        for g in groups
        if (spread := spreads.get(g[0])) and spread.get("n_seeds")
    ]
    if not parts:
        return []
    seeds = max(int(spreads[g[0]]["n_seeds"]) for g in groups if g[0] in spreads)
    return [
        "",
        f"Random over its {seeds} seeds (each seed's mean change over the cells): {'; '.join(parts)}.",
    ]


def pruning_section(study: str, analysis: Mapping[str, Any], records: list[dict[str, Any]],
                    candidates: str) -> list[str]:  # fmt: skip
    """A pruning study's section: the mean change per budget and method, and the exhaustive reference."""
    table = analysis["table"]
    lines = [f"## Layer pruning (`{study}`)", "", f"{size(records)}. Mean score change per budget, the share of "
             f"the candidate blocks{candidates} removed, rounded up; budgets that remove the same blocks share a "
             "column (p: sign flip over models against Random at that budget):", ""]  # fmt: skip
    groups = analysis["budget_groups"]
    rows = [[m, *[f"{table[m][g[0]]['mean']:+.4f} (p {fmt_p(table[m][g[0]]['model_p_vs_random'])})" for g in groups]]
            for m in analysis["methods"]]  # fmt: skip
    sizes = _budget_sizes(records)
    lines += _table(
        ["method", *[f"{_percents(g)} ({_blocks(sizes.get(float(g[0]), '?'))})" for g in groups]], rows
    )
    lines += _random_spread(analysis, groups)
    summary = (analysis.get("exhaustive") or {}).get("summary") or []
    if summary:
        lines += ["", "Each method's choice among every candidate set of its size (mid-rank percentile; 50 = the "
                  "median set, 100 = better than every set):", ""]  # fmt: skip
        lines += exhaustive_summary_table(summary, per_model=False)
        lines += ["", *exhaustive_cells_table(analysis["exhaustive"]["cells"])]
    return [*lines, ""]
