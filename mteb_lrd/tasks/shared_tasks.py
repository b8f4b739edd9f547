"""Ready-made local tasks: the shared STS sets, the bundled demo sample, and their registration.

The shared STS folder (``../shared/data/sts`` beside the checkout, or ``$MTEB_LRD_STS_DIR``) holds
STS12–16, SICK-R and the STS Benchmark in 11 languages as JSON lines. :data:`SHARED_STS` is the one
table of those sets; the MTEB wrapper, the studies and DySem all read it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mteb_lrd import _compat
from mteb_lrd.defaults import DEMO_DATA
from mteb_lrd.tasks.local_tasks import Rows, content_hash, local_task, make_task

if TYPE_CHECKING:
    from mteb.abstasks import AbsTask

__all__ = [
    "SHARED_STS",
    "STSB_LANGUAGES",
    "SharedSTS",
    "DEMO_VERSUS_MTEB",
    "demo_task",
    "namesake_note",
    "register_tasks",
    "shared_sts_dir",
    "sts_tasks",
]


@dataclass(frozen=True)
class SharedSTS:
    """One STS set of the shared data.

    Attributes:
        name: the local task name (``LocalSTS12``); never an MTEB task name, so both can coexist.
        short: the set's usual name (``STS12``).
        folder: its folder under the shared STS root.
        score_range: ``(min, max)`` of the gold scores.
        pairs: test pairs in the shared file.
        versus_mteb: how the set differs from the MTEB task of the same short name (``""`` when it
            is the same set).
    """

    name: str
    short: str
    folder: str
    pairs: int
    versus_mteb: str = ""
    score_range: tuple[float, float] = (0.0, 5.0)

    def test_file(self, root: Path) -> Path:
        """``<root>/<folder>/test.jsonl``."""
        return root / self.folder / "test.jsonl"


SHARED_STS: dict[str, SharedSTS] = {
    s.name: s
    for s in (
        SharedSTS("LocalSTS12", "STS12", "STS12", 2358,
                  "MTEB STS12 has 3,108 pairs: the MSRvid part (750 pairs) is missing here"),
        SharedSTS("LocalSTS13", "STS13", "STS13", 1500),
        SharedSTS("LocalSTS14", "STS14", "STS14", 3750),
        SharedSTS("LocalSTS15", "STS15", "STS15", 3000),
        SharedSTS("LocalSTS16", "STS16", "STS16", 1186),
        SharedSTS("LocalSICK-R", "SICK-R", "SICK-R", 9927, score_range=(1.0, 5.0)),
        SharedSTS("LocalSTSBenchmark", "STSBenchmark", "STSBenchmark-multi/en", 1379),
    )
}  # fmt: skip
DEMO_VERSUS_MTEB = "300 of the 1,379 test pairs of MTEB STSBenchmark, a fixed sample bundled with the package"
"""How the demo task differs from its MTEB namesake."""
# STS Benchmark translations of the shared data: folder name -> ISO 639-3 + script.
STSB_LANGUAGES = {
    "en": "eng-Latn", "de": "deu-Latn", "es": "spa-Latn", "fr": "fra-Latn", "it": "ita-Latn",
    "ja": "jpn-Jpan", "nl": "nld-Latn", "pl": "pol-Latn", "pt": "por-Latn", "ru": "rus-Cyrl",
    "zh": "cmn-Hans",
}  # fmt: skip
# mteb_lrd/ sits in the checkout; shared/ sits beside the checkout.
_DEFAULT_STS_DIR = Path(__file__).resolve().parents[3] / "shared" / "data" / "sts"


def shared_sts_dir() -> Path:
    """The shared STS folder: ``$MTEB_LRD_STS_DIR`` when set, else ``../shared/data/sts``."""
    return Path(os.environ.get("MTEB_LRD_STS_DIR", _DEFAULT_STS_DIR))


def sts_tasks(folder: str | Path | None = None) -> dict[str, type]:
    """The shared STS tasks (``LocalSTS12`` .. ``LocalSTS16``, ``LocalSICK-R``, ``LocalSTSBenchmark``
    and ``LocalSTSBenchmarkMultilingualSTS`` with one subset per language), when the folder exists.

    Args:
        folder: the shared STS folder; default :func:`shared_sts_dir`.

    Returns:
        ``{name: task class}``; empty when the folder is absent.
    """
    root = Path(folder) if folder is not None else shared_sts_dir()
    tasks: dict[str, type] = {}
    if not root.is_dir():
        return tasks
    for name, sts in SHARED_STS.items():
        if sts.test_file(root).is_file():
            tasks[name] = local_task(
                root / sts.folder, "STS", name=name, eval_splits=["test"], score_range=sts.score_range
            )
    multi = root / "STSBenchmark-multi"
    langs = {code: [iso] for code, iso in STSB_LANGUAGES.items() if (multi / code / "test.jsonl").is_file()}
    if langs:
        files = [multi / code / "test.jsonl" for code in langs]
        tasks["LocalSTSBenchmarkMultilingualSTS"] = make_task(
            "STS",
            "LocalSTSBenchmarkMultilingualSTS",
            lambda: {code: {"test": Rows.read(multi / code / "test.jsonl")} for code in langs},
            languages=langs,
            revision=content_hash(files),
            description="STS Benchmark and its machine translations (shared data, test split).",
        )
    return tasks


def demo_task() -> type:
    """``LocalSTSBenchmarkDemo``: 300 pairs of the STS Benchmark test set bundled with the package
    (Cer et al. 2017; scores CC BY-SA 4.0), for demos and tests without any data folder.

    Returns:
        The task class; ``demo_task()()`` is the task to pass to ``mteb.evaluate``.
    """
    return make_task(
        "STS",
        "LocalSTSBenchmarkDemo",
        lambda: {"default": {"test": Rows.read(DEMO_DATA)}},
        revision=content_hash([DEMO_DATA]),
        description="300 pairs of the STS Benchmark test set (Cer et al. 2017), bundled for demos.",
    )


def namesake_note(task_name: str) -> str | None:
    """For a ready-made local task, ``"<pairs> pairs; <how it differs from MTEB's task>"``, else ``None``."""
    if task_name == "LocalSTSBenchmarkDemo":
        return f"300 pairs; {DEMO_VERSUS_MTEB}"
    sts = SHARED_STS.get(task_name)
    if sts is None:
        return None
    return f"{sts.pairs:,} pairs; " + (sts.versus_mteb or f"the same pairs as MTEB {sts.short}")


def register_tasks(tasks: Iterable[type[AbsTask]]) -> list[str]:
    """Add task classes to mteb's task registry so ``mteb.get_task(name)`` and ``mteb run`` find them.

    Returns:
        The registered names.

    Raises:
        ValueError: when a name is already taken by a different (e.g. standard MTEB) task.
    """
    registry = _compat.task_registry()
    names = []
    for task in tasks:
        name = task.metadata.name
        existing = registry.get(name)
        if existing is not None and existing.__module__ != make_task.__module__:
            raise ValueError(
                f"task name {name!r} is already an MTEB task ({existing.__module__}); pick another"
            )
        registry[name] = task
        names.append(name)
    return names
