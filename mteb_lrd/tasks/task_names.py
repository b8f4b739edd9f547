"""Task names as users give them (``demo``, ``STS12``, ``--local-task FOLDER=TYPE``) to mteb tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["canonical_task_name", "resolve_tasks"]


def canonical_task_name(name: str) -> str:
    """The one name of a task across commands: the shared STS sets answer to their short names too
    (``STS12`` → ``LocalSTS12``, ``STSBenchmark`` → ``LocalSTSBenchmark``); ``demo`` is the bundled
    sample; anything else is returned unchanged."""
    from mteb_lrd.tasks.shared_tasks import SHARED_STS

    if name in ("demo", "LocalSTSBenchmarkDemo"):
        return "LocalSTSBenchmarkDemo"
    by_short = {entry.short: key for key, entry in SHARED_STS.items()}
    return by_short.get(name, name)


def resolve_tasks(names: list[str], local: list[str]) -> list[Any]:
    """Task instances for ``--task`` names and ``--local-task FOLDER=TYPE`` folders.

    Names: ``demo`` (the bundled 300-pair STS sample), the shared STS tasks (``LocalSTS12`` or
    ``STS12``, ``LocalSTSBenchmark`` or ``STSBenchmark``, ...: the shared data when present, else the
    MTEB task), or any other MTEB task name (its data then come from the Hub).

    Raises:
        ValueError: for a malformed ``--local-task`` or an unknown name.
    """
    import mteb

    from mteb_lrd.tasks.local_tasks import local_task
    from mteb_lrd.tasks.shared_tasks import demo_task, register_tasks, sts_tasks

    shared = sts_tasks()
    register_tasks([*shared.values(), demo_task()])
    tasks = []
    for given in names:
        name = canonical_task_name(given)
        if name == "LocalSTSBenchmarkDemo":
            tasks.append(demo_task()())
        elif name in shared:
            tasks.append(shared[name]())
        else:
            name = given  # a short STS name without the shared data: the MTEB task (from the Hub)
            try:
                tasks.append(mteb.get_task(name))
            except KeyError as err:
                raise ValueError(f"unknown task {name!r}: {err.args[0] if err.args else ''}") from err
    for item in local:
        folder, sep, task_type = item.rpartition("=")
        if not sep or not folder:
            raise ValueError(f"--local-task takes FOLDER=TYPE (e.g. data/mytask=STS); got {item!r}")
        tasks.append(local_task(str(Path(folder).expanduser()), task_type)())
    if not tasks:
        raise ValueError("no tasks: pass --task NAME and/or --local-task FOLDER=TYPE")
    return tasks
