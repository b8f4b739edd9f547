"""Markdown + HTML reports (with plots) of the selection and pruning studies.

The HTML page is the Markdown's tables rendered as HTML with the PNG figures embedded, so one file
can be opened anywhere. All files are written atomically.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from mteb_lrd.io import atomic_write_bytes
from mteb_lrd.report.plots import label_points, panel_grid, score_axis_label

__all__ = [
    "dysem_gain_figure",
    "exhaustive_cells_table",
    "exhaustive_summary_table",
    "markdown_table",
    "pruning_change_figure",
    "selection_scatter",
    "write_prune_report",
    "write_selection_report",
]


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return "–" if not np.isfinite(value) else f"{value:.{digits}f}"
    return str(value)


def _finite_or(value: Any, default: float) -> float:
    return float(value) if value is not None and np.isfinite(value) else default


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A Markdown table (numbers rounded for reading, NaN as a dash)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows]
    return lines


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, metadata={"Title": fig.get_suptitle() or "mteb-lrd"})
    return buffer.getvalue()


def _markdown_to_html(title: str, lines: Sequence[str], figures: Mapping[str, bytes]) -> str:
    """Tables, headings, bullet points and figure lines (``![...](name.png)``) of our Markdown."""
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
           "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse}"
           "td,th{border:1px solid #bbb;padding:2px 6px;text-align:right}</style></head><body>"]  # fmt: skip
    in_table = False
    for line in lines:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if set("".join(cells)) <= set("-"):
                continue
            tag = "th" if not in_table else "td"
            if not in_table:
                out.append("<table>")
                in_table = True
            out.append("<tr>" + "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in cells) + "</tr>")
            continue
        if in_table:
            out.append("</table>")
            in_table = False
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{html.escape(line.lstrip('#').strip())}</h{level}>")
        elif line.startswith("![") and "](" in line:
            name = line[line.index("](") + 2 : -1]
            data = base64.b64encode(figures.get(name, b"")).decode()
            out.append(f"<p><img src='data:image/png;base64,{data}' style='max-width:100%'></p>")
        elif line.startswith("- "):
            out.append(f"<ul><li>{html.escape(line[2:])}</li></ul>")
        elif line.strip():
            out.append(f"<p>{html.escape(line)}</p>")
    if in_table:
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out)


def _save(out_dir: Path, stem: str, title: str, lines: list[str], figures: Mapping[str, bytes]) -> Path:
    for name, data in figures.items():
        atomic_write_bytes(out_dir / name, data)
    atomic_write_bytes(out_dir / f"{stem}.md", ("\n".join(lines) + "\n").encode())
    atomic_write_bytes(out_dir / f"{stem}.html", _markdown_to_html(title, lines, figures).encode())
    return out_dir / f"{stem}.md"


def selection_scatter(analysis: Mapping[str, Any], name: str) -> Figure | None:
    """Score ``name`` against the main score: one panel per task, each point named by its model
    (``None`` when no task has a finite value of the score)."""
    panels = []
    for task in analysis["tasks"]:
        points = [
            (model, analysis["scores"][task][model].get(name), analysis["main"][task][model])
            for model in sorted(analysis["scores"][task])
        ]
        points = [(m, float(x), float(y)) for m, x, y in points if x is not None and np.isfinite(x)]
        if points:
            panels.append((task, points))
    if not panels:
        return None
    fig, axes = panel_grid(len(panels), 4.6, 3.6)
    for axis, (task, points) in zip(axes, panels, strict=True):
        axis.scatter([p[1] for p in points], [p[2] for p in points], s=22, zorder=3)
        axis.margins(0.25)
        label_points(axis, points)
        rho = analysis["per_task"].get(name, {}).get(task, {}).get("rho")
        axis.set_title(f"{task} (Spearman ρ {_fmt(rho, 2)})", fontsize=9)
        axis.set_xlabel(score_axis_label(name), fontsize=8)
        axis.set_ylabel("main score (the task's metric, 0–1)", fontsize=8)
        axis.grid(alpha=0.3)
    fig.suptitle(f"{name} against the main score, per task")
    return fig


def dysem_gain_figure(paired: Mapping[str, Any]) -> Figure | None:
    """DySem's Spearman gain over each baseline (``paired`` as ``mteb-lrd dysem`` writes it): one panel
    per task, each baseline's Δρ with its paired-bootstrap 95 % interval (``None`` without tasks)."""
    tasks = {task: per for task, per in paired["tasks"].items() if per}
    if not tasks:
        return None
    fig, axes = panel_grid(len(tasks), 4.6, 0.5 + 0.45 * max(len(per) for per in tasks.values()))
    for axis, (task, per) in zip(axes, tasks.items(), strict=True):
        names = list(per)
        delta = np.array([per[n]["delta"] for n in names], dtype=float)
        low = np.array([per[n]["ci_low"] for n in names], dtype=float)
        high = np.array([per[n]["ci_high"] for n in names], dtype=float)
        y = np.arange(len(names))
        axis.errorbar(delta, y, xerr=[delta - low, high - delta], fmt="o", capsize=3, zorder=3)
        axis.axvline(0.0, color="grey", linewidth=1)
        axis.set_yticks(y, names, fontsize=8)
        axis.set_title(f"{task} ({per[names[0]]['n']:,} pairs)", fontsize=9)
        axis.set_xlabel(f"Spearman ρ of {paired['reference']} minus the baseline's", fontsize=8)
        axis.grid(alpha=0.3, axis="x")
    fig.suptitle("DySem against its baselines (paired bootstrap 95 % interval)")
    return fig


_SUMMARY_COLUMNS = (
    ("tasks", "n_tasks"), ("median ρ", "median_rho"), ("mean ρ", "mean_rho"), ("median abs ρ", "median_abs_rho"),
    ("p<.05", "n_p05"), ("p<.01", "n_p01"), ("+", "n_positive"), ("−", "n_negative"),
)  # fmt: skip


def _panel_lines(analysis: Mapping[str, Any]) -> list[str]:
    """The models and their main scores per task."""
    models, tasks = analysis["models"], analysis["tasks"]
    lines = [f"{len(models)} models, {len(tasks)} tasks. Spearman ρ across models, per task, then over tasks.",
             "", f"Definitions: `reproduce={analysis.get('reproduce', 'ours')}` (see docs/method.md).", ""]  # fmt: skip
    lines += markdown_table(
        ["model", "family", "params (M)", "dim", "layers", "kind", "text template"],
        [[m, i["family"], i["params"] / 1e6, i["dim"], i["layers"], i["kind"], i.get("template") or "none"]
         for m, i in sorted(models.items())],
    )  # fmt: skip
    lines += ["", "## Main scores", ""]
    return lines + markdown_table(
        ["task", *sorted(models)], [[t, *[analysis["main"][t].get(m) for m in sorted(models)]] for t in tasks]
    )


def _summary_table(summary: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    header = ["score", *[title for title, _ in _SUMMARY_COLUMNS]]
    return markdown_table(header, [[n, *[summary[n][key] for _, key in _SUMMARY_COLUMNS]] for n in names])


def _control_lines(analysis: Mapping[str, Any], headline: Sequence[str]) -> list[str]:
    """Partial correlations, leave-one-family-out and the per-task ρ of the headline scores."""
    summary, partial, tasks = analysis["summary"], analysis["partial"], analysis["tasks"]
    method = (
        "Pearson (the authors' residualised form)"
        if analysis.get("partial_method") == "pearson"
        else "Spearman"
    )
    lines = ["", f"### Controls: partial {method} ρ (median over tasks)", ""]
    lines += markdown_table(
        ["score", "raw", *[f"controlling {c}" for c in partial]],
        [[n, summary[n]["median_rho"], *[partial[c].get(n, {}).get("median_rho") for c in partial]]
         for n in headline if n in summary],
    )  # fmt: skip
    lines += ["", "### Leave one family out (median ρ over tasks without that family)", ""]
    families = sorted({i["family"] for i in analysis["models"].values()})
    lines += markdown_table(
        ["score", *[f"−{f}" for f in families]],
        [[n, *[analysis["lofo"].get(n, {}).get(f, {}).get("median_rho") for f in families]]
         for n in headline if n in analysis["lofo"]],
    )  # fmt: skip
    lines += ["", "### Per-task ρ", ""]
    return lines + markdown_table(
        ["score", *tasks],
        [[n, *[analysis["per_task"].get(n, {}).get(t, {}).get("rho") for t in tasks]] for n in headline],
    )


def _model_level_lines(analysis: Mapping[str, Any], headline: Sequence[str]) -> list[str]:
    """The median ρ over tasks tested with the model as the unit, raw and Holm-adjusted p."""
    tested = analysis.get("model_level") or {}
    names = [n for n in headline if n in tested]
    if not names:
        return []
    alpha = analysis.get("alpha", 0.05)
    lines = ["", f"### The model as the unit (significance level α = {alpha}, used throughout)", "",
             "Median ρ over tasks with a bootstrap interval over models; p from relabelling the models "
             "jointly across tasks (every order up to 10 models), then Holm's adjustment over the scores "
             "below.", ""]  # fmt: skip
    rows = [[n, tested[n]["median_rho"], tested[n]["ci_low"], tested[n]["ci_high"], tested[n]["p"],
             tested[n]["p_holm"], "exact" if tested[n]["exact"] else "Monte Carlo", tested[n]["n_models"],
             tested[n]["n_tasks"]] for n in names]  # fmt: skip
    header = ["score", "median ρ", "95% CI low", "95% CI high", "p", "p (Holm)", "p by", "models", "tasks"]
    return lines + markdown_table(header, rows)


def _strongest_lines(analysis: Mapping[str, Any]) -> list[str]:
    """Whether d0L beats each rival: the difference of two dependent correlations, tested exactly."""
    strongest = analysis.get("strongest") or {}
    against = strongest.get("against") or {}
    if not against:
        return []
    reference = strongest["reference"]
    lines = ["", f"### Is {reference} the strongest?", "",
             f"ρ({reference}) − ρ(rival), averaged over tasks; p from swapping the two scores within models "
             "(every one of the 2^n assignments), Holm over the rivals. A positive difference with a small "
             "adjusted p is needed to call it stronger.", ""]  # fmt: skip
    rows = [
        [name, e["difference"], e["p"], e["p_holm"], e["n_models"], e["n_tasks"]]
        for name, e in against.items()
    ]
    return lines + markdown_table(["rival", "ρ difference", "p", "p (Holm)", "models", "tasks"], rows)


def write_selection_report(analysis: Mapping[str, Any], out_dir: str | Path, headline: Sequence[str]) -> Path:
    """``selection.md`` / ``selection.html`` / one scatter PNG per headline score; returns the .md path."""
    summary = analysis["summary"]
    order = sorted(summary, key=lambda n: -_finite_or(summary[n]["median_rho"], -9.0))
    lines = ["# Label-free model selection", "", *_panel_lines(analysis)]
    lines += ["", "## Correlation with the main score, over tasks", ""]
    lines += _summary_table(summary, [n for n in order if n in headline])
    lines += _model_level_lines(analysis, headline)
    lines += _strongest_lines(analysis)
    lines += _control_lines(analysis, headline)
    lines += ["", "## What this panel can and cannot show", ""] + [f"- {c}" for c in analysis["caveats"]]
    lines += ["", "## All scores (median ρ over tasks)", "", *_summary_table(summary, order)]
    lines += [
        "",
        "## Scatter plots (score against main score; one panel per task, points named by model)",
        "",
    ]
    figures: dict[str, bytes] = {}
    for name in headline:
        fig = selection_scatter(analysis, name)
        if fig is not None:
            figures[f"scatter_{name}.png"] = _png(fig)
            lines += [f"![{name}](scatter_{name}.png)", ""]
    return _save(Path(out_dir), "selection", "Label-free model selection", lines, figures)


def pruning_change_figure(analysis: Mapping[str, Any]) -> Figure:
    """Mean score change against the budget, one line per method (the paper's Fig. 2 layout)."""
    table, cols = analysis["table"], [f"{b:g}" for b in analysis["budgets"]]
    fig = Figure(figsize=(6.5, 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for m in analysis["methods"]:
        ax.plot([float(c) * 100 for c in cols], [table[m][c]["mean"] for c in cols], marker="o", label=m)
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xlabel("pruning budget [% of candidate layers removed]")
    ax.set_ylabel("mean change of the main score (pruned − base)")
    ax.set_title("Layer pruning: mean score change per method")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def write_prune_report(analysis: Mapping[str, Any], out_dir: str | Path) -> Path:
    """``pruning.md`` / ``pruning.html`` / ``pruning.png``; returns the .md path."""
    out = Path(out_dir)
    table, budgets, methods = analysis["table"], analysis["budgets"], analysis["methods"]
    cols = [f"{b:g}" for b in budgets]
    lines = ["# Layer pruning", "", f"{len(analysis['cells'])} model × task cells, unpruned main score:", ""]
    lines += markdown_table(
        ["model", "task", "unpruned score", "text template"],
        [[b["model"], b["task"], b["base_score"], b["template"] or "none"] for b in analysis.get("base", [])],
    )
    lines += [""]
    lines += ["## Mean score change (median in parentheses), like the paper's Fig. 2", ""]
    rows = [
        [m, *[f"{table[m][c]['mean']:+.4f} ({table[m][c]['median']:+.4f})" for c in cols]] for m in methods
    ]
    lines += markdown_table(["method", *[f"{float(c):.0%}" for c in cols]], rows)
    for c in cols:
        lines += ["", f"## Budget {float(c):.0%}", ""]
        keys = [
            "mean",
            "median",
            "ci_low",
            "ci_high",
            "wilcoxon_p_vs_random",
            "model_p_vs_random",
            "n_models",
            "share_beats_random",
            "speedup",
        ]
        lines += markdown_table(
            [
                "method",
                "mean Δ",
                "median Δ",
                "95% CI low",
                "95% CI high",
                "Wilcoxon p vs Random (cells share models)",
                "p vs Random over models (exact sign flip)",
                "models",
                "beats Random",
                "speed-up",
            ],
            [[m, *[table[m][c][k] for k in keys]] for m in methods],
        )
        lines += [
            "",
            f"Random spread (std over seeds, mean over cells): {table['random'][c]['random_spread']:.4f}",
        ]
        spread = analysis.get("random_seeds", {}).get(c)
        if spread and spread["n_seeds"]:
            inside = [m for m in methods if m != "random" and table[m][c].get("within_random_range")]
            lines += [
                "",
                f"Random over {spread['n_seeds']} seeds (mean Δ of each seed over cells): mean "
                f"{spread['mean']:+.4f}, std {spread['std']:.4f}, range [{spread['min']:+.4f}, "
                f"{spread['max']:+.4f}]. Inside that range (indistinguishable from some Random draw): "
                + (", ".join(inside) or "none"),
            ]
    figures = {"pruning.png": _png(pruning_change_figure(analysis))}
    lines += ["", "![mean score change](pruning.png)", ""]
    lines += _exhaustive_lines(analysis.get("exhaustive") or {})
    return _save(out, "pruning", "Layer pruning", lines, figures)


def exhaustive_cells_table(cells: Sequence[Mapping[str, Any]]) -> list[str]:
    """The exhaustive reference per cell and size: the number of sets, the oracle, median and worst Δ."""
    header = ["model", "task", "size", "sets", "oracle Δ (blocks)", "median Δ", "worst Δ (blocks)"]
    rows = [[c["model"], c["task"], c["size"], c["n_sets"], f"{c['oracle']:+.4f} ({c['oracle_blocks']})",
             f"{c['median']:+.4f}", f"{c['worst']:+.4f} ({c['worst_blocks']})"] for c in cells]  # fmt: skip
    return markdown_table(header, rows)


def exhaustive_summary_table(summary: Sequence[Mapping[str, Any]], *, per_model: bool) -> list[str]:
    """Each method's mean percentile among all sets of its size (with each model's when ``per_model``)."""
    header = ["method", "size", "mean percentile", *(["per model"] if per_model else []), "models", "cells"]
    rows = [[r["method"], r["size"], f"{r['mean_percentile']:.1f}",
             *([", ".join(f"{m} {v:.0f}" for m, v in r["per_model"].items())] if per_model else []),
             r["n_models"], r["n_cells"]] for r in summary]  # fmt: skip
    return markdown_table(header, rows)


def _exhaustive_lines(exhaustive: Mapping[str, Any]) -> list[str]:
    """The exhaustive reference's section: each method's percentile among all sets of its size."""
    if not exhaustive.get("cells"):
        return []
    lines = ["## Against every candidate set of the same size", "",
             "Each cell scored every set of candidate blocks of a size; a method's choice gets its mid-rank "
             "percentile among them (100: better than every set, 50: the median set). Percentiles are "
             "averaged within a model first; n models is the effective sample size.", ""]  # fmt: skip
    lines += exhaustive_cells_table(exhaustive["cells"])
    lines += [""]
    lines += exhaustive_summary_table(exhaustive["summary"], per_model=True)
    return [*lines, ""]
