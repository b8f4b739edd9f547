"""Turning CLI model and task arguments into models and mteb tasks (shared by run / prune)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_MODEL", "load_for_mteb", "resolve_model_path", "resolve_tasks"]

DEFAULT_MODEL = "default"


def resolve_model_path(spec: str) -> tuple[str, Path]:
    """``(name, folder)`` for ``default`` (all-MiniLM-L6-v2 from its PyPI package), a panel name, or a folder.

    Raises:
        ValueError: when ``spec`` is none of those.
    """
    if spec == DEFAULT_MODEL:
        from mteb_lrd.defaults import default_model_path

        return "sentence-transformers/all-MiniLM-L6-v2", default_model_path()
    path = Path(spec).expanduser()
    if path.is_dir():
        return path.resolve().name, path
    from mteb_lrd.studies.panel import PANEL, prepare

    if spec in PANEL:
        return spec, Path(prepare(spec))
    known = ", ".join(["default", *PANEL])
    raise ValueError(f"model {spec!r} is neither a folder nor a known name ({known})")


def load_for_mteb(spec: str, device: str | None = None) -> tuple[str, Any, Any]:
    """Load a model for mteb: ``(name, model, tokenizer)``.

    A folder saved by :meth:`mteb_lrd.pruning.surgery.PrunedModel.save` loads as that pruned model (its
    results go to an mteb experiment folder); a SentenceTransformer folder as a SentenceTransformer;
    anything else as a transformers model (decoders with their causal-LM head) plus its tokenizer.
    """
    from mteb_lrd.pruning.surgery import PRUNING_FILE

    name, path = resolve_model_path(spec)
    if (path / PRUNING_FILE).is_file():
        from mteb_lrd.pruning.pruned import PrunedModel

        pruned = PrunedModel.load(path, device=device)
        return str(pruned.mteb_model_meta.name), pruned, None
    if (path / "modules.json").is_file():
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(path), device=device)
        model.model_card_data.model_name = model.model_card_data.model_name or name
        return name, model, None
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(str(path))
    decoder = bool(getattr(config, "is_decoder", False)) or any(
        a.endswith("ForCausalLM") or a.endswith("LMHeadModel") for a in (config.architectures or [])
    )
    hf_model = (AutoModelForCausalLM if decoder else AutoModel).from_pretrained(str(path))
    return name, hf_model, AutoTokenizer.from_pretrained(str(path))


def resolve_tasks(names: list[str], local: list[str]) -> list[Any]:
    """Task instances for ``--task`` names and ``--local-task FOLDER=TYPE`` folders.

    Names: ``demo`` (the bundled 300-pair STS sample), the shared STS tasks (``LocalSTS12``,
    ``LocalSTSBenchmark``, ...), or any MTEB task name (its data then come from the Hub).

    Raises:
        ValueError: for a malformed ``--local-task`` or an unknown name.
    """
    import mteb

    from mteb_lrd.integration.local_tasks import local_task
    from mteb_lrd.integration.shared_tasks import demo_task, register_tasks, sts_tasks

    shared = sts_tasks()
    register_tasks([*shared.values(), demo_task()])
    tasks = []
    for name in names:
        if name in ("demo", "LocalSTSBenchmarkDemo"):
            tasks.append(demo_task()())
        elif name in shared:
            tasks.append(shared[name]())
        else:
            try:
                tasks.append(mteb.get_task(name))
            except KeyError as err:
                raise ValueError(f"unknown task {name!r}: {err.args[0] if err.args else ''}") from err
    for item in local:
        folder, sep, task_type = item.rpartition("=")
        if not sep or not folder:
            raise ValueError(f"--local-task takes FOLDER=TYPE (e.g. data/mytask=STS); got {item!r}")
        tasks.append(local_task(folder, task_type)())
    if not tasks:
        raise ValueError("no tasks: pass --task NAME and/or --local-task FOLDER=TYPE")
    return tasks
