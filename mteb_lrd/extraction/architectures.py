"""Where each transformer architecture keeps its blocks: the one table every module consults.

Extraction (hidden states, final norm), surgery (removing or skipping blocks) and DySem (hooks on
attention / MLP sub-layers) all need to know the same few paths inside a model. They live here,
once, in the spirit of tuned-lens' ``get_transformer_layers``.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

__all__ = [
    "ArchitectureSpec",
    "LocatedArchitecture",
    "UnsupportedArchitectureError",
    "ARCHITECTURES",
    "locate",
    "unwrap_transformers_model",
]


class UnsupportedArchitectureError(ValueError):
    """Raised when a model's blocks cannot be found with any known layout."""


@dataclass(frozen=True)
class ArchitectureSpec:
    """One known layout of a transformer.

    Attributes:
        name: a short family name (``"bert"``, ``"llama"``, ``"gpt2"``).
        blocks: dotted path from the model to the ``nn.ModuleList`` of blocks.
        final_norm: dotted path to the norm applied after the last block (decoders), or ``None``.
        causal: whether the model attends causally (decoders pool the last token by default).
        attention: attribute of a block holding its self-attention sub-layer (output projection
            included), or ``None`` when the block layout has none we support.
        mlp: attribute of a block holding its feed-forward sub-layer.
    """

    name: str
    blocks: str
    final_norm: str | None
    causal: bool
    attention: str | None
    mlp: str | None


# Order matters: the first layout whose paths resolve wins. Task-head wrappers (``*ForCausalLM``,
# ``GPT2LMHeadModel``) are covered by their own rows so a user may pass either form.
ARCHITECTURES: tuple[ArchitectureSpec, ...] = (
    ArchitectureSpec("bert", "encoder.layer", None, False, "attention", "output"),
    ArchitectureSpec("bert-task-head", "bert.encoder.layer", None, False, "attention", "output"),
    ArchitectureSpec("roberta-task-head", "roberta.encoder.layer", None, False, "attention", "output"),
    ArchitectureSpec("llama", "layers", "norm", True, "self_attn", "mlp"),
    ArchitectureSpec("llama-causal-lm", "model.layers", "model.norm", True, "self_attn", "mlp"),
    ArchitectureSpec("gpt2", "h", "ln_f", True, "attn", "mlp"),
    ArchitectureSpec("gpt2-lm-head", "transformer.h", "transformer.ln_f", True, "attn", "mlp"),
)


@dataclass
class LocatedArchitecture:
    """An architecture resolved on a concrete model instance."""

    spec: ArchitectureSpec
    model: nn.Module
    blocks: nn.ModuleList
    blocks_parent: nn.Module
    blocks_attribute: str
    final_norm: nn.Module | None

    @property
    def num_blocks(self) -> int:
        """Number of transformer blocks ``L`` (hidden states are ``h_0 .. h_L``)."""
        return len(self.blocks)


def _resolve(root: nn.Module, path: str) -> nn.Module | None:
    obj: object = root
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj if isinstance(obj, nn.Module) else None


def unwrap_transformers_model(model: object) -> nn.Module:
    """Return the transformers ``PreTrainedModel`` inside a SentenceTransformer, or the model itself.

    Raises:
        UnsupportedArchitectureError: when no torch module can be found.
    """
    # sentence-transformers 6: the first module is a Transformer whose ``model`` is the HF model.
    first = None
    try:
        first = model[0]  # type: ignore[index]
    except (TypeError, IndexError, KeyError, NotImplementedError):
        first = None
    for candidate in (getattr(first, "model", None), getattr(first, "auto_model", None)):
        if isinstance(candidate, nn.Module):
            return candidate
    if isinstance(model, nn.Module):
        return model
    raise UnsupportedArchitectureError(
        f"expected a SentenceTransformer or a transformers model, got {type(model).__name__}"
    )


def locate(model: object) -> LocatedArchitecture:
    """Find the block list, final norm and family of ``model``.

    Args:
        model: a transformers model (base or with a task head) or a SentenceTransformer.

    Returns:
        The resolved layout.

    Raises:
        UnsupportedArchitectureError: naming the model class and the paths that were tried.
    """
    hf_model = unwrap_transformers_model(model)
    for spec in ARCHITECTURES:
        blocks = _resolve(hf_model, spec.blocks)
        if not isinstance(blocks, nn.ModuleList) or len(blocks) == 0:
            continue
        parent_path, _, attribute = spec.blocks.rpartition(".")
        parent = _resolve(hf_model, parent_path) if parent_path else hf_model
        if parent is None:  # pragma: no cover - the blocks were found under this path
            continue
        final_norm = _resolve(hf_model, spec.final_norm) if spec.final_norm else None
        if spec.final_norm and final_norm is None:
            continue
        return LocatedArchitecture(spec, hf_model, blocks, parent, attribute, final_norm)
    tried = ", ".join(spec.blocks for spec in ARCHITECTURES)
    raise UnsupportedArchitectureError(
        f"cannot find the transformer blocks of {type(hf_model).__name__} "
        f"(model_type={getattr(getattr(hf_model, 'config', None), 'model_type', '?')!r}); "
        f"tried the block lists {tried}. Supported: BERT/MPNet/XLM-R-style encoders, "
        "Llama/Qwen2/Mistral/Gemma-style decoders and GPT-2-style decoders."
    )
