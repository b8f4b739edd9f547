"""All three LRD families in one call, sharing one exact kNN search per layer.

NRS needs the k_nrs nearest neighbours of its anchors among all texts; GFMI needs the k_gfmi
nearest neighbours of every text. One search with ``max(k_nrs, k_gfmi)`` serves both (the first
k columns of a sorted k'-NN list are the k-NN list), where the reference searches twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from mteb_lrd.jsonable import to_jsonable
from mteb_lrd.keywords import options_or_keywords
from mteb_lrd.metrics.frenet import FrenetResult, frenet_of_units, frenet_on_unit_rows
from mteb_lrd.metrics.gfmi import GFMIResult, _validate_percentiles, build_gfmi_result, filtration_components
from mteb_lrd.metrics.informative import RowCheck, neighbour_reasons, reasons_by_state, row_check
from mteb_lrd.metrics.knn import knn, resolve_backend
from mteb_lrd.metrics.nrs import NRSResult, anchor_ids, build_nrs_result
from mteb_lrd.metrics.on_device import DeviceLayers, metrics_device, search_on_device
from mteb_lrd.metrics.params import MetricParams
from mteb_lrd.metrics.states import prepare_states

__all__ = ["LRDResult", "lrd", "to_jsonable"]


@dataclass(frozen=True)
class LRDResult:
    """Frenet, NRS and GFMI of one model on one set of texts, plus what was used to get them."""

    frenet: FrenetResult
    nrs: NRSResult
    gfmi: GFMIResult
    n_input: int
    n_dropped: int
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def num_layers(self) -> int:
        """``L``: transitions between the ``L+1`` hidden states."""
        return int(self.frenet.speed.size)

    def summary(self) -> dict[str, float]:
        """Flat model-level scores, ``d0L`` first: ``frenet_d0L``, ``nrs_mean_jaccard``, ``gfmi_mean_auc``, …"""
        out = {"frenet_d0L": self.frenet.d0L}
        for prefix, result in (("frenet", self.frenet), ("nrs", self.nrs), ("gfmi", self.gfmi)):
            out.update({f"{prefix}_{key}": value for key, value in result.summary().items()})
        return out

    @property
    def undefined(self) -> dict[str, dict[str, str]]:
        """Per family, the uninformative states whose scores are undefined and why
        (``{"frenet": {"h_0": "one vector for all texts"}, ...}``); empty when every state informs."""
        families = (("frenet", self.frenet), ("nrs", self.nrs), ("gfmi", self.gfmi))
        return {name: reasons_by_state(r.undefined) for name, r in families if r.undefined}

    def unmasked(self) -> LRDResult:
        """Every value as computed, uninformative states read like the others (``reproduce="authors"``)."""
        if not self.undefined:
            return self
        return replace(
            self, frenet=self.frenet.unmasked(), nrs=self.nrs.unmasked(), gfmi=self.gfmi.unmasked()
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable profiles, summaries and parameters (NaN written as ``None``); with an
        uninformative state, ``undefined`` (per family: state → reason) and each family's
        ``first_state``."""
        f, n, g = self.frenet, self.nrs, self.gfmi
        undefined = self.undefined
        if undefined:
            starts = {name: r.first_state for name, r in (("frenet", f), ("nrs", n), ("gfmi", g))}
            extra: dict[str, Any] = {"undefined": undefined, "first_state": starts}
        else:
            extra = {}
        return to_jsonable(
            {
                "num_layers": self.num_layers,
                "n_input": self.n_input,
                "n_used": f.n_used,
                "n_dropped": self.n_dropped,
                "params": self.params,
                "frenet": {
                    "speed": f.speed,
                    "curvature": f.curvature,
                    "d0L": f.d0L,
                    "rank": f.rank,
                    "summary": f.summary(),
                },
                "nrs": {
                    "jaccard": n.jaccard,
                    "first_last": n.first_last,
                    "k": n.k,
                    "n_anchors": n.n_anchors,
                    "jaccard_ci": None if n.jaccard_ci is None else n.jaccard_ci.to_dict(),
                    "summary": n.summary(),
                },
                "gfmi": {
                    "auc": g.auc,
                    "peak_mi": g.peak_mi,
                    "peak_percentile": g.peak_percentile,
                    "percentiles": g.percentiles,
                    "k": g.k,
                    "summary": g.summary(),
                },
                "summary": self.summary(),
                **extra,
            }
        )


def lrd(
    states: object,
    *,
    rank: int | None = None,
    var_threshold: float = MetricParams.var_threshold,
    nrs_k: int = MetricParams.nrs_k,
    n_anchors: int = MetricParams.n_anchors,
    seed: int = 42,
    gfmi_k: int = MetricParams.gfmi_k,
    percentiles: object = None,
    backend: str = "auto",
    params: MetricParams | None = None,
    device: str | None = MetricParams.device,
) -> LRDResult:
    """Run Frenet, NRS and GFMI on ``states`` of shape ``(L+1, N, d)``.

    Numbers equal those of :func:`~mteb_lrd.frenet`, :func:`~mteb_lrd.nrs` and :func:`~mteb_lrd.gfmi`
    called separately with the same parameters; the kNN search is done once per layer. The metric
    parameters are the keywords, or one validated :class:`~mteb_lrd.metrics.params.MetricParams`
    (``params=``; the keywords then stay at their defaults).

    ``device`` (:func:`~mteb_lrd.metrics.on_device.metrics_device`; also ``params.device``): by
    default (``"auto"``) a tensor on a GPU is measured there, anything else on a CUDA device when
    torch sees one, else in numpy; ``None``: numpy; a torch device name (``"cuda"``, ``"cpu"``)
    runs the torch path there (:mod:`~mteb_lrd.metrics.on_device`), one hidden state at a time, with the same
    numbers within rounding (float64 subspaces, float32 neighbours; ``backend`` is then unused).

    Raises:
        ValueError: as the three functions do (fewer than 2 layers, ``N <= k``, bad parameters), or
            ``params`` together with a metric keyword.
    """
    if params is not None:
        options_or_keywords(MetricParams, params, "params", rank=rank, var_threshold=var_threshold, nrs_k=nrs_k,
                            n_anchors=n_anchors, gfmi_k=gfmi_k, percentiles=percentiles, backend=backend,
                            device=device)  # fmt: skip
        rank, var_threshold, nrs_k, n_anchors = (
            params.rank,
            params.var_threshold,
            params.nrs_k,
            params.n_anchors,
        )
        gfmi_k, percentiles, backend, device = (
            params.gfmi_k,
            params.percentiles,
            params.backend,
            params.device,
        )
    for name, value in (("nrs_k", nrs_k), ("gfmi_k", gfmi_k)):
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer; got {value!r}")
    p = _validate_percentiles(percentiles)
    resolve_backend(backend)
    k_max = max(nrs_k, gfmi_k)
    on = metrics_device(device, states)
    what = f"lrd with k={k_max}"
    if on is None:
        prepared = prepare_states(states, min_rows=k_max + 1, what=what)
        x = prepared.x
        frenet_result = frenet_on_unit_rows(x, rank, var_threshold, n_dropped=prepared.n_dropped)
        n, n_dropped = x.shape[1], prepared.n_dropped
        anchors = anchor_ids(n, n_anchors, seed)
        searched = (_search_numpy_layer(layer, k_max, nrs_k, gfmi_k, p, backend, anchors) for layer in x)
    else:
        layers = DeviceLayers.of(states, on, min_rows=k_max + 1, what=what)
        n, n_dropped = layers.kept.size, layers.n_dropped
        frenet_result = frenet_of_units(layers.unit, layers.num_states, rank, var_threshold, n_dropped, on)
        anchors = anchor_ids(n, n_anchors, seed)
        searched = (search_on_device(layers.unit(state), k_max, nrs_k, gfmi_k, p, anchors)
                    for state in range(layers.num_states))  # fmt: skip
    checks, anchor_neighbours, components = zip(*searched, strict=True)
    nrs_result = build_nrs_result(
        np.stack(anchor_neighbours), neighbour_reasons(checks, int(nrs_k)), int(nrs_k), n, n_dropped
    )
    gfmi_undefined = neighbour_reasons(checks, int(gfmi_k))
    gfmi_result = build_gfmi_result(np.stack(components), p, gfmi_k, n, n_dropped, gfmi_undefined)
    recorded = {
        "rank": rank,
        "var_threshold": var_threshold,
        "nrs_k": nrs_k,
        "n_anchors": n_anchors,
        "seed": seed,
        "gfmi_k": gfmi_k,
        "backend": resolve_backend(backend) if on is None else f"torch ({on})",
    }
    return LRDResult(frenet_result, nrs_result, gfmi_result, int(n + n_dropped), n_dropped, recorded)


def _search_numpy_layer(
    layer: np.ndarray, k_max: int, nrs_k: int, gfmi_k: int, p: np.ndarray, backend: str, anchors: np.ndarray
) -> tuple[RowCheck, np.ndarray, np.ndarray]:
    """One state's row check, anchors' NRS neighbours and GFMI filtration from one kNN search."""
    sims, idx = knn(layer, k_max, backend=backend)
    components = filtration_components(1.0 - sims[:, :gfmi_k].astype(np.float64), idx[:, :gfmi_k], p)
    return row_check(layer), idx[anchors, :nrs_k], components
