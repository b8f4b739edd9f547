"""The LRD families' heavy steps in torch on the device of their input (a GPU when there is one).

The numpy path (:mod:`~mteb_lrd.metrics.frenet`, :mod:`~mteb_lrd.metrics.nrs`,
:mod:`~mteb_lrd.metrics.gfmi`) stays the definition; this module runs the same steps where the
pooled vectors already are, one hidden state at a time, and hands back only small results:

* validation and L2-normalisation of the rows (float32, as :func:`~mteb_lrd.metrics.states.prepare_states`);
* Frenet's principal subspaces and Grassmann distances in **float64** (a float32 scatter drifts the
  subspaces of near-isotropic layers by ~1e-6 rad, more than the CPU path's differences);
* the exact k-nearest-neighbour search in **float32** with TF32 off (as the CPU search: near-ties
  would flip neighbours);
* GFMI's filtration at every percentile at once: min-label propagation with pointer jumping over
  the kNN edges stacked by level (float64 distances, the thresholds from one sort, as numpy's
  linear percentile).

What leaves the device per state: the spectrum (``d`` or ``N`` floats), the anchors' neighbour ids
and the ``(P, N)`` component labels; mutual information and the summaries are computed from those
on the CPU (milliseconds a state).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mteb_lrd.metrics.informative import SPREAD_TOL, RowCheck, spread_rank
from mteb_lrd.metrics.states import require_rows

if TYPE_CHECKING:
    from torch import Tensor

__all__ = [
    "DeviceLayers",
    "TorchSubspaces",
    "filtration_components_on_device",
    "knn_on_device",
    "metrics_device",
    "row_check_on_device",
    "search_on_device",
    "torch_rows",
]


def _torch() -> Any:
    import torch

    return torch


def metrics_device(device: str | None, states: object = None) -> str | None:
    """The torch device the metrics run on, or ``None`` for the numpy path.

    ``"auto"`` (the default everywhere): the device of ``states`` when it is a tensor on a GPU,
    else the first CUDA device when torch sees one, else the numpy path. ``None``: the numpy path
    (a GPU tensor is copied to the CPU). Any other value is a torch device (``"cpu"`` runs the
    torch path on the CPU).

    Raises:
        ValueError: for a device torch does not know or cannot use here.
    """
    if device is None:
        return None
    if device == "auto":
        where = getattr(states, "device", None)
        if where is not None and getattr(where, "type", "cpu") != "cpu":
            return str(where)
        try:
            torch = _torch()
        except ImportError:
            return None
        return "cuda" if torch.cuda.is_available() else None
    try:
        torch = _torch()
    except ImportError as err:
        raise ValueError(f"device={device!r} needs the torch package") from err
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device must be 'auto', None or a torch device; got {device!r}") from err
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r}: torch sees no CUDA device here")
    return str(resolved)


@dataclass(frozen=True)
class DeviceLayers:
    """``(L+1, N, d)`` vectors validated on their device: the rows finite and non-zero at every
    layer kept, each layer L2-normalised in float32 when read.

    Attributes:
        states: the input as a tensor on ``device``. kept: the rows kept (a CPU index array).
        n_dropped: rows excluded for NaN, Inf or a zero vector at some layer.
    """

    states: Tensor
    kept: np.ndarray
    n_dropped: int

    @classmethod
    def of(cls, states: object, device: str, *, min_rows: int, what: str) -> DeviceLayers:
        """Validate as :func:`~mteb_lrd.metrics.states.prepare_states` does, on ``device``.

        Raises:
            TypeError: for a non-real input. ValueError: for a wrong shape, fewer than 2 states or
            too few valid rows.
        """
        torch = _torch()
        tensor = torch.as_tensor(states, device=device)
        if tensor.is_complex():
            raise TypeError(f"states must be real; got dtype {tensor.dtype}")
        if tensor.ndim != 3:
            raise ValueError(f"states must have shape (L+1, N, d); got shape {tuple(tensor.shape)}")
        if tensor.shape[0] < 2:
            raise ValueError(f"{what} needs at least 2 hidden states (h_0 and h_L); got {tensor.shape[0]}")
        if tensor.shape[2] < 1:
            raise ValueError("states have d = 0 dimensions")
        usable = torch.ones(tensor.shape[1], dtype=torch.bool, device=tensor.device)
        for layer in tensor:  # one layer at a time: bounded extra memory
            work = layer.to(_work_dtype(torch, layer))
            usable &= torch.isfinite(work).all(dim=1) & (work.abs().amax(dim=1) > 0)
        kept = torch.nonzero(usable).flatten().cpu().numpy()
        require_rows(kept.size, tensor.shape[1], min_rows, what)
        return cls(tensor, kept, int(tensor.shape[1] - kept.size))

    @property
    def num_states(self) -> int:
        """``L + 1``."""
        return int(self.states.shape[0])

    def unit(self, layer: int) -> Tensor:
        """``(n_kept, d)`` float32 L2-normalised kept rows of hidden state ``layer``, on the device."""
        return unit_rows(self.states[layer][self.kept])


def _work_dtype(torch: Any, rows: Any) -> Any:
    return torch.float64 if rows.is_floating_point() and rows.element_size() > 4 else torch.float32


def torch_rows(rows: object, device: str) -> Tensor:
    """``rows`` (numpy or a tensor) as a tensor on ``device``."""
    return _torch().as_tensor(rows, device=device)


def unit_rows(rows: Tensor) -> Tensor:
    """Finite non-zero ``(n, d)`` rows L2-normalised in float32 as
    :func:`~mteb_lrd.metrics.states.normalise_rows` does: divided by their largest magnitude first."""
    torch = _torch()
    work = rows.to(_work_dtype(torch, rows))
    scaled = work / work.abs().amax(dim=1, keepdim=True)
    scaled = scaled / torch.sqrt((scaled * scaled).sum(dim=1, keepdim=True))
    return scaled.to(torch.float32)


def row_check_on_device(rows: Tensor) -> RowCheck:
    """:func:`~mteb_lrd.metrics.informative.row_check` of L2-normalised rows on their device."""
    torch = _torch()
    centred = rows - rows.to(torch.float64).mean(dim=0).to(rows.dtype)
    spread = float(torch.sqrt((centred * centred).sum() / max(rows.shape[0], 1)))
    direction = np.random.default_rng(0).standard_normal(rows.shape[1])
    projection = rows @ torch.as_tensor(direction, dtype=rows.dtype, device=rows.device)
    return RowCheck(one_vector=spread <= SPREAD_TOL, distinct=int(torch.unique(projection).numel()))


@dataclass(frozen=True)
class TorchSubspaces:
    """Frenet's linear algebra on ``device`` in float64: the same decompositions as the numpy path
    (the d×d scatter when ``N >= d``, the N×N Gram matrix otherwise), bases as tensors there."""

    device: str

    def _centred(self, rows: Tensor) -> Tensor:
        torch = _torch()
        centred = torch.as_tensor(rows, device=self.device).to(torch.float64)
        return centred - centred.mean(dim=0)

    def eig(self, rows: Tensor) -> tuple[np.ndarray, Tensor]:
        """``(S² descending on the CPU, V (d, m) on the device)`` as ``_centred_covariance_eig``."""
        torch = _torch()
        centred = self._centred(rows)
        n, d = centred.shape
        if n >= d:
            values, vectors = torch.linalg.eigh(centred.T @ centred)
            return np.clip(values.flip(0).cpu().numpy(), 0.0, None), vectors.flip(1)
        values, vectors = torch.linalg.eigh(centred @ centred.T)
        values = values.flip(0).clamp(min=0.0)
        singular = torch.sqrt(values)
        directions = centred.T @ vectors.flip(1)
        nonzero = (
            singular > singular[0] * 1e-12
            if singular[0] > 0
            else torch.zeros_like(singular, dtype=torch.bool)
        )
        directions[:, nonzero] /= singular[nonzero]
        directions[:, ~nonzero] = 0.0
        return values.cpu().numpy(), directions

    def basis(self, v: Tensor, r: int) -> Tensor:
        """``_basis`` on the device: the top-r directions, their complement when smaller (complete
        basis), or a QR-completed basis from the Gram directions."""
        d, m = v.shape
        if m == d:
            return v[:, r:] if r > d - r else v[:, :r]
        return _torch().linalg.qr(v[:, :r])[0]

    def layer_basis(self, rows: Tensor, r: int) -> tuple[Tensor, int]:
        """A state's basis and its spread rank capped at ``r``."""
        s2, v = self.eig(rows)
        return self.basis(v, r), min(spread_rank(s2, int(rows.shape[0])), r)

    def distance(self, q_a: Tensor, q_b: Tensor) -> float:
        """Arc-length Grassmann distance, as :func:`~mteb_lrd.metrics.frenet.grassmann_distance`."""
        torch = _torch()
        sigma = torch.linalg.svdvals(q_a.T @ q_b)
        return float(torch.sqrt((torch.arccos(sigma.clamp(-1.0, 1.0)) ** 2).sum()))


def knn_on_device(x: Tensor, k: int, block_rows: int = 4096) -> tuple[Tensor, Tensor]:
    """Every row's ``k`` most similar rows of ``x`` (L2-normalised, on its device), itself excluded by
    index, sorted by decreasing similarity and equal similarities by increasing index, as
    :func:`~mteb_lrd.metrics.knn.knn`; float32 products with TF32 off, ``block_rows`` rows a product.

    Returns:
        ``(similarities (N, k) float32, indices (N, k) int64)`` on the device.

    Raises:
        ValueError: for ``k`` out of range.
    """
    torch = _torch()
    n = x.shape[0]
    if not 1 <= k < n:
        raise ValueError(f"k must satisfy 1 <= k < N (N = {n} rows); got k = {k}")
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        sims, where = [], []
        for start in range(0, n, block_rows):  # blocks bound memory to block_rows x N
            block = x[start : start + block_rows] @ x.T
            rows = torch.arange(block.shape[0], device=x.device)
            block[rows, rows + start] = -torch.inf  # self, excluded by index
            values, found = torch.topk(block, k, dim=1, sorted=True)
            sims.append(values)
            where.append(found)
    finally:
        torch.set_float32_matmul_precision(precision)
    values, found = torch.cat(sims), torch.cat(where)
    if k > 1 and not bool((values[:, 1:] < values[:, :-1]).all()):  # ties: by index among equals
        by_index = torch.sort(found, dim=1, stable=True).indices
        values, found = values.gather(1, by_index), found.gather(1, by_index)
        order = torch.sort(-values, dim=1, stable=True).indices
        values, found = values.gather(1, order), found.gather(1, order)
    return values, found


def _linear_percentiles(values: Tensor, percentiles: np.ndarray) -> Tensor:
    """numpy's linear-method percentiles of a float64 tensor, from one sort, with its arithmetic."""
    torch = _torch()
    ordered = torch.sort(values.flatten()).values
    virtual = (ordered.numel() - 1) * (np.asarray(percentiles, dtype=np.float64) / 100)
    below = np.floor(virtual)
    gamma = torch.as_tensor(virtual - below, device=values.device)
    below = below.astype(np.int64)
    lower = ordered[torch.as_tensor(below, device=values.device)]
    upper = ordered[torch.as_tensor(np.minimum(below + 1, ordered.numel() - 1), device=values.device)]
    diff = upper - lower
    return torch.where(gamma >= 0.5, upper - diff * (1 - gamma), lower + diff * gamma)


def filtration_components_on_device(distances: Tensor, neighbours: Tensor, percentiles: np.ndarray) -> Tensor:
    """:func:`~mteb_lrd.metrics.gfmi.filtration_components` on the device of its inputs.

    Every level's graph at once: node ``v`` of level ``j`` is ``j·N + v``, and each kNN edge is
    repeated at every level that keeps it (distance ≤ τ_j). Components come from min-label
    propagation (each endpoint takes the smaller label of an edge, ``scatter_reduce``) followed by
    pointer jumping (``label = label[label]``) until nothing changes: a handful of vectorised
    rounds, no loop over levels, edges or samples.

    Returns:
        ``(P, N)`` labels on the device; a component's label is its smallest node id, in ``0 .. N-1``.
    """
    torch = _torch()
    n, k = distances.shape
    flat = distances.flatten()
    thresholds = _linear_percentiles(flat, percentiles)
    levels = thresholds.numel()
    entry = torch.searchsorted(thresholds, flat, side="left")  # first level keeping each edge
    copies = (levels - entry).clamp(min=0)
    edge = torch.repeat_interleave(torch.arange(flat.numel(), device=flat.device), copies)
    first = torch.repeat_interleave(torch.cumsum(copies, 0) - copies, copies)
    level = entry[edge] + torch.arange(edge.numel(), device=flat.device) - first
    source = level * n + torch.div(edge, k, rounding_mode="floor")
    target = level * n + neighbours.flatten()[edge]
    labels = torch.arange(levels * n, device=flat.device)
    while True:
        before = labels
        low = torch.minimum(labels[source], labels[target])
        labels = labels.scatter_reduce(0, source, low, "amin").scatter_reduce(0, target, low, "amin")
        jumped = labels[labels]
        while not torch.equal(jumped, labels):  # pointer jumping: every node to its root
            labels, jumped = jumped, jumped[jumped]
        if torch.equal(labels, before):
            break
    return labels.view(levels, n) - torch.arange(levels, device=flat.device)[:, None] * n


def search_on_device(
    rows: Tensor, k_max: int, nrs_k: int, gfmi_k: int, percentiles: np.ndarray, anchors: np.ndarray
) -> tuple[RowCheck, np.ndarray, np.ndarray]:
    """One state's row check, its anchors' ``nrs_k`` neighbours and its GFMI filtration labels
    ``(P, N)`` from one kNN search on the device of ``rows``; the last two as CPU arrays."""
    torch = _torch()
    sims, idx = knn_on_device(rows, k_max)
    labels = filtration_components_on_device(
        1.0 - sims[:, :gfmi_k].to(torch.float64), idx[:, :gfmi_k], percentiles
    )
    anchor_rows = torch.as_tensor(anchors, device=rows.device)
    return row_check_on_device(rows), idx[anchor_rows, :nrs_k].cpu().numpy(), labels.cpu().numpy()
