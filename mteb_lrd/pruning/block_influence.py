"""ShortGPT block influence: how much each transformer block changes its tokens' hidden states.

``BI_l = mean over real tokens of 1 − cos(h_l, h_{l+1})`` (Men et al. 2024, "ShortGPT"), where block
``l`` maps ``h_l`` to ``h_{l+1}``; padding is masked out and everything is computed in float32. A low
BI marks a block that barely moves its input, the ShortGPT pruning baseline. For decoders
transformers applies the final norm to ``h_L``; the last block is always protected in the study, so
this does not change any choice.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from mteb_lrd.extraction.loading import is_sentence_transformer, load_model, resolve_device

__all__ = ["block_influence", "block_influence_sums"]


def block_influence_sums(hidden_states: Sequence[torch.Tensor], attention_mask: torch.Tensor) -> torch.Tensor:
    """Sum over real tokens of ``1 − cos(h_l, h_{l+1})`` for every block of one batch.

    Args:
        hidden_states: L+1 tensors ``(B, T, d)``.
        attention_mask: ``(B, T)``, 1 for real tokens.

    Returns:
        A float64 tensor of L sums (divide by the number of real tokens for the mean).
    """
    h = torch.stack([s.float() for s in hidden_states])  # (L+1, B, T, d)
    cos = torch.nn.functional.cosine_similarity(h[:-1], h[1:], dim=-1, eps=1e-12)  # (L, B, T)
    mask = attention_mask.to(cos.dtype)
    return ((1.0 - cos) * mask).sum(dim=(1, 2)).double()


@torch.no_grad()
def block_influence(
    model: object,
    texts: Sequence[str],
    *,
    tokenizer: object = None,
    batch_size: int = 16,
    max_length: int = 512,
    device: str | None = None,
) -> np.ndarray:
    """Mean ShortGPT block influence of every block over the real tokens of ``texts``.

    Args:
        model: a SentenceTransformer, a transformers model, or a path to either.
        texts: the calibration texts (the study uses the task's own, label-free).
        tokenizer: for a plain transformers model (decoders: pass it explicitly).
        batch_size / max_length / device: as in extraction.

    Returns:
        ``(L,)`` float64 array; entry ``l`` belongs to block ``l`` (input ``h_l``, output ``h_{l+1}``).

    Raises:
        ValueError: for empty ``texts`` or a non-positive batch size.
    """
    if len(texts) == 0:
        raise ValueError("texts must not be empty")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    loaded = load_model(model, tokenizer, device=resolve_device(device, model))
    hf = loaded.architecture.model
    if is_sentence_transformer(loaded.model):
        tok = loaded.model.tokenizer
        max_length = min(max_length, int(loaded.model.max_seq_length or max_length))
    else:
        tok = loaded.tokenizer
    causal = loaded.architecture.spec.causal
    if causal and tok.pad_token is None:
        tok.pad_token = tok.eos_token
    total = torch.zeros(loaded.architecture.num_blocks, dtype=torch.float64)
    count = 0
    # Right padding: real tokens keep their natural positions and, in a causal model, never attend
    # to padding, so no position-id correction is needed for token-level statistics.
    padding_side = tok.padding_side
    tok.padding_side = "right"
    try:
        for start in range(0, len(texts), batch_size):
            batch = [t if t.strip() else " " for t in texts[start : start + batch_size]]
            enc = tok(batch, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
            enc = {
                k: v.to(hf.device)
                for k, v in enc.items()
                if k in ("input_ids", "attention_mask", "token_type_ids")
            }
            kwargs = {"use_cache": False} if causal else {}
            out = hf(**enc, output_hidden_states=True, return_dict=True, **kwargs)
            total += block_influence_sums(out.hidden_states, enc["attention_mask"]).cpu()
            count += int(enc["attention_mask"].sum())
    finally:
        tok.padding_side = padding_side
    return (total / max(count, 1)).numpy()
