"""The results document's model-selection part: the paper's selection claims as rows of the claims
table (each with its size controls), d0L against its rivals, and a selection study's section."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from mteb_lrd.metrics.permutation import MONTE_CARLO_RESAMPLES, holm, unit_centred_ranks
from mteb_lrd.report.results_claims import CHECKPOINTS, Claim, complete, count, models_of, size, verdict
from mteb_lrd.report.studies import markdown_table as _table
from mteb_lrd.report.studies import selection_scatter
from mteb_lrd.studies.selection_analysis import (
    STRONGEST_RIVALS,
    analyse_selection,
    model_level_tests,
    records_reproduce,
    score_tables,
)
from mteb_lrd.studies.tasks import CLASSIFICATION_TASKS
from mteb_lrd.tasks.shared_tasks import SHARED_STS

__all__ = [
    "CLAIM_SCORES",
    "DOCUMENTED_SCORES",
    "claim_tests",
    "selection_claims",
    "selection_figures",
    "selection_section",
]

CLAIM_SCORES: dict[str, str] = {
    "frenet_d0L": "Frenet: d0L",
    "nrs_mean_jaccard": "NRS: mean neighbour retention",
    "gfmi_mean_auc": "GFMI: mean GFMI AUC",
}
"""The selection claims (one score stands for each family) and how the table names their score."""
DOCUMENTED_SCORES: tuple[str, ...] = (*CLAIM_SCORES, *STRONGEST_RIVALS, "rankme", "alpha_req")
"""The selection scores the document reports (the claims, d0L's rivals, and the two spectral baselines);
the tidy records hold every score, the exact tests over 9! orders cost about a second per score."""
_CONTROLS = {
    "log_dim": ("log dim", "dim", "hidden size"),
    "log_params": ("log params", "params", "parameters"),
}
"""The size controls shown per claim: the analysis' control, its short name, the model field, in words."""
_FIRST_LAST = "nrs_jaccard_first_last"


def _scope(records: Sequence[Mapping[str, Any]]) -> str:
    """What the main scores measure: ``"STS"`` when every task is a shared STS set, ``"classification"``
    when every one is a study classification task, else ``"task"``."""
    if all(r["task"] in SHARED_STS for r in records):
        return "STS"
    return "classification" if all(r["task"] in CLASSIFICATION_TASKS for r in records) else "task"


def _floor(test: Mapping[str, Any]) -> float:
    """The smallest p a joint permutation over these models can give: one order of all, or one draw."""
    return 1 / math.factorial(int(test["n_models"])) if test["exact"] else 1 / (MONTE_CARLO_RESAMPLES + 1)


def claim_tests(model_level: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The claim scores' model-level tests, each with its Holm-adjusted p (over the claim scores) and
    its verdict (the papers expect a positive correlation)."""
    tested = {name: model_level[name] for name in CLAIM_SCORES if name in model_level}
    adjusted = [float(p) for p in holm([t["p"] for t in tested.values()])] if tested else []
    return {name: {**t, "p_adj": p, "verdict": verdict(t["median_rho"] > 0, p, _floor(t), len(tested),
                                                          count(int(t["n_models"]), "model"))}
            for (name, t), p in zip(tested.items(), adjusted, strict=True)}  # fmt: skip


def _signed(value: Any) -> str:
    return f"{value:+.2f}" if value is not None and math.isfinite(value) else "undefined"


def _partial(analysis: Mapping[str, Any], control: str, name: str) -> Mapping[str, Any]:
    """The over-task summary of ``name``'s partial correlation given ``control`` (empty when undefined)."""
    found = (analysis.get("partial") or {}).get(control, {}).get(name) or {}
    return found if found.get("n_tasks") else {}


def _controls_phrase(analysis: Mapping[str, Any], name: str) -> str:
    """``"partial ρ given log dim +0.12, given log params +0.69"``: the median partial correlation over tasks."""
    given = [f"given {short} {_signed(_partial(analysis, control, name).get('median_rho'))}"
             for control, (short, _, _) in _CONTROLS.items()]  # fmt: skip
    return "partial ρ " + ", ".join(given)


def selection_claims(study: str, records: list[dict[str, Any]]) -> tuple[list[Claim], dict[str, Any]]:
    """A selection study's rows of the claims table (the claim scores, then d0L against its rivals)
    and its analysis; ``records`` already cut to :data:`DOCUMENTED_SCORES`."""
    analysis = analyse_selection(records)
    units, scope = size(complete(records)[0]), _scope(records)
    claims = [{
        "claim": f"{CLAIM_SCORES[name]} correlates positively with {scope} performance (the paper: MTEB performance)",
        "paper": "positive (no value published)",
        "ours": f"median ρ {t['median_rho']:+.2f} [{t['ci_low']:+.2f}, {t['ci_high']:+.2f}]; "
                f"{_controls_phrase(analysis, name)}",
        "n": units, "test": "joint permutation of models over tasks", "p": t["p"], "p_adj": t["p_adj"],
        "verdict": t["verdict"], "study": study,
    } for name, t in claim_tests(analysis["model_level"]).items()]  # fmt: skip
    against = (analysis.get("strongest") or {}).get("against") or {}
    if against:
        claims.append(_strongest_claim(study, against, units))
    return claims, analysis


def _strongest_claim(study: str, against: Mapping[str, Mapping[str, Any]], units: str) -> Claim:
    """The row of "d0L is the strongest LRD score": its weakest comparison with a rival, whose statistic is
    the mean over tasks of the difference of the two correlations."""
    worst = min(against, key=lambda k: against[k]["difference"])
    entry = against[worst]
    verdicts = [verdict(e["difference"] > 0, e["p_holm"], 2.0 ** (1 - int(e["n_models"])), len(against),
                        count(int(e["n_models"]), "model")) for e in against.values()]  # fmt: skip
    outcome = next((v for v in verdicts if v.startswith("not testable")), None) or (
        "replicated" if all(v == "replicated" for v in verdicts)
        else "contradicted" if "contradicted" in verdicts else "undecided")  # fmt: skip
    return {
        "claim": "d0L is the strongest LRD score", "paper": "d0L strongest (no value published)",
        "ours": f"mean over tasks of ρ(d0L) − ρ(rival), the smallest: {entry['difference']:+.2f} ({worst})",
        "n": units, "test": "permutation: each model's two ranks swapped (studies.md)", "p": entry["p"],
        "p_adj": entry["p_holm"], "verdict": outcome, "study": study,
    }  # fmt: skip


def selection_figures(study: str, analysis: Mapping[str, Any]) -> dict[str, Figure]:
    """One scatter per claim score (score against the main score, a panel per task)."""
    figures = {
        f"figures/results-{study}-{name}.png": selection_scatter(analysis, name) for name in CLAIM_SCORES
    }
    return {path: fig for path, fig in figures.items() if fig is not None}


def _rho_span(analysis: Mapping[str, Any], name: str, field: str) -> str:
    """``"+0.95 to +0.98"``: the per-task Spearman ρ of score ``name`` with the models' ``field`` (a dash
    where no task has both varying)."""
    found = []
    for per_model in analysis["scores"].values():
        models = sorted(m for m, values in per_model.items() if math.isfinite(values.get(name, math.nan)))
        x = np.array(
            [[per_model[m][name] for m in models], [float(analysis["models"][m][field]) for m in models]]
        )
        if len(models) >= 3 and np.all(np.ptp(x, axis=1) > 0):
            ranks = unit_centred_ranks(x)
            found.append(float(ranks[0] @ ranks[1]))
    return "–" if not found else f"{min(found):+.2f} to {max(found):+.2f}"


def _survival(test: Mapping[str, Any], kept: Sequence[str]) -> str:
    """What of a claim survives the size controls (``kept``: those its median partial ρ stays positive under)."""
    if test["verdict"] != "replicated":
        return f"{test['verdict']} before the controls: nothing to survive"
    return f"replicated; its positive sign survives {' and '.join(kept) if kept else 'neither control'}"


def _size_controls(analysis: Mapping[str, Any]) -> list[str]:
    """Per claim score: its correlation with hidden size and parameter count, its partial correlation
    given the log of each (median over tasks, positive tasks), and what of the claim survives them."""
    lines = ["**Size controls** (descriptive: per task, the ranks of the score and of the main score "
             "residualised on the control's ranks, then correlated; the median over tasks; no test with the "
             "model as the unit). A replicated claim survives a control when its median partial correlation "
             "keeps the positive sign; an undecided or contradicted one has nothing to survive:", ""]  # fmt: skip
    for name, test in claim_tests(analysis["model_level"]).items():
        spans = ", ".join(
            f"{words} {_rho_span(analysis, name, field)}" for _, field, words in _CONTROLS.values()
        )
        parts, kept = [], []
        for control, (short, _, _) in _CONTROLS.items():
            summary = _partial(analysis, control, name)
            parts.append(f"given {short} {_signed(summary.get('median_rho'))}"
                         + (f" (positive in {summary['n_positive']} of {summary['n_tasks']} tasks)"
                            if summary else ""))  # fmt: skip
            kept += [short] if summary.get("median_rho", 0.0) > 0 else []
        lines.append(f"- {name} (median ρ {test['median_rho']:+.2f}, {_survival(test, kept)}): ρ per task with "
                     f"{spans}; partial ρ {', '.join(parts)}.")  # fmt: skip
    return [*lines, ""]


def _reference_note(rows: Sequence[Sequence[Any]], tests: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """A sentence where a size reference row (``_reference_rows``) predicts the main score at least as well
    as every claim score of the same table (``tests``)."""
    if not rows or not tests:
        return []
    best = max(tests, key=lambda k: tests[k]["median_rho"])
    ahead = [row for row in rows if row[1] >= tests[best]["median_rho"]]
    return [f"Here {row[0].removesuffix(' (reference)')} alone predicts the score at least as well as every claim "
            f"score (median ρ {row[1]:+.3f}; the best claim score, {best}, {tests[best]['median_rho']:+.3f})."
            for row in ahead[:1]]  # fmt: skip


def _reference_rows(records: Sequence[Mapping[str, Any]], reproduce: str) -> list[list[Any]]:
    """Hidden size and parameter count as predictors of the main score, tested as the scores are (rows
    of a selection table; outside its Holm family, a dash there)."""
    scores, main, models = score_tables(records, reproduce)
    sizes = {task: {m: {f"{words} (reference)": float(models[m][field]) for _, field, words in _CONTROLS.values()}
                    for m in per} for task, per in scores.items()}  # fmt: skip
    tested = model_level_tests(sizes, main)
    return [[name, t["median_rho"], t["ci_low"], t["ci_high"], t["p"], None, t["n_models"], t["n_tasks"]]
            for name, t in sorted(tested.items(), key=lambda kv: -kv[1]["median_rho"])]  # fmt: skip


_HEADER = ("score", "median ρ", "95% CI low", "95% CI high", "p", "p (Holm, {})", "models", "tasks")


def _scores_table(family: str, rows: list[list[Any]], records: Sequence[Mapping[str, Any]],
                  tests: Mapping[str, Mapping[str, Any]]) -> list[str]:  # fmt: skip
    """A table of scores' model-level tests (``rows``, Holm over ``family``) with the size references
    of ``records`` below them, and the sentence where a reference does as well as every claim score."""
    references = _reference_rows(records, records_reproduce(records))
    claims = {name: t for name, t in tests.items() if name in CLAIM_SCORES}
    note = _reference_note(references, claims)
    return [*_table([h.format(family) for h in _HEADER], rows + references), *([""] if note else []), *note]


def _row(name: str, test: Mapping[str, Any], p_adjusted: str) -> list[Any]:
    return [name, test["median_rho"], test["ci_low"], test["ci_high"], test["p"], test[p_adjusted],
            test["n_models"], test["n_tasks"]]  # fmt: skip


def selection_section(study: str, analysis: Mapping[str, Any], records: list[dict[str, Any]]) -> list[str]:
    """A selection study's section: every documented score's test, the size controls, the trained
    embedders alone, and what the decoders' tied embedding output does to their scores."""
    done, partial = complete(records)
    tasks = len({r["task"] for r in records})
    pending = "".join(
        f"; {m} has {n} of {tasks} tasks so far (not in the tests)" for m, n in sorted(partial.items())
    )
    lines = [f"## Label-free model selection (`{study}`)", "",
             f"Each model's {_scope(records)} performance (its MTEB main score on each task) against its label-free "
             f"scores: {size(done)}; models: {', '.join(sorted(models_of(done)))}{pending}.", ""]  # fmt: skip
    tested = analysis["model_level"]
    if not tested:
        return [*lines, "Too few models with every task for a test yet.", ""]
    ordered = sorted(tested.items(), key=lambda kv: -kv[1]["median_rho"])
    lines += _scores_table("all scores", [_row(n, t, "p_holm") for n, t in ordered], done, tested)
    lines += ["", *_size_controls(analysis)]
    embedders = [r for r in done if r["model"].get("kind") == "sentence-transformer"]
    within_table = len(models_of(embedders)) >= 4
    if within_table:
        scores, main, _ = score_tables(embedders, records_reproduce(embedders))
        within = claim_tests(model_level_tests(scores, main))
        lines += ["Within the trained embedders only (no decoder in the ranking):", ""]
        lines += [
            *_scores_table(
                "these three", [_row(n, t, "p_adj") for n, t in within.items()], embedders, within
            ),
            "",
        ]
    return [*lines, *_tied_embedding_output(done, within_table)]


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

    named = [f"{m} ({CHECKPOINTS[m]})" if m in CHECKPOINTS else m for m in tied]
    names = " and ".join([", ".join(named[:-1]), named[-1]] if len(named) > 1 else named)
    return [f"**h_0 of the decoders.** {names} are pooled at their last token, which the text "
            "template makes the same token for every text: their h_0 (the embedding output) is one vector (a run "
            "warns of it), so its principal subspace and neighbours are not determined by the texts. Their d0L, "
            f"{_FIRST_LAST} and GFMI at h_0 are therefore not properties of the model: their {_FIRST_LAST} is "
            f"{first_last(lambda m: m in tied)} against {first_last(lambda m: m not in tied)} for the other "
            f"models. {_definition_note(records, tied)} Within the trained embedders "
            f"({'the table above' if within_table else 'their own table, once 4 of them have every task'}) "
            "d0L is defined for every model.", ""]  # fmt: skip


def _definition_note(records: Sequence[Mapping[str, Any]], tied: Sequence[str]) -> str:
    """Whether the decoders' cells were measured under the definition that leaves scores reading an
    uninformative state undefined (their records say so), or before it."""
    before = sorted({r["model"]["name"] for r in records if r["model"]["name"] in tied
                     and r.get("undefined_states") is None})  # fmt: skip
    if not before:
        return ("Their records were measured with those scores undefined (null): their summaries start at "
                "the first informative state, h_1 (docs/method.md).")  # fmt: skip
    return (f"The records of {', '.join(before)} were measured before mteb-lrd left such scores undefined: "
            "they hold the paper's numbers, computed from that one vector, so the mixed panel's correlations of "
            "these scores, and the comparison of d0L with its rivals, rest partly on those ties; measured again, "
            "these cells give null for every score that reads h_0 and start their summaries at h_1 "
            "(docs/method.md).")  # fmt: skip
