"""``docs/results.md`` from the committed tidy records: the papers' claims, what the records say, and
how sure that is. Nothing in the document is written by hand; :func:`render_results` of the same
records gives the same text (a test compares it with the committed file)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from mteb_lrd.dysem.chunks import assemble, coverage
from mteb_lrd.dysem.study import read_chunks
from mteb_lrd.io import atomic_write_text
from mteb_lrd.metrics.permutation import below, holm, minimum_detectable_rho, minimum_sign_flip_units
from mteb_lrd.report.plots import save_png
from mteb_lrd.report.studies import (
    dysem_gain_figure,
    exhaustive_cells_table,
    exhaustive_summary_table,
    pruning_change_figure,
    selection_scatter,
)
from mteb_lrd.report.studies import markdown_table as _table
from mteb_lrd.studies.pruning_analysis import analyse_pruning, pooled_vs_random
from mteb_lrd.studies.selection_analysis import (
    ALPHA,
    STRONGEST_RIVALS,
    analyse_selection,
    model_level_tests,
    record_scores,
    records_reproduce,
    score_tables,
)
from mteb_lrd.studies.tidy import COLUMNS, read_rows, records_from_rows

__all__ = [
    "CLAIM_SCORES",
    "Claim",
    "build_results",
    "read_dysem",
    "read_studies",
    "render_results",
    "write_results",
]

CLAIM_SCORES: dict[str, str] = {
    "frenet_d0L": "Frenet: d0L correlates positively with MTEB performance",
    "nrs_mean_jaccard": "NRS: mean neighbour retention correlates positively with MTEB performance",
    "gfmi_mean_auc": "GFMI: mean GFMI AUC correlates positively with MTEB performance",
}
"""The selection claims (one score stands for each family) and how the table words them."""
DOCUMENTED_SCORES: tuple[str, ...] = (*CLAIM_SCORES, *STRONGEST_RIVALS, "rankme", "alpha_req")
"""The selection scores the document reports (the claims, d0L's rivals, and the two spectral baselines);
the tidy records hold every score, the exact tests over 9! orders cost about a second per score."""
Claim = dict[str, Any]
_KEPT = {"main_score", *DOCUMENTED_SCORES}


def read_studies(folder: str | Path) -> dict[str, list[dict[str, Any]]]:
    """Every tidy record file of ``folder`` (``*.csv`` with the tidy columns), rows by study name;
    other CSVs (e.g. an evaluator's training log) are left out.

    Raises:
        NotADirectoryError: when ``folder`` is not a folder.
    """
    if not Path(folder).is_dir():
        raise NotADirectoryError(f"no records folder {folder}")
    studies: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(Path(folder).glob("*.csv")):
        with path.open(encoding="utf-8") as fh:
            if tuple(fh.readline().strip().split(",")) != COLUMNS:
                continue
        for row in read_rows(path):
            studies.setdefault(str(row["study"]), []).append(row)
    return studies


def _verdict(direction_ok: bool, p_adjusted: float) -> str:
    if not math.isfinite(p_adjusted):
        return "undecided"
    if below(p_adjusted, ALPHA):
        return "replicated" if direction_ok else "contradicted"
    return "undecided"


def _size(records: Sequence[Mapping[str, Any]]) -> str:
    """``models × tasks × texts``: each task's distinct test texts (its MTEB score is over all its test pairs),
    and the caps the LRD scores sampled them to (Frenet / NRS / GFMI) when the records share them."""
    tasks = {r["task"] for r in records}
    texts = sorted({int(r.get("n_texts") or 0) for r in records})
    span = f"{texts[0]:,}" if len(texts) == 1 else f"{texts[0]:,}–{texts[-1]:,}"
    caps = {tuple((r.get("caps") or {}).get(k) for k in ("frenet", "nrs", "gfmi")) for r in records}
    cap = caps.pop() if len(caps) == 1 else ()
    capped = f" (LRD on ≤ {' / '.join(f'{c:,}' for c in cap)})" if cap and all(
        isinstance(c, int) and c > 0 for c in cap) else ""  # fmt: skip
    return f"{_count(len(_models(records)), 'model')} × {_count(len(tasks), 'task')} × {span} texts{capped}"


def _complete(records: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], dict[str, int]]:
    """The records of the models that have every task of the study (those the model-level tests
    use), and the others' task counts."""
    tasks = {r["task"] for r in records}
    held: dict[str, set[str]] = {}
    for r in records:
        held.setdefault(r["model"]["name"], set()).add(r["task"])
    partial = {model: len(have) for model, have in held.items() if have != tasks}
    return [r for r in records if r["model"]["name"] not in partial], partial


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _claim_tests(model_level: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The claim scores' model-level tests, each with its Holm-adjusted p (over the claim scores) and
    its verdict (the papers expect a positive correlation)."""
    tested = {name: model_level[name] for name in CLAIM_SCORES if name in model_level}
    adjusted = [float(p) for p in holm([t["p"] for t in tested.values()])] if tested else []
    return {name: {**t, "p_adj": p, "verdict": _verdict(t["median_rho"] > 0, p)}
            for (name, t), p in zip(tested.items(), adjusted, strict=True)}  # fmt: skip


def _selection_claims(study: str, records: list[dict[str, Any]]) -> tuple[list[Claim], dict[str, Any]]:
    analysis = analyse_selection(records)  # records already cut to DOCUMENTED_SCORES (build_results)
    size = _size(_complete(records)[0])
    claims = [{
        "claim": CLAIM_SCORES[name], "paper": "positive (no value published)",
        "ours": f"median ρ {t['median_rho']:+.2f} [{t['ci_low']:+.2f}, {t['ci_high']:+.2f}]",
        "n": size, "test": "joint permutation of models over tasks", "p": t["p"], "p_adj": t["p_adj"],
        "verdict": t["verdict"], "study": study,
    } for name, t in _claim_tests(analysis["model_level"]).items()]  # fmt: skip
    against = (analysis.get("strongest") or {}).get("against") or {}
    if against:
        worst = min(against, key=lambda k: against[k]["difference"])
        entry = against[worst]
        beaten = all(e["difference"] > 0 and below(e["p_holm"], ALPHA) for e in against.values())
        lost = any(e["difference"] < 0 and below(e["p_holm"], ALPHA) for e in against.values())
        claims.append({
            "claim": "d0L is the strongest LRD score", "paper": "d0L strongest (no value published)",
            "ours": f"smallest ρ(d0L) − ρ(rival): {entry['difference']:+.2f} ({worst})", "n": size,
            "test": "permutation: each model's two ranks swapped (studies.md)", "p": entry["p"], "p_adj": entry["p_holm"],
            "verdict": "replicated" if beaten else "contradicted" if lost else "undecided", "study": study,
        })  # fmt: skip
    return claims, analysis


PRUNING_CLAIMS: tuple[tuple[str, str, tuple[float, ...] | None, str], ...] = (
    ("gfmi", "GFMI beats Random by mean at {budgets}", (0.15, 0.2), "better"),
    ("frenet", "Frenet helps at the lightest budget ({budgets})", (0.05,), "better"),
    ("nrs", "NRS does not transfer (no gain over Random, all budgets)", None, "no gain"),
)
"""The paper's pruning claims tested: method, wording, budgets (``None``: pooled over budgets), direction.
Budgets of a claim that remove the same blocks are one test (one row); the others one row each."""
PRUNING_FAMILY = sum(len(budgets or (None,)) for _, _, budgets, _ in PRUNING_CLAIMS)
"""The most tested rows one pruning study's Holm family can have."""


def _budget_groups(records: Sequence[Mapping[str, Any]], analysis: Mapping[str, Any]) -> list[list[str]]:
    """The study's budgets (keys of ``analysis["table"]``), those at which every method made the same
    choices in every cell (the same blocks removed: one comparison) grouped, in budget order."""
    choices: dict[str, list[tuple[str, str, str, Any, list[int]]]] = {}
    for record in records:
        for c in record.get("choices", ()):
            key = f"{float(c['budget']):g}"
            choices.setdefault(key, []).append(
                (*_cell(record), c["method"], c.get("seed"), sorted(c["blocks"]))
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


def _percentile_phrase(percentiles: Mapping[tuple[str, str], float], method: str, size: str) -> str:
    """``"; percentile 32 among the sets of 2 blocks (Random 54)"`` from :func:`_percentiles`."""
    if (method, size) not in percentiles:
        return ""
    random = percentiles.get(("random", size))
    against = f" (Random {random:.0f})" if random is not None else ""
    return f"; percentile {percentiles[(method, size)]:.0f} among the sets of {_blocks(size)}{against}"


def _pruning_tests(records: list[dict[str, Any]], analysis: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One entry per distinct test of :data:`PRUNING_CLAIMS` the records allow: wording, method's mean
    Δ minus Random's, the sign-flip p over models, direction, and the percentile phrase."""
    table, sizes, percentiles = analysis["table"], _budget_sizes(records), _percentiles(analysis)
    tests: list[dict[str, Any]] = []
    for method, wording, budgets, direction in PRUNING_CLAIMS:
        if budgets is None:
            pooled = pooled_vs_random(records, [method]).get(method)
            if pooled is not None:
                tests.append({"claim": wording, "difference": pooled["difference"], "p": pooled["p"],
                              "direction": direction, "extra": " (all budgets)"})  # fmt: skip
            continue
        asked = {f"{b:g}" for b in budgets}
        for group in analysis["budget_groups"]:
            held = [
                b for b in group if b in asked and b in table.get(method, {}) and b in table.get("random", {})
            ]
            if not held:
                continue
            size = sizes.get(float(held[0]), "?")
            tests.append({
                "claim": wording.format(budgets=_percents(held)) + ("" if len(held) == 1 else f" ({_blocks(size)}: one test)"),
                "difference": table[method][held[0]]["mean"] - table["random"][held[0]]["mean"],
                "p": table[method][held[0]]["model_p_vs_random"], "direction": direction,
                "extra": _percentile_phrase(percentiles, method, size),
            })  # fmt: skip
    return tests


def _pruning_claims(study: str, records: list[dict[str, Any]]) -> tuple[list[Claim], dict[str, Any]]:
    analysis = analyse_pruning(records, n_resamples=2000)
    analysis["budget_groups"] = _budget_groups(records, analysis)
    found = _pruning_tests(records, analysis)
    adjusted: Any = holm([test["p"] for test in found]) if found else []
    claims = [{
        "claim": test["claim"],
        "paper": "Fig. 2 (no value published)" if test["direction"] == "better" else "no gain (Fig. 2)",
        "ours": f"mean Δ − Random {test['difference']:+.4f}{test['extra']}",
        "n": _size(records), "test": "exact sign flip over models (cells averaged within a model)",
        "p": test["p"], "p_adj": float(p_adj),
        "verdict": _verdict((test["difference"] > 0) == (test["direction"] == "better"), float(p_adj)),
        "study": study,
    } for test, p_adj in zip(found, adjusted, strict=True)]  # fmt: skip
    best = _best_median_budgets(analysis)
    if best is not None:
        claims.append({"claim": "GFMI has the best median change at every budget", "paper": "every budget",
                       "ours": best, "n": _size(records), "test": "descriptive",
                       "p": float("nan"), "p_adj": float("nan"), "verdict": "descriptive", "study": study})  # fmt: skip
    return claims, analysis


def _best_median_budgets(analysis: Mapping[str, Any]) -> str | None:
    """At how many distinct budgets (those removing the same blocks counted once) GFMI's median change
    is the highest of all methods (ties count), in words."""
    table = analysis["table"]
    if "gfmi" not in table:
        return None
    groups = analysis["budget_groups"]
    wins = sum(table["gfmi"][g[0]]["median"] >= max(table[m][g[0]]["median"] for m in table) for g in groups)
    budgets = sum(map(len, groups))
    merged = (
        "" if budgets == len(groups) else f" (the {budgets} asked for make {len(groups)} distinct choices)"
    )
    return f"at {wins} of {len(groups)} budgets{merged}"


def read_dysem(folder: str | Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The DySem study summaries of ``folder`` by name: ``dysem-*.json`` as ``mteb-lrd dysem`` writes
    them, and each ``dysem-*/`` folder of chunk summaries (``--rows``) that covers every pair, joined;
    and one line per chunk folder that is not reported (how far it is, or what is wrong).

    Raises:
        ValueError: a summary and a chunk folder of the same name (which one is the study's?).
    """
    found = {
        path.stem: json.loads(path.read_text(encoding="utf-8"))
        for path in sorted(Path(folder).glob("dysem-*.json"))
    }
    chunked = _dysem_chunk_folders(folder)
    both = sorted(set(found) & set(chunked))
    if both:
        raise ValueError(f"{folder}: {both[0]}.json and the chunk folder {both[0]}/ are two records of one "
                         "study; keep one")  # fmt: skip
    found.update({name: joined for name, joined in chunked.items() if isinstance(joined, dict)})
    pending = [f"- DySem (`{name}`): {state}." for name, state in chunked.items() if isinstance(state, str)]
    return found, pending


def _dysem_chunk_folders(folder: str | Path) -> dict[str, dict[str, Any] | str]:
    """Each ``dysem-*/`` folder's joined chunks, or why they cannot be joined yet (a line)."""
    out: dict[str, dict[str, Any] | str] = {}
    for path in sorted(p for p in Path(folder).glob("dysem-*") if p.is_dir()):
        try:
            chunks = read_chunks([path])
            covered = coverage(chunks)
            if any(done < total for done, total in covered.values()):
                parts = ", ".join(
                    f"{task} {done:,} of {total:,} test pairs" for task, (done, total) in covered.items()
                )
                out[path.name] = f"running in chunks, so far {parts}; reported once every pair is in"
            else:
                out[path.name] = assemble(chunks)
        except (ValueError, KeyError, OSError) as error:
            out[path.name] = f"its chunks do not join ({error}); not reported"
    return out


#: The paper's gains of DySem (EP) over a baseline (by its method label in a summary), as Δρ: its 7-task
#: means on Llama-2-7B, Llama-3.1-8B, Qwen2.5-7B and Qwen3-8B-Base (the dense attention sum is its AlignedWVA).
_DYSEM_PAPER = {"PromptEOL": "Δρ +0.044 to +0.107 (7-task means, four 7–8B LLMs)",
                "attention sum (dense)": "Δρ +0.007 to +0.049 over AlignedWVA (7-task means, four 7–8B LLMs)"}  # fmt: skip


def _dysem_claims(stem: str, summary: Mapping[str, Any]) -> list[Claim]:
    """DySem against each baseline per task: the paired bootstrap over pairs (one model: pairs are the unit)."""
    paired = summary["paired"]
    found = [(task, other, e) for task, per in paired["tasks"].items() for other, e in per.items()]
    adjusted: Any = holm([e["p"] for _, _, e in found]) if found else []
    model = Path(str(summary["model"])).name
    return [{
        "claim": f"DySem beats {other} ({model}, {task})", "paper": _DYSEM_PAPER.get(other, "ahead (no value published)"),
        "ours": f"Δρ {e['delta']:+.4f} [{e['ci_low']:+.4f}, {e['ci_high']:+.4f}]",
        "n": f"1 model × {e['n']:,} pairs", "test": f"paired bootstrap over pairs ({e['n_resamples']:,})",
        "p": e["p"], "p_adj": float(p_adj), "verdict": _verdict(e["delta"] > 0, float(p_adj)), "study": stem,
    } for (task, other, e), p_adj in zip(found, adjusted, strict=True)]  # fmt: skip


def _dev_phrase(summary: Mapping[str, Any]) -> str:
    """Where DySem's k, L and value vector came from, when the STS Benchmark dev split chose them
    (``--select-on-dev``; a label-based language order alone also uses dev labels, but chooses none of them)."""
    chosen = summary.get("dev", {}).get("select_on_dev")
    return f", k, L and value chosen on {summary['dev_pairs']:,} STS Benchmark dev pairs" if chosen else ""


def _dysem_section(stem: str, summary: Mapping[str, Any]) -> list[str]:
    table = summary["table"]
    tasks = list(summary["tasks"])
    lines = [f"## DySem (`{stem}`)", "",
             f"Model {Path(str(summary['model'])).name}" + (f" ({summary['dtype']})" if summary.get("dtype") else "")
             + _dev_phrase(summary) + "; " + "; ".join(
                 f"{t}: {v['pairs']:,} test pairs" + ("" if v["translations"] else " (no translations)")
                 for t, v in summary["tasks"].items()) + f"; language order {', '.join(summary['language_order'])}.",
             ""]  # fmt: skip
    lines += _table(["method", *tasks], [[label, *[per.get(t, {}).get("spearman") for t in tasks]]
                                         for label, per in table.items()])  # fmt: skip
    return [*lines, "", "Spearman ρ × 100 of each method's own similarity with the gold scores.", ""]


def _fmt_p(value: float) -> str:
    return "–" if not math.isfinite(value) else f"{value:.3f}" if value >= 0.001 else f"{value:.1e}"


def _claims_table(claims: Sequence[Claim]) -> list[str]:
    rows = [[c["claim"], c["paper"], c["ours"], c["n"], c["test"], f"{_fmt_p(c['p'])} / {_fmt_p(c['p_adj'])}",
             f"**{c['verdict']}**", c["study"]] for c in claims]  # fmt: skip
    return _table(["the paper's claim", "the paper's figure", "ours", "n", "test", "p (raw / Holm)", "verdict",
                   "records"], rows)  # fmt: skip


_FIRST_LAST = "nrs_jaccard_first_last"


def _selection_figures(study: str, analysis: Mapping[str, Any]) -> dict[str, Figure]:
    """One scatter per claim score (score against the main score, a panel per task)."""
    figures = {
        f"figures/results-{study}-{name}.png": selection_scatter(analysis, name) for name in CLAIM_SCORES
    }
    return {path: fig for path, fig in figures.items() if fig is not None}


def _selection_section(study: str, analysis: Mapping[str, Any], records: list[dict[str, Any]]) -> list[str]:
    tested = analysis["model_level"]
    complete, partial = _complete(records)
    tasks = len({r["task"] for r in records})
    pending = "".join(
        f"; {m} has {n} of {tasks} tasks so far (not in the tests)" for m, n in sorted(partial.items())
    )
    lines = [f"## Label-free model selection (`{study}`)", "",
             f"{_size(complete)}; models: {', '.join(sorted({r['model']['name'] for r in complete}))}{pending}.",
             ""]  # fmt: skip
    rows = [[name, t["median_rho"], t["ci_low"], t["ci_high"], t["p"], t["p_holm"], t["n_models"], t["n_tasks"]]
            for name, t in sorted(tested.items(), key=lambda kv: -kv[1]["median_rho"])]  # fmt: skip
    if not rows:
        return [*lines, "Too few models with every task for a test yet.", ""]
    lines += _table(["score", "median ρ", "95% CI low", "95% CI high", "p", "p (Holm, all scores)", "models",
                     "tasks"], rows)  # fmt: skip
    embedders = [r for r in records if r["model"].get("kind") == "sentence-transformer"]
    within_table = len({r["model"]["name"] for r in embedders}) >= 4
    if within_table:
        scores, main, _ = score_tables(embedders, records_reproduce(embedders))
        within = _claim_tests(model_level_tests(scores, main))
        lines += ["", "Within the trained embedders only (no raw language model in the ranking):", ""]
        lines += _table(["score", "median ρ", "95% CI low", "95% CI high", "p", "p (Holm, these three)", "models",
                         "tasks"],
                        [[n, t["median_rho"], t["ci_low"], t["ci_high"], t["p"], t["p_adj"], t["n_models"], t["n_tasks"]]
                         for n, t in within.items()])  # fmt: skip
    return [*lines, "", *_tied_embedding_output(complete, within_table)]


def _tied_embedding_output(records: Sequence[Mapping[str, Any]], within_table: bool) -> list[str]:
    """Why the decoders' d0L is not theirs: a template makes their last token, hence ``h_0``, one for all texts."""
    tied = sorted({r["model"]["name"] for r in records if r["model"].get("kind") == "decoder"
                   and r["model"].get("template")})  # fmt: skip
    if not tied:
        return []

    def first_last(names: Callable[[str], bool]) -> str:
        values = [r["scores"][_FIRST_LAST] for r in records
                  if names(r["model"]["name"]) and _FIRST_LAST in r["scores"]]  # fmt: skip
        return f"{min(values):.3f}–{max(values):.3f}" if values else "–"

    names = " and ".join([", ".join(tied[:-1]), tied[-1]] if len(tied) > 1 else tied)
    return [f"**h_0 of the decoders.** {names} are pooled at their last token, which the text "
            "template makes the same token for every text: their h_0 (the embedding output) is one vector (a run "
            "warns of it), so its principal subspace and neighbours are not determined by the texts. Their d0L, "
            f"{_FIRST_LAST} and GFMI at h_0 are therefore not properties of the model: their {_FIRST_LAST} is "
            f"{first_last(lambda m: m in tied)} against {first_last(lambda m: m not in tied)} for the other "
            "models. The rows above score them as the paper's definitions do, so the mixed panel's correlations of "
            "these scores, and the comparison of d0L with its rivals, rest partly on those ties; within the trained "
            f"embedders ({'the table above' if within_table else 'their own table, once 4 of them have every task'}) "
            "d0L is defined for every model.", ""]  # fmt: skip


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


def _blocks(count: str) -> str:
    return f"{count} block" if count == "1" else f"{count} blocks"


def _candidates_phrase(rows: Sequence[Mapping[str, Any]]) -> str:
    """Which candidate blocks a pruning study's rows chose among, in words (empty when not recorded)."""
    options = [json.loads(r["options"] or "{}") for r in rows]
    found = {int(o["protect"]) for o in options if o.get("protect") is not None}
    if not found:
        return ""
    return f" (those left after protecting {_span(found)} at each end)"


def _pruning_section(study: str, analysis: Mapping[str, Any], records: list[dict[str, Any]],
                     candidates: str) -> list[str]:  # fmt: skip
    table = analysis["table"]
    lines = [f"## Layer pruning (`{study}`)", "", f"{_size(records)}. Mean score change per budget, the share of "
             f"the candidate blocks{candidates} removed, rounded up; budgets that remove the same blocks share a "
             "column (p: sign flip over models against Random at that budget):", ""]  # fmt: skip
    groups = analysis["budget_groups"]
    rows = [[m, *[f"{table[m][g[0]]['mean']:+.4f} (p {_fmt_p(table[m][g[0]]['model_p_vs_random'])})" for g in groups]]
            for m in analysis["methods"]]  # fmt: skip
    sizes = _budget_sizes(records)
    lines += _table(
        ["method", *[f"{_percents(g)} ({_blocks(sizes.get(float(g[0]), '?'))})" for g in groups]], rows
    )
    summary = (analysis.get("exhaustive") or {}).get("summary") or []
    if summary:
        lines += ["", "Each method's choice among every candidate set of its size (mid-rank percentile; 50 = the "
                  "median set, 100 = better than every set):", ""]  # fmt: skip
        lines += exhaustive_summary_table(summary, per_model=False)
        lines += ["", *exhaustive_cells_table(analysis["exhaustive"]["cells"])]
    return [*lines, ""]


def render_results(folder: str | Path) -> str:
    """The results document computed from the tidy records in ``folder`` (named as given)."""
    return build_results(folder)[0]


def _bound(rho: float) -> str:
    """A smallest decisive |ρ|, or ``"none"`` where even |ρ| = 1 does not reach the level."""
    return "none" if math.isnan(rho) else f"{rho:.2f}"


def _decidable(panels: Sequence[int]) -> list[str]:
    """What panels of these sizes (the selection studies' complete models; 9 and 5 beside them) can
    decide, from the exact tests' smallest p-values, before and after Holm."""
    sizes = sorted({*panels, 9, 5}, reverse=True)
    single = ", ".join(f"{_bound(minimum_detectable_rho(n, ALPHA))} with {n} models" for n in sizes)
    holm3 = ", ".join(f"{_bound(minimum_detectable_rho(n, ALPHA / 3))} with {n}" for n in sizes)
    family = PRUNING_FAMILY
    return [
        f"**What a panel can decide**: one task's exact permutation test reaches p < {ALPHA} only for |ρ| of at "
        f"least {single}; Holm over the three claim scores asks the best of them for p < {ALPHA}/3, i.e. |ρ| of "
        f"at least {holm3}{' (none: not even |ρ| = 1 reaches it)' if 'none' in holm3 else ''}. The claims are tested on the median ρ over tasks by a joint permutation, which can "
        "go somewhat below these bounds when the tasks agree; still, on panels this small a claim whose "
        "correlation is moderate stays undecided whatever the data. The exact sign flip over models behind "
        f"the pruning rows (its smallest p over m models is 2 / 2^m) reaches p < {ALPHA} from "
        f"{minimum_sign_flip_units(ALPHA)} models, and Holm's {ALPHA}/{family} for the best of a pruning "
        f"study's (up to) {family} tested claims from {minimum_sign_flip_units(ALPHA / family)}: on fewer, "
        "the pruning claims are undecided by design, and each rule's percentile among every candidate set of "
        "its size is what the records show."
    ]


def _models(records: Sequence[Mapping[str, Any]]) -> set[str]:
    return {r["model"]["name"] for r in records}


def build_results(folder: str | Path) -> tuple[str, dict[str, Figure]]:
    """The results document and its figures (paths relative to the document) from ``folder``'s records."""
    studies = read_studies(folder)
    claims: list[Claim] = []
    sections: list[str] = []
    figures: dict[str, Figure] = {}
    authors: dict[str, list[dict[str, Any]]] = {}
    selection: dict[str, list[dict[str, Any]]] = {}
    for study, rows in studies.items():
        records = records_from_rows(r for r in rows if r["row"] != "score" or r["score"] in _KEPT)
        if not any("choices" in r for r in records) and records_reproduce(records) == "authors":
            authors[study] = records  # compared with ours below, not a test of the papers' claims
            continue
        if any("choices" in r for r in records):
            found, analysis = _pruning_claims(study, records)
            sections += _pruning_section(study, analysis, records, _candidates_phrase(rows))
            path = f"figures/results-{study}-pruning.png"
            sections += [f"![mean score change per budget]({path})", ""]
            figures[path] = pruning_change_figure(analysis)
        else:
            selection[study] = records
            found, analysis = _selection_claims(study, records)
            sections += _selection_section(study, analysis, records)
            drawn = _selection_figures(study, analysis)
            sections += [f"![{Path(path).stem}]({path})" for path in drawn] + ([""] if drawn else [])
            figures.update(drawn)
        claims += found
    dysem, dysem_pending = read_dysem(folder)
    for stem, summary in dysem.items():
        claims += _dysem_claims(stem, summary)
        sections += _dysem_section(stem, summary)
        figure = dysem_gain_figure(summary["paired"])
        if figure is not None:
            path = f"figures/results-{stem}.png"
            sections += [f"![DySem against its baselines]({path})", ""]
            figures[path] = figure
    lines = [
        "# What the records say about the papers' claims", "",
        f"Generated by `mteb-lrd report --records {Path(folder).as_posix()} --out docs/` from the tidy study records in "
        "that folder (one CSV per study; `tests/test_results_document.py` fails when this file differs from what "
        "they give). Every figure of ours is computed from the records; the papers' claims and figures are quoted.", "",
        f"**Verdict rule** (significance level α = {ALPHA}, used throughout): *replicated* when our estimate has "
        "the paper's direction and its Holm-adjusted p is below α; *contradicted* when it has the opposite "
        "direction and its adjusted p is below α; *undecided* otherwise. Holm runs over the rows of one family "
        "(one selection study's three claim scores; the rivals of d0L; one pruning study's claims; one DySem run's "
        "comparisons); a selection section's table of every score it documents adjusts over those scores, and the "
        "authors' definitions are a family of their own (the verdicts in the first table rest on ours). n is models × tasks × each task's distinct test texts (the LRD scores are computed on "
        "texts; the task's MTEB score is over all of its test pairs), with the caps the LRD scores sampled them to (Frenet / NRS / GFMI). A claim that something does *not* help is replicated when it is significantly worse, contradicted when significantly better; rows marked *descriptive* have no test. Tests across models take the "
        "model as the unit (cells of one model are never counted as independent); a DySem run compares "
        "methods within one model, over its test pairs.", "",
        *_decidable(sorted({len(_models(_complete(r)[0])) for r in selection.values()} - {0})), "",
    ]  # fmt: skip
    lines += (
        _claims_table(claims)
        if claims
        else [
            "No claim is testable from these records yet: a test needs at least 4 models that have every task."
        ]
    )
    lines += ["", *sections]
    lines += ["## Not covered by these records", "",
              *([] if dysem or dysem_pending else
                ["- DySem (`mteb-lrd dysem`): no complete records yet; its comparison is not reported here."]),
              *dysem_pending,
              "- Layer dynamics during training: one worked example with its record, in [training.md](training.md).",
              "- The paper's panel (31 models × 30 MTEB tasks) and its base-LLM MMLU panel: their weights do not "
              "install offline; our panel is the nine models that do (docs/studies.md), on the seven shared STS "
              "sets (our STS12 lacks the MSRvid part: 2,358 of MTEB's 3,108 pairs).",
              ""]  # fmt: skip
    lines += ["## Where we differ from the papers' code", "",
              "Our defaults differ from the released code where it is wrong or worse (the list, with each "
              "difference's measured effect on single models, is in [method.md](method.md)); `--reproduce "
              "authors` runs the authors' behaviour.", ""]  # fmt: skip
    lines += _mode_comparisons(selection, authors)
    return "\n".join(lines), figures


def _comparison_cell(test: Mapping[str, Any]) -> str:
    return f"{test['median_rho']:+.2f} (p {_fmt_p(test['p'])} / {_fmt_p(test['p_adj'])}, {test['verdict']})"


def _mode_comparisons(
    ours: Mapping[str, list[dict[str, Any]]], authors: Mapping[str, list[dict[str, Any]]]
) -> list[str]:
    """Per ``--reproduce authors`` selection study, each claim score's model-level test under both
    definitions, on the (model, task) cells both studies hold."""
    if not authors:
        return ["No `--reproduce authors` records are committed yet: the switch's effect on a study is not "
                "reported here.", ""]  # fmt: skip
    lines: list[str] = []
    for study, theirs in authors.items():
        paired = _paired_records(theirs, ours)
        if paired is None:
            lines += [
                f"`{study}` (the authors' definitions) has no study of ours on the same cells beside it.",
                "",
            ]
        else:
            lines += _mode_comparison(paired[0], study, paired[1])
    return lines


def _cell(record: Mapping[str, Any]) -> tuple[str, str]:
    """A record's (model, task)."""
    return record["model"]["name"], record["task"]


def _cells(records: Sequence[Mapping[str, Any]]) -> set[tuple[str, str]]:
    return {_cell(r) for r in records}


def _paired_records(
    theirs: Sequence[Mapping[str, Any]], ours: Mapping[str, Sequence[Mapping[str, Any]]]
) -> tuple[str, tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]]] | None:
    """Our study sharing the most (model, task) cells with ``theirs``, and both studies' complete records on
    the cells they share (ours first); ``None`` when no study of ours shares a cell."""
    if not ours:
        return None
    wanted = _cells(theirs)
    name, records = max(ours.items(), key=lambda kv: len(wanted & _cells(kv[1])))
    common = wanted & _cells(_complete(records)[0])
    if not common:
        return None
    ours_c, theirs_c = (_complete([r for r in rs if _cell(r) in common])[0]
                        for rs in (records, theirs))  # fmt: skip
    return name, (ours_c, theirs_c)


def _equal_cells(ours: Sequence[Mapping[str, Any]], theirs: Sequence[Mapping[str, Any]]) -> int:
    """How many of ``theirs``' cells give every claim score the same value under both definitions."""
    mine = {_cell(r): record_scores(r, "ours") for r in ours}
    return sum(all(math.isclose(mine[cell].get(k, math.nan), record_scores(r, "authors").get(k, math.nan),
                                rel_tol=0, abs_tol=1e-12) for k in CLAIM_SCORES)
               for r in theirs if (cell := _cell(r)) in mine)  # fmt: skip


def _mode_comparison(
    ours_name: str, study: str, both: tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]]
) -> list[str]:
    """The claim scores' tests under our definitions (``ours_name``) beside the authors' (``study``)."""
    counts = [len({r["model"]["name"] for r in records}) for records in both]
    if min(counts) < 4:
        return [f"`{study}` (the authors' definitions) beside `{ours_name}`: models with every task in both "
                f"so far: {min(counts)}; a comparison needs 4.", ""]  # fmt: skip
    ours_v, theirs_v = (_claim_tests(analyse_selection(records)["model_level"]) for records in both)
    rows = [[score, *[_comparison_cell(tests[score]) if score in tests else "–" for tests in (ours_v, theirs_v)]]
            for score in CLAIM_SCORES]  # fmt: skip
    changed = [f"{score} ({ours_v[score]['verdict']} under ours, {theirs_v[score]['verdict']} under the "
               "authors')" for score in CLAIM_SCORES if score in ours_v and score in theirs_v
               and ours_v[score]["verdict"] != theirs_v[score]["verdict"]]  # fmt: skip
    lines = [f"`{study}` (the authors' definitions) beside `{ours_name}` (ours), on the "
             f"{_size(both[1])} both hold ({', '.join(sorted(_models(both[1])))}; ours is re-tested on these "
             "alone, so its values can differ from the first table's): median ρ over tasks, exact joint-permutation p (raw / Holm over "
             "the three scores) and the verdict by the rule above. The three "
             f"claim scores are equal under both in {_equal_cells(*both)} of {len(both[1])} cells (the switch "
             "changes a decoder's last-token rule and pooling, drops a model's LRD prompt and redefines the "
             "Frenet summaries other than d0L).", ""]  # fmt: skip
    lines += _table(["score", f"ours ({ours_name})", f"authors' ({study})"], rows)
    lines += ["", f"Verdicts that the definitions change: {'; '.join(changed) if changed else 'none'}.", ""]
    return lines


def write_results(folder: str | Path, out_dir: str | Path) -> Path:
    """Write ``<out_dir>/results.md`` and its figures (:func:`build_results`), atomically; returns its path."""
    text, figures = build_results(folder)
    for path, figure in figures.items():
        save_png(figure, Path(out_dir) / path)
    return atomic_write_text(Path(out_dir) / "results.md", text)
