"""Spectrum scores of one embedding matrix: RankMe and α-ReQ, the label-free baselines of model selection."""

from __future__ import annotations

import numpy as np

__all__ = ["alpha_req", "rankme"]


def _embedding_matrix(x: object) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2 or min(a.shape) < 2:
        raise ValueError(f"embeddings must be an (N, D) matrix with N, D >= 2, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError("embeddings contain NaN or Inf")
    return a


def rankme(embeddings: object, eps: float = 1e-7) -> float:
    """RankMe (Garrido et al. 2023): ``exp(entropy)`` of the normalised singular values.

    ``p_k = σ_k / Σσ + eps``; returns ``exp(-Σ p_k log p_k)``, between 1 and min(N, D).
    """
    s = np.linalg.svd(_embedding_matrix(embeddings), compute_uv=False)
    if s.sum() <= 0:
        return 1.0
    p = s / s.sum() + eps
    return float(np.exp(-np.sum(p * np.log(p))))


def alpha_req(embeddings: object) -> float:
    """α-ReQ (Agrawal et al. 2022): decay exponent of the covariance eigenspectrum.

    Least-squares fit of ``log λ_i = -α log i + c`` over the non-zero eigenvalues of the centred
    covariance (``λ_i = σ_i² / N``). Closer to 1 is the paper's "better"; we report α itself.
    """
    a = _embedding_matrix(embeddings)
    s = np.linalg.svd(a - a.mean(axis=0), compute_uv=False)
    eig = s**2 / a.shape[0]
    eig = eig[eig > eig.max() * 1e-12] if eig.max() > 0 else eig[:0]
    if eig.size < 2:
        return float("nan")
    i = np.arange(1, eig.size + 1, dtype=np.float64)
    slope, _ = np.polyfit(np.log(i), np.log(eig), 1)
    return float(-slope)
