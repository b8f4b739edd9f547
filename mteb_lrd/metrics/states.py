"""Input validation shared by every LRD metric: one array of per-layer pooled vectors in, clean fp32 out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "LayerReader",
    "PreparedStates",
    "normalise_rows",
    "prepare_states",
    "require_rows",
    "row_scale",
    "subsample",
]


@dataclass(frozen=True)
class PreparedStates:
    """Per-layer vectors ready for the metrics.

    Attributes:
        x: ``(L+1, N, d)`` float32, every row L2-normalised, only rows that are finite and non-zero
            at every layer.
        kept: indices (into the input's N axis) of the rows kept.
        n_dropped: rows excluded because some layer had NaN, Inf or a zero vector there.
    """

    x: np.ndarray
    kept: np.ndarray
    n_dropped: int

    @property
    def num_layers(self) -> int:
        """``L``: the number of transitions (hidden states are ``h_0 .. h_L``)."""
        return self.x.shape[0] - 1


def _to_numpy(states: object) -> np.ndarray:
    # torch tensors (CPU or GPU, any dtype) without importing torch here.
    if hasattr(states, "detach") and hasattr(states, "cpu"):
        tensor: Any = states.detach().cpu()
        if str(getattr(tensor, "dtype", "")) == "torch.bfloat16":
            tensor = tensor.float()
        states = tensor.numpy()
    try:
        return np.asarray(states)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"states must be an array-like of shape (L+1, N, d); got {type(states).__name__}"
        ) from err


def prepare_states(states: object, *, min_rows: int = 2, what: str = "this metric") -> PreparedStates:
    """Validate ``states`` of shape ``(L+1, N, d)``, drop bad rows, cast to fp32 and L2-normalise.

    A row (text) that is NaN, Inf or all-zero at *any* layer is dropped from *every* layer, so all
    layers keep describing the same texts; the count is reported.

    Args:
        states: numpy array, torch tensor or nested sequence, shape ``(L+1, N, d)``, real dtype.
        min_rows: the fewest valid rows ``what`` can work with.
        what: the caller's name, for error messages.

    Raises:
        TypeError: for non-numeric or complex input.
        ValueError: for a wrong shape, fewer than 2 layers, or too few valid rows.
    """
    arr = _to_numpy(states)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise TypeError(f"states must hold real numbers; got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError("states must be real; got a complex array")
    if arr.ndim != 3:
        raise ValueError(f"states must have shape (L+1, N, d) = (layers, texts, dims); got shape {arr.shape}")
    n_layers, n_rows, dim = arr.shape
    if n_layers < 2:
        raise ValueError(f"{what} needs at least 2 hidden states (h_0 and h_L); got {n_layers}")
    if dim < 1:
        raise ValueError("states have d = 0 dimensions")
    # One layer at a time: bounded extra memory.
    scale = np.stack([row_scale(arr[layer]) for layer in range(n_layers)])
    kept = np.flatnonzero((scale > 0).all(axis=0))
    require_rows(kept.size, n_rows, min_rows, what)
    x = np.empty((n_layers, kept.size, dim), dtype=np.float32)
    for layer in range(n_layers):
        x[layer] = normalise_rows(arr[layer, kept], scale[layer, kept])
    return PreparedStates(x=x, kept=kept, n_dropped=int(n_rows - kept.size))


@dataclass(frozen=True)
class LayerReader:
    """Per-layer vectors read one hidden state at a time, validated as :func:`prepare_states` does.

    A first pass over the layers finds the rows that are finite and non-zero at every layer;
    :meth:`unit` then returns one layer's kept rows L2-normalised, exactly as ``prepare_states``
    would (same rows, same bits), so a metric holds one layer, not all.

    Attributes:
        read_layer: ``l -> (N, d)`` vectors of hidden state ``l`` (the same N texts for every ``l``).
        num_states: ``L + 1``.
        kept: the rows usable at every layer. scale: ``(L+1, N)`` :func:`row_scale` of each layer.
    """

    read_layer: Callable[[int], np.ndarray]
    num_states: int
    kept: np.ndarray
    scale: np.ndarray

    @classmethod
    def of(
        cls, read_layer: Callable[[int], np.ndarray], num_states: int, *, min_rows: int, what: str
    ) -> LayerReader:
        """Validate: at least 2 hidden states and ``min_rows`` usable rows.

        Raises:
            ValueError: naming ``what`` otherwise.
        """
        if num_states < 2:
            raise ValueError(f"{what} needs at least 2 hidden states (h_0 and h_L); got {num_states}")
        scale = np.stack([row_scale(read_layer(layer)) for layer in range(num_states)])
        kept = np.flatnonzero((scale > 0).all(axis=0))
        require_rows(kept.size, scale.shape[1], min_rows, what)
        return cls(read_layer, num_states, kept, scale)

    @property
    def n_dropped(self) -> int:
        """Rows excluded for NaN, Inf or a zero vector at some layer."""
        return int(self.scale.shape[1] - self.kept.size)

    def unit(self, layer: int) -> np.ndarray:
        """``(n_kept, d)`` float32 L2-normalised kept rows of hidden state ``layer``."""
        return normalise_rows(self.read_layer(layer)[self.kept], self.scale[layer, self.kept])


def _work_dtype(rows: np.ndarray) -> type:
    return np.float64 if rows.dtype.itemsize > 4 and np.issubdtype(rows.dtype, np.floating) else np.float32


def row_scale(rows: np.ndarray) -> np.ndarray:
    """Largest magnitude of each row of ``(n, d)`` ``rows``; 0 for a zero row, NaN for a row with
    NaN or Inf — so ``row_scale(rows) > 0`` marks the rows the metrics can use."""
    rows = rows.astype(_work_dtype(rows), copy=False)
    with np.errstate(invalid="ignore"):
        scale = np.abs(rows).max(axis=1)
        scale[~np.isfinite(rows).all(axis=1)] = np.nan
    return scale


def normalise_rows(rows: np.ndarray, scale: np.ndarray | None = None) -> np.ndarray:
    """``(n, d)`` finite non-zero rows, L2-normalised, float32. Each row is divided by its largest
    magnitude before squaring, so rows far outside the fp32 range (or subnormal) normalise exactly.
    ``scale``: :func:`row_scale` of ``rows`` when the caller has it already."""
    work = _work_dtype(rows)
    if scale is None:
        scale = row_scale(rows)
    scaled = rows.astype(work) / scale[:, None]
    scaled /= np.sqrt(np.einsum("nd,nd->n", scaled, scaled))[:, None]
    return scaled.astype(np.float32, copy=False)


def require_rows(n_valid: int, n_rows: int, min_rows: int, what: str) -> None:
    """Raise ``ValueError`` when fewer than ``min_rows`` of ``n_rows`` rows are valid."""
    if n_valid < min_rows:
        raise ValueError(
            f"{what} needs at least {min_rows} valid rows (texts); got {n_valid} of {n_rows} "
            f"({n_rows - n_valid} dropped for NaN, Inf or zero vectors)"
        )


def subsample(n: int, cap: int | None, seed: int = 42) -> np.ndarray:
    """The reference's sub-sampling rule: all of ``range(n)`` when ``n <= cap``, else
    ``RandomState(seed).choice(n, cap, replace=False)`` sorted.

    Raises:
        ValueError: for a negative ``n`` or a ``cap`` below 1.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0; got {n}")
    if cap is None or n <= cap:
        return np.arange(n)
    if cap < 1:
        raise ValueError(f"cap must be >= 1 or None; got {cap}")
    return np.sort(np.random.RandomState(seed).choice(n, cap, replace=False))
