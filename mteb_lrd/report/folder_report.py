"""The report of one results folder: tables (Markdown, CSV, JSON), PNG figures and one
self-contained HTML page, every file written atomically through :mod:`mteb_lrd.io`."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mteb_lrd._compat import installed_version
from mteb_lrd.io import atomic_write_text
from mteb_lrd.report import plots, profile_plots
from mteb_lrd.report.html import VARIANTS_NOTE, EmbeddedFigure, Page, render_html
from mteb_lrd.report.result_files import ModelVariant, ResultsFolder, read_results
from mteb_lrd.report.tables import (
    Table,
    leaderboard,
    order_variants,
    task_table,
    to_markdown,
    variant_description,
)
from mteb_lrd.tasks.shared_tasks import namesake_note

__all__ = ["write_report"]

LEADERBOARD_NOTES = (
    "One row per model or pruned variant, grouped by model (the base model first). Task columns, Mean and "
    "Best-layer score: main score × 100. Best layer: the layer whose per-layer main score, averaged over "
    "the tasks, is highest, numbered as in the base model (0 = embeddings; pruned variants keep the base "
    "numbering). Tasks: how many task columns the row has. Mean, Best layer and d0L / NRS mean J / GFMI mean "
    "AUC (model-level LRD scores) are computed over the tasks every row has, so that every row is "
    "measured on the same texts; NRS and GFMI are shown only when every row used the same number of "
    "texts on those tasks (their scale depends on it).",
)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:120] or "model"


def _version(package: str) -> str:
    return installed_version(package) or "not installed"


def _span(values: Sequence[Any]) -> str:
    present = sorted({v for v in values if v is not None})
    if not present:
        return "not recorded"
    return str(present[0]) if len(present) == 1 else f"{present[0]} – {present[-1]}"


def _distinct(entries: Sequence[dict[str, Any]], read: Any) -> str:
    values = sorted({text for entry in entries if (text := read(entry))})
    return "; ".join(values) if values else "not recorded"


_PARAMETERS = ("seed", "rank", "var_threshold", "nrs_k", "n_anchors", "gfmi_k")


def _parameters(entries: Sequence[dict[str, Any]], joined: Any) -> str:
    """The distinct LRD parameter sets, each once with the kNN backends it ran on: sets that differ
    only in the backend (``auto`` resolved to ``faiss-cpu``, say) compute the same numbers."""
    backends: dict[str, set[str]] = {}
    for entry in entries:
        params = entry.get("params") or {}
        if text := joined(params, _PARAMETERS):
            backends.setdefault(text, set()).add(str(params.get("backend", "not recorded")))
    if not backends:
        return "not recorded"
    return "; ".join(
        f"{text} (kNN backend {' / '.join(sorted(found))})" for text, found in sorted(backends.items())
    )


def _settings(entries: Sequence[dict[str, Any]]) -> dict[str, str]:
    """How the layer dynamics were computed, as recorded in the result files (distinct values)."""

    def joined(mapping: Any, keys: Sequence[str]) -> str:
        if not isinstance(mapping, dict):
            return ""
        return ", ".join(f"{key} {mapping[key]}" for key in keys if mapping.get(key) is not None)

    def interval(entry: dict[str, Any]) -> str:
        found = (entry.get("nrs") or {}).get("jaccard_ci")
        return joined(found, ("resamples", "seed", "confidence"))

    def versions(entry: dict[str, Any]) -> str:
        recorded = (entry.get("run") or {}).get("versions") or {}
        return ", ".join(f"{name} {version}" for name, version in sorted(recorded.items()))

    return {
        "pooling / final norm": _distinct(
            entries, lambda e: f"{e.get('pooling')} / {e.get('final_norm')}" if e.get("pooling") else ""
        ),  # fmt: skip
        "caps (most texts per metric)": _distinct(
            entries, lambda e: joined(e.get("caps"), ("frenet", "nrs", "gfmi"))
        ),
        "LRD parameters": _parameters(entries, joined),
        "bootstrap intervals": _distinct(entries, interval),
        "library versions at run time": _distinct(entries, versions),
        "command lines": _distinct(entries, lambda e: (e.get("run") or {}).get("command") or ""),
    }


def _provenance(folder: ResultsFolder, tasks: Table) -> dict[str, str]:
    column = {name: [row[i] for row in tasks.rows] for i, name in enumerate(tasks.columns)}
    revisions: dict[str, set[str]] = {}
    for variant in folder.variants:
        revisions.setdefault(variant.model, set()).add(variant.revision)
    dataset_revisions = {
        f"{task}@{rev}" for task, rev in zip(column["task"], column["dataset_revision"], strict=True) if rev
    }
    return {
        "results folder": str(folder.root),
        "report generated": datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "mteb-lrd / mteb installed": f"{_version('mteb-lrd')} / {_version('mteb')}",
        "mteb version in result files": ", ".join(sorted({str(v) for v in column["mteb_version"] if v}))
        or "not recorded",
        "evaluation dates": _span(column["date"]),
        "model revisions": "; ".join(f"{m}: {', '.join(sorted(r))}" for m, r in sorted(revisions.items())),
        "task data revisions": ", ".join(sorted(dataset_revisions)) or "not recorded",
        "texts per LRD metric (n_used)": "; ".join(
            f"{metric} {_span(column[f'n_used_{metric}'])}" for metric in ("frenet", "nrs", "gfmi")
        ),
        **_settings([d for v in folder.variants for r in v.tasks.values() for d in r.layer_dynamics]),
        **{
            f"local task {name}": note
            for name in sorted(set(column["task"]))
            if (note := namesake_note(name))
        },
        "result files": f"{folder.files_read} read, {len(folder.unreadable)} unreadable (left out)",
    }


def _figures(variants: list[ModelVariant], tasks: list[str], out: Path) -> list[tuple[EmbeddedFigure, Path]]:
    colours = plots.variant_colours(variants)  # one colour per variant on the whole page
    drawn: list[tuple[str, str, str, Any]] = [
        ("Per-layer scores", "All models and variants (relative depth)", "per_layer_scores.png",
         plots.per_layer_figure(variants, tasks, colours)),
    ]  # fmt: skip
    groups: dict[str, list[ModelVariant]] = {}
    for variant in variants:
        groups.setdefault(variant.model, []).append(variant)
    for task in tasks:
        drawn.append(("LRD profiles, model vs model", f"{task} (relative depth)",
                      f"profiles_{_slug(task)}.png",
                      profile_plots.profiles_overlay_figure(variants, task, relative=True,
                                                            colours=colours)))  # fmt: skip
    for model, group in groups.items():
        drawn.append(
            (
                "Base vs pruned",
                model,
                f"pruning_{_slug(model)}.png",
                plots.pruning_figure(group, tasks, colours),
            )
        )
        if any(v.removed_blocks for v in group):
            for task in tasks:
                drawn.append(("Base vs pruned", f"{model}: layer profiles on {task}",
                              f"pruning_profiles_{_slug(model)}_{_slug(task)}.png",
                              profile_plots.profiles_overlay_figure(group, task, relative=False,
                                                                    colours=colours)))  # fmt: skip
    drawn.append(
        (
            "d0L vs score",
            "One point per model / variant",
            "d0l_vs_score.png",
            plots.d0l_figure(variants, tasks),
        )
    )
    for variant in variants:
        drawn.append(
            (
                "Layer profiles",
                f"{variant.model} ({variant_description(variant)})",
                f"profile_{_slug(variant.label)}.png",
                profile_plots.profile_figure(variant),
            )
        )
    written = []
    for section, caption, name, figure in drawn:
        if figure is None:
            continue
        path = plots.save_png(figure, out / "figures" / name)
        written.append((EmbeddedFigure(section, caption, path.read_bytes()), path))
    return written


def _markdown(page: Page, figures: list[tuple[EmbeddedFigure, Path]]) -> str:
    lines = [f"# {page.title}", "", page.summary, ""]
    if page.unreadable:
        lines += [f"**Warning: {len(page.unreadable)} result file(s) could not be used and are NOT in any score "
                  "or mean below:**", ""] + [f"- `{u.path}`: {u.reason}" for u in page.unreadable] + [""]  # fmt: skip
    lines += [f"**Variants are never averaged.** {VARIANTS_NOTE}", "", "## Leaderboard", "", *page.notes, ""]
    lines += [to_markdown(page.leaderboard), "Tables as CSV / JSON: " + ", ".join(page.downloads), ""]
    section = None
    for figure, path in figures:
        if figure.section != section:
            lines += [f"## {figure.section}", ""]
            section = figure.section
        lines += [f"![{figure.caption}](figures/{path.name})", ""]
    columns = ["model", "variant", "task", "main_score", "best_layer", "best_layer_score", "frenet_d0L"]
    lines += ["## Per task", "", to_markdown(page.tasks, columns), "## Provenance", ""]
    lines += [f"- {key}: {value}" for key, value in page.provenance.items()]
    return "\n".join(lines) + "\n"


def _check_writable(output: Path) -> None:
    try:
        (output / "figures").mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cannot create the report folder {output}: {err.strerror or err}") from err
    for folder in (output, output / "figures"):
        if not os.access(folder, os.W_OK | os.X_OK):
            raise ValueError(f"the report folder {folder} is not writable")


def write_report(
    results: str | Path,
    output: str | Path,
    tasks: Sequence[str] | None = None,
    *,
    strict: bool = False,
    warn: bool = True,
) -> dict[str, Any]:
    """Write the report of an mteb results folder to ``output``.

    Files: ``report.html`` (self-contained: figures and table exports embedded), ``leaderboard.md``,
    ``leaderboard.csv`` / ``.json`` (one row per model or variant), ``tasks.csv`` / ``.json`` (one row
    per variant and task, with provenance) and ``figures/*.png``.

    Args:
        results: an mteb results folder (``ResultCache`` folder or its ``results/``).
        output: the report folder (created).
        tasks: task columns, in order; default every task found.
        strict: raise instead of warning when a result file is unreadable.
        warn: issue a ``UserWarning`` naming the unreadable files (they are listed in the report and
            the returned ``"unreadable"`` either way).

    Returns:
        ``{"html", "markdown", "csv", "json", "tasks_csv", "tasks_json": path, "figures": [paths],
        "unreadable": [UnreadableResult]}``.

    Raises:
        ValueError: when the folder holds no usable results, a requested task has none, the output
            folder cannot be written, or (``strict``) a result file is unreadable.
    """
    output = Path(output).expanduser()
    folder = read_results(results, warn=warn and not strict)
    if output.resolve().is_relative_to(folder.root.resolve()):
        raise ValueError(
            f"the report folder {output} is inside the results folder {folder.root}: choose one outside it "
            "(its JSON tables would be read as results next time)"
        )
    if strict and folder.unreadable:
        raise ValueError(
            f"{len(folder.unreadable)} unreadable result file(s): "
            + "; ".join(str(u) for u in folder.unreadable)
        )
    if not folder.variants:
        raise ValueError(f"no usable mteb results found under {results}")
    _check_writable(output)
    board = leaderboard(folder.variants, tasks)
    per_task = task_table(folder.variants, board.tasks)
    figures = _figures(order_variants(folder.variants, board.tasks), board.tasks, output)
    models = len({v.model for v in folder.variants})
    page = Page(
        title="mteb-lrd report",
        summary=f"{len(board.rows)} models / variants of {models} model(s) on {len(board.tasks)} task(s) "
        f"from {folder.root}.",
        leaderboard=board,
        tasks=per_task,
        figures=[f for f, _ in figures],
        unreadable=folder.unreadable,
        provenance=_provenance(folder, per_task),
        downloads={
            "leaderboard.csv": board.to_csv(),
            "leaderboard.json": board.to_json(),
            "tasks.csv": per_task.to_csv(),
            "tasks.json": per_task.to_json(),
        },
        notes=(*LEADERBOARD_NOTES, *board.notes),
    )
    paths: dict[str, Any] = {}
    for key, name in (("csv", "leaderboard.csv"), ("json", "leaderboard.json"),
                      ("tasks_csv", "tasks.csv"), ("tasks_json", "tasks.json")):  # fmt: skip
        paths[key] = atomic_write_text(output / name, page.downloads[name])
    paths["markdown"] = atomic_write_text(output / "leaderboard.md", _markdown(page, figures))
    paths["html"] = atomic_write_text(output / "report.html", render_html(page))
    paths["figures"] = [path for _, path in figures]
    paths["unreadable"] = list(folder.unreadable)
    return paths
