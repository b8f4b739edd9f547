"""Load a model for layer-wise work from a path or name, or accept an already loaded one."""

from __future__ import annotations

import errno
import functools
import json
import os
import socket
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mteb_lrd.extraction.architectures import LocatedArchitecture, locate

__all__ = [
    "LoadedModel",
    "hub_reachable",
    "is_sentence_transformer",
    "load_model",
    "load_pretrained",
    "resolve_device",
    "resolve_dtype",
    "sentence_transformers_pooling_config",
]

_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float16": torch.float16,
    "fp16": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
}


def is_sentence_transformer(model: object) -> bool:
    """Whether ``model`` is a ``sentence_transformers.SentenceTransformer``."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:  # pragma: no cover - a declared dependency
        return False
    return isinstance(model, SentenceTransformer)


def _hub_file(repo_id: str, filename: str) -> Path | None:
    """A file of a Hub repository: from the local cache (offline) or downloaded; ``None`` if absent."""
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(repo_id=repo_id, filename=filename))
    except Exception:  # noqa: BLE001 - not on the Hub, not cached, offline, or not a repo id
        return None


def sentence_transformers_pooling_config(name: str) -> dict[str, Any] | None:
    """The sentence-transformers ``Pooling`` config of a model folder or Hub id, if it has one.

    The folder named by ``modules.json``'s Pooling entry is read (``1_Pooling`` when there is no
    ``modules.json``); for a Hub id, the files come from the Hugging Face cache, or the Hub when
    online. Returns ``None`` when there is none or it cannot be read.
    """
    local = Path(name).is_dir()

    def fetch(filename: str) -> Path | None:
        if local:
            path = Path(name) / filename
            return path if path.is_file() else None
        return _hub_file(name, filename)

    folder = "1_Pooling"
    modules = fetch("modules.json")
    try:
        if modules is not None:
            entries = json.loads(modules.read_text(encoding="utf-8"))
            for entry in entries:
                if str(entry.get("type", "")).endswith("Pooling"):
                    folder = str(entry.get("path") or folder)
                    break
        config = fetch(f"{folder}/config.json")
        return json.loads(config.read_text(encoding="utf-8")) if config is not None else None
    except (OSError, ValueError, AttributeError):
        return None


def resolve_device(device: str | torch.device | None, model: object = None) -> torch.device:
    """``None`` → the device of ``model`` when it is a loaded torch module (a caller's model is
    never moved behind its back), else ``cuda`` when a GPU is visible, else ``cpu``."""
    if device is not None:
        return torch.device(device)
    if isinstance(model, torch.nn.Module):
        first = next(model.parameters(), None)
        if first is not None:
            return first.device
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    """Accept ``torch.float16`` or its name (``"float16"``, ``"fp16"``, …); ``None`` stays ``None``.

    Raises:
        ValueError: for an unknown name.
    """
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be a torch dtype or one of {sorted(_DTYPES)}; got {dtype!r}")
    return _DTYPES[dtype]


@dataclass
class LoadedModel:
    """A model ready for one-pass extraction.

    Attributes:
        model: the SentenceTransformer or transformers model that is called.
        tokenizer: the tokenizer (``None`` for SentenceTransformers, which tokenize themselves).
        architecture: where its blocks and final norm are.
        name: a human-readable name (path or ``name_or_path``).
    """

    model: Any
    tokenizer: Any
    architecture: LocatedArchitecture
    name: str

    @property
    def is_sentence_transformer(self) -> bool:
        """Whether extraction goes through the SentenceTransformer pipeline."""
        return self.tokenizer is None


def looks_like_path(spec: str) -> bool:
    """Whether a model name is meant as a folder (``./m``, ``/m``, ``~/m``, ``a/b/c``), not a Hub id."""
    return (
        spec.startswith(("/", "./", "../", "~", ".\\")) or spec.endswith(("/", os.sep)) or spec.count("/") > 1
    )


def model_location(spec: str, what: str = "model") -> str:
    """A model name as it will be loaded: an existing folder (``~`` expanded), or a Hub id.

    Args:
        spec: a folder or a Hub id. what: how messages name it (``"model"``, ``"--model"``).

    Raises:
        NotADirectoryError: for a file. FileNotFoundError: for a path that does not exist.
    """
    path = Path(spec).expanduser()
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"{what} {spec} is a file; give the model's folder")
    if not path.exists() and looks_like_path(spec):
        raise FileNotFoundError(errno.ENOENT, f"{what} {spec}: no such folder")
    return str(path) if path.exists() else spec


@functools.cache
def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face Hub accepts a connection within ``timeout`` seconds (asked once per
    process). Without it, a load by id would spend about half a minute in the Hub client's retries
    before failing or falling back to the local cache."""
    from huggingface_hub import constants

    host = urllib.parse.urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def _from_pretrained(name: str, load: Any) -> Any:
    """``load(name, **options)``, with transformers' errors for a name it cannot find turned into one
    line. A Hub id is read from the local cache only (``local_files_only``) when ``HF_HUB_OFFLINE``
    is set or the Hub does not answer (:func:`hub_reachable`), so an unreachable Hub costs seconds,
    not the client's retries."""
    folder = Path(name).is_dir()
    offline_env = bool(os.environ.get("HF_HUB_OFFLINE"))
    unreachable = not folder and not offline_env and not hub_reachable()
    try:
        return load(name, local_files_only=True) if unreachable else load(name)
    except (OSError, ValueError) as err:
        if isinstance(err, ValueError) and not folder:
            raise
        if folder:
            reason = "a folder without a loadable model (config.json and weights, or modules.json)"
        else:
            reason = "no such folder, and not a model id that could be loaded from huggingface.co"
            if offline_env:
                reason += " (HF_HUB_OFFLINE is set: only models already in the Hugging Face cache load by id)"
            elif unreachable:
                reason += (
                    " (huggingface.co is unreachable from here and the id is not in the Hugging Face cache)"
                )
        message = f"model {name!r}: {reason}; pass a model folder"
        code = getattr(err, "errno", None)  # OSError(None, text) would print as "[Errno None] text"
        raise (OSError(code, message) if code is not None else OSError(message)) from err


def load_pretrained(
    name: str,
    *,
    head: str = "base",
    dtype: Any = None,
    device: str | None = None,
    revision: str | None = None,
    tokenizer: Any = None,
    sentence_transformer: bool | None = None,
) -> tuple[Any, Any]:
    """The one place a model is loaded from a folder or Hub id: ``(model, tokenizer)``.

    A sentence-transformers model (a folder with ``modules.json``, or ``sentence_transformer=True``
    for a Hub id known to be one) loads as a ``SentenceTransformer`` (tokenizer ``None``); anything
    else as a transformers model with its tokenizer (``tokenizer`` when given).

    Args:
        name: a folder (``~`` expanded) or a Hub id.
        head: ``"base"`` (``AutoModel``: hidden states only), ``"causal-lm"``
            (``AutoModelForCausalLM``) or ``"auto"`` (the causal-LM head for decoders, by the config).
        dtype: torch dtype or name (``None``: the checkpoint's own for transformers models).
        device / revision: passed to the loaders.

    Raises:
        ValueError: for an unknown ``head``.
        FileNotFoundError / NotADirectoryError / OSError: for a name that is no model, in one line.
    """
    if head not in ("base", "causal-lm", "auto"):
        raise ValueError(f"head must be 'base', 'causal-lm' or 'auto'; got {head!r}")
    location = model_location(name)
    if sentence_transformer is None:
        sentence_transformer = (Path(location) / "modules.json").is_file()
    if sentence_transformer:
        from sentence_transformers import SentenceTransformer

        model_kwargs = {"dtype": dtype} if dtype is not None else None
        return SentenceTransformer(
            location, device=device, revision=revision, model_kwargs=model_kwargs
        ), None
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

    loader: Any = AutoModelForCausalLM if head == "causal-lm" else AutoModel
    if head == "auto":
        config = _from_pretrained(
            location, lambda n, **o: AutoConfig.from_pretrained(n, revision=revision, **o)
        )
        decoder = bool(getattr(config, "is_decoder", False)) or any(
            a.endswith(("ForCausalLM", "LMHeadModel")) for a in (config.architectures or [])
        )
        loader = AutoModelForCausalLM if decoder else AutoModel
    model = _from_pretrained(
        location, lambda n, **o: loader.from_pretrained(n, dtype=dtype or "auto", revision=revision, **o)
    )
    if device is not None:
        model = model.to(device)
    if tokenizer is None:
        tokenizer = _from_pretrained(
            location, lambda n, **o: AutoTokenizer.from_pretrained(n, revision=revision, **o)
        )
    return model, tokenizer


def load_model(
    model: object,
    tokenizer: object = None,
    *,
    device: torch.device,
    dtype: torch.dtype | None = None,
) -> LoadedModel:
    """Load ``model`` (SentenceTransformer, transformers model, or a path / name of either).

    A folder with ``modules.json`` loads as a SentenceTransformer; any other path or name loads with
    ``AutoModel`` (the base model: no task head is needed for hidden states). Offline use needs a
    local path or a model already in the Hugging Face cache.

    Raises:
        UnsupportedArchitectureError: when the blocks cannot be located.
        ValueError: when a plain transformers model comes without a tokenizer and none can be loaded.
        FileNotFoundError / NotADirectoryError / OSError: for a name that is no model, in one line
            naming it (no such folder, a file, a folder without a model, a Hub id that cannot load).
    """
    if isinstance(model, (str, os.PathLike)):
        name = model_location(os.fspath(model))
        model, tokenizer = load_pretrained(
            name, head="base", dtype=dtype, device=str(device), tokenizer=tokenizer
        )
    else:
        name = str(getattr(getattr(model, "config", None), "name_or_path", "") or type(model).__name__)
    module: Any = model  # a SentenceTransformer or a transformers model (both torch modules)
    if is_sentence_transformer(module):
        architecture = locate(module)
        name = str(getattr(architecture.model.config, "name_or_path", "") or name)
        if dtype is not None:
            module.to(dtype)
        return LoadedModel(module.to(device).eval(), None, architecture, name)
    if tokenizer is None:
        path = getattr(getattr(model, "config", None), "name_or_path", None)
        if not path:
            raise ValueError("a transformers model needs its tokenizer: pass tokenizer=...")
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path)
    architecture = locate(module)
    if dtype is not None:
        module.to(dtype)
    return LoadedModel(module.to(device).eval(), tokenizer, architecture, name)
