"""The results document's DySem part: a run's summaries read from the records folder, its comparisons
as rows of the claims table (one model: the paired bootstrap over its test pairs), and its section."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from mteb_lrd.dysem.chunks import assemble, coverage
from mteb_lrd.dysem.study_files import read_chunks
from mteb_lrd.metrics.permutation import holm
from mteb_lrd.report.results_claims import CHECKPOINTS, Claim, count, fmt_p, verdict
from mteb_lrd.report.studies import dysem_gain_figure
from mteb_lrd.report.studies import markdown_table as _table

__all__ = ["dysem_claims", "dysem_figure", "dysem_section", "read_dysem"]

#: The paper's gains of DySem (EP) over a baseline (by its method label in a summary), as the lowest
#: and highest Δρ of its 7-task means on four base LLMs (:data:`_PAPER_MODELS`).
_PAPER_GAINS: dict[str, tuple[float, float]] = {
    "PromptEOL": (0.044, 0.107),
    "attention sum (dense)": (0.007, 0.049),
}
_PAPER_SCOPE = "7-task means on four 7–8B base LLMs"
_PAPER_MODELS = "Llama-2-7B, Llama-3.1-8B, Qwen2.5-7B, Qwen3-8B-Base"
#: A summary's method labels as the document names them (the dense attention sum is the paper's AlignedWVA).
_NAMES = {"attention sum (dense)": "AlignedWVA-style dense attention sum"}


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
    chunked = _chunk_folders(folder)
    both = sorted(set(found) & set(chunked))
    if both:
        raise ValueError(f"{folder}: {both[0]}.json and the chunk folder {both[0]}/ are two records of one "
                         "study; keep one")  # fmt: skip
    found.update({name: joined for name, joined in chunked.items() if isinstance(joined, dict)})
    pending = [f"- DySem (`{name}`): {state}." for name, state in chunked.items() if isinstance(state, str)]
    return found, pending


def _chunk_folders(folder: str | Path) -> dict[str, dict[str, Any] | str]:
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


def _model(summary: Mapping[str, Any]) -> str:
    """The run's panel name, with its checkpoint in words where
    :data:`~mteb_lrd.report.results_claims.CHECKPOINTS` describes it (``"qwen2.5-coder-1.5b:
    Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF dequantised to float32"``)."""
    name = Path(str(summary["model"])).name
    return f"{name}: {CHECKPOINTS[name]}" if name in CHECKPOINTS else name


def _paper(other: str) -> str:
    if other not in _PAPER_GAINS:
        return "ahead (no value published)"
    low, high = _PAPER_GAINS[other]
    return f"Δρ {low:+.3f} to {high:+.3f} ({_PAPER_SCOPE})"


def _versus_paper(other: str, low: float, high: float) -> str:
    """Where our interval lies against the paper's gains over ``other`` (empty where it publishes none)."""
    if other not in _PAPER_GAINS:
        return ""
    smallest, largest = _PAPER_GAINS[other]
    if high < smallest:
        return f"; excludes the paper's smallest gain ({smallest:+.3f})"
    if low > largest:
        return f"; above the paper's largest gain ({largest:+.3f})"
    inside = smallest <= low and high <= largest
    return f"; {'inside' if inside else 'overlaps'} the paper's range ({smallest:+.3f} to {largest:+.3f})"


def _bound(value: float) -> str:
    """``5e-4`` for 0.0005 (one significant digit, no padded exponent)."""
    mantissa, exponent = f"{value:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _p_cell(p: float, p_adj: float, resamples: int) -> str:
    """The p column; a p at the bootstrap's floor (no resample on the far side of zero: at most
    ``1 / resamples``) and the Holm value made from it are bounds, written ``≤``."""
    if p > 1 / resamples * (1 + 1e-9):
        return f"{fmt_p(p)} / {fmt_p(p_adj)}"
    return f"≤ {_bound(1 / resamples)} / ≤ {fmt_p(p_adj)}"


def dysem_claims(stem: str, summary: Mapping[str, Any]) -> list[Claim]:
    """DySem against each baseline per task: the paired bootstrap over pairs (one model: pairs are the unit)."""
    paired = summary["paired"]
    found = [(task, other, e) for task, per in paired["tasks"].items() for other, e in per.items()]
    adjusted: Any = holm([e["p"] for _, _, e in found]) if found else []
    return [{
        "claim": f"DySem beats {_NAMES.get(other, other)} on {task} ({_model(summary)})", "paper": _paper(other),
        "ours": f"Δρ {e['delta']:+.4f} [{e['ci_low']:+.4f}, {e['ci_high']:+.4f}]"
                + _versus_paper(other, e["ci_low"], e["ci_high"]),
        "n": f"1 model ({e['n']:,} test pairs)", "test": f"paired bootstrap over pairs ({e['n_resamples']:,})",
        "p": e["p"], "p_adj": float(p_adj), "p_cell": _p_cell(e["p"], float(p_adj), int(e["n_resamples"])),
        "verdict": verdict(e["delta"] > 0, float(p_adj), 1 / int(e["n_resamples"]), len(found), "1 model"),
        "study": stem,
    } for (task, other, e), p_adj in zip(found, adjusted, strict=True)]  # fmt: skip


def _dev_phrase(summary: Mapping[str, Any]) -> str:
    """Where DySem's k, L and value vector came from, when the STS Benchmark dev split chose them
    (``--select-on-dev``; a label-based language order alone also uses dev labels, but chooses none of them)."""
    chosen = summary.get("dev", {}).get("select_on_dev")
    return f"k, L and value chosen on {summary['dev_pairs']:,} STS Benchmark dev pairs; " if chosen else ""


def dysem_section(stem: str, summary: Mapping[str, Any]) -> list[str]:
    """A DySem run's section: the model, the tasks, and each method's Spearman ρ."""
    table, tasks = summary["table"], list(summary["tasks"])
    run = f"; run in {summary['dtype']}" if summary.get("dtype") else ""
    lines = [f"## DySem (`{stem}`)", "",
             f"Model {_model(summary)}{run}. {_dev_phrase(summary)}"
             + "; ".join(f"{t}: {v['pairs']:,} test pairs" + ("" if v["translations"] else " (no translations)")
                         for t, v in summary["tasks"].items())
             + f"; language order {', '.join(summary['language_order'])}. One model on {count(len(tasks), 'task')}; "
             f"the paper's gains are {_PAPER_SCOPE} ({_PAPER_MODELS}).", ""]  # fmt: skip
    lines += _table(["method", *tasks], [[_NAMES.get(label, label), *[per.get(t, {}).get("spearman") for t in tasks]]
                                         for label, per in table.items()])  # fmt: skip
    return [*lines, "", "Spearman ρ × 100 of each method's own similarity with the gold scores.", ""]


def dysem_figure(summary: Mapping[str, Any]) -> Figure | None:
    """DySem's gain over each baseline with its interval, the baselines named as the document names them."""
    paired = summary["paired"]
    tasks = {
        task: {_NAMES.get(other, other): e for other, e in per.items()}
        for task, per in paired["tasks"].items()
    }
    return dysem_gain_figure({**paired, "tasks": tasks})
