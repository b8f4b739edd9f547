"""Texts → extraction → per-family sub-samples → LRD result: the glue every front end shares."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from mteb_lrd.extraction.extractor import LayerExtractor, LayerStates
from mteb_lrd.jsonable import to_jsonable
from mteb_lrd.metrics.frenet import frenet_by_layer
from mteb_lrd.metrics.gfmi import gfmi_by_layer
from mteb_lrd.metrics.lrd import LRDResult, lrd
from mteb_lrd.metrics.nrs import nrs_by_layer
from mteb_lrd.metrics.params import MetricParams
from mteb_lrd.metrics.summaries import REPRODUCE_MODES, authors_frenet_summary
from mteb_lrd.parameters import DEFAULT_CAPS, DEFAULT_PARAMS, DEFAULT_SEED, Caps, rows_union

__all__ = [
    "SHARED_SEARCH_BYTES",
    "LayerDynamics",
    "RowSource",
    "degenerate_input_warnings",
    "degenerate_layer_warnings",
    "layer_dynamics",
    "lrd_summary",
    "profile_texts",
]


SHARED_SEARCH_BYTES = 128 * 2**20
"""Largest sample of every state (float32) that one :func:`~mteb_lrd.lrd` call holds to share the kNN
search between NRS and GFMI; a larger one is measured one layer at a time."""


def lrd_summary(result: LRDResult, reproduce: str = "ours") -> dict[str, float]:
    """The flat model-level scores of ``result`` (``frenet_d0L``, ``nrs_mean_jaccard``, …).

    Args:
        result: an LRD result.
        reproduce: ``"ours"`` (:meth:`LRDResult.summary`: scores that read an uninformative state
            are NaN, summaries start at the first informative state) or ``"authors"`` (every value
            as computed, :meth:`LRDResult.unmasked`, and the Frenet summaries the released code
            defines differently, :func:`~mteb_lrd.metrics.summaries.authors_frenet_summary`; NRS and
            GFMI summaries are the same in both).

    Raises:
        ValueError: for an unknown mode.
    """
    if reproduce not in REPRODUCE_MODES:
        raise ValueError(f"reproduce must be one of {REPRODUCE_MODES}; got {reproduce!r}")
    if reproduce == "authors":
        result = result.unmasked()
    out = result.summary()
    if reproduce == "authors":
        f = result.frenet
        out.update({f"frenet_{k}": v for k, v in authors_frenet_summary(f.speed, f.curvature, f.d0L).items()})
    return out


@dataclass(frozen=True)
class LayerDynamics:
    """An LRD result together with how its inputs were chosen and extracted."""

    result: LRDResult
    caps: Caps
    seed: int
    n_texts: int
    extraction: dict[str, Any] = field(default_factory=dict)
    reproduce: str = "ours"

    def summary(self) -> dict[str, float]:
        """The model-level scores under this result's ``reproduce`` mode (:func:`lrd_summary`)."""
        return lrd_summary(self.result, self.reproduce)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable: the LRD profiles and summaries plus caps, seed, N and extraction settings."""
        out = (self.result if self.reproduce == "ours" else self.result.unmasked()).to_dict()
        if self.reproduce != "ours":
            out["summary"] = to_jsonable(self.summary())
            frenet = {k[len("frenet_") :]: v for k, v in self.summary().items() if k.startswith("frenet_")}
            out["frenet"]["summary"] = to_jsonable(frenet)
        return {
            **out,
            "reproduce": self.reproduce,
            "caps": asdict(self.caps),
            "seed": self.seed,
            "n_texts": self.n_texts,
            "extraction": self.extraction,
        }


def degenerate_input_warnings(states: np.ndarray) -> list[str]:
    """Why LRD numbers of ``states`` ``(L+1, N, d)`` would look normal but mean little.

    Returns:
        One message per problem: ``d = 1`` (every cosine is ±1, neighbourhoods are ties), fewer than
        4 distinct texts, more than half of the texts duplicates of others (neighbour ties dominate
        NRS and GFMI), identical vectors at every layer (the dynamics are zero by construction), or an
        earlier hidden state where more than half of the texts share their vector with another text: a
        CLS- or last-token-pooled model's embedding output ``h_0`` is the embedding of that one token, the
        same for every text that shares it (a decoder's last token under a text template: every text).
        Its top-r subspace is then not determined by the texts, so d0L and every score that uses that
        state measure tie-breaking, not the model.
    """
    return degenerate_layer_warnings(lambda layer: states[layer], states.shape[0])


def degenerate_layer_warnings(read_layer: Callable[[int], np.ndarray], num_states: int) -> list[str]:
    """:func:`degenerate_input_warnings` reading one hidden state at a time."""
    messages = []
    last = read_layer(num_states - 1)
    n, d = last.shape
    if d == 1:
        messages.append("the vectors have one dimension: every cosine is +1 or -1 and neighbours are ties")
    distinct = int(np.unique(last, axis=0).shape[0]) if n else 0
    if distinct < 4:
        messages.append(
            f"only {distinct} distinct vectors among {n} texts: too few for the metrics to mean much"
        )
    elif distinct < n / 2:
        messages.append(f"{n - distinct} of {n} texts duplicate others: neighbour ties dominate NRS and GFMI")
    if num_states > 1 and all(np.array_equal(last, read_layer(i)) for i in range(num_states - 1)):
        messages.append("every layer holds the same vectors: the dynamics are zero by construction")
    elif distinct >= n / 2:
        messages += _tied_state_warnings(read_layer, num_states, n)
    return messages


def _tied_state_warnings(read_layer: Callable[[int], np.ndarray], num_states: int, n: int) -> list[str]:
    """One message naming the hidden states before the last where fewer than half of the texts are distinct."""
    tied = {layer: count for layer in range(num_states - 1)
            if (count := int(np.unique(read_layer(layer), axis=0).shape[0])) < n / 2}  # fmt: skip
    if not tied:
        return []
    states = ", ".join(f"h_{layer} ({count} distinct)" for layer, count in tied.items())
    return [
        f"{states} of {n} texts: a CLS- or last-token-pooled model's embedding output is the embedding of "
        "that one token (under a text template, the same for every text), so the principal subspace and "
        "the neighbours of such a state are not determined by the texts; d0L, the speeds, curvatures and "
        "NRS retentions next to it, jaccard_first_last and its GFMI measure tie-breaking, not the model "
        "(a state that is one vector, of rank below r, or with fewer than k + 1 distinct vectors gives "
        "no number: those scores are undefined, with the reason, and summaries start after it)"
    ]


@dataclass(frozen=True)
class RowSource:
    """Per-layer vectors read by row: an in-memory array, or a disk-backed store.

    The LRD of a large task reads only the rows each family samples, each family one hidden state
    at a time, so its memory is one layer's, not all layers'.

    Attributes:
        num_states: ``L + 1``.
        num_rows: ``N``, the rows the indices refer to.
        all_layers: ``rows -> (L+1, len(rows), d)``.
        one_layer: ``(layer, rows) -> (len(rows), d)``.
    """

    num_states: int
    num_rows: int
    all_layers: Callable[[np.ndarray], np.ndarray]
    one_layer: Callable[[int, np.ndarray], np.ndarray]

    @classmethod
    def of(cls, states: np.ndarray) -> RowSource:
        """The rows of an ``(L+1, N, d)`` array."""
        return cls(
            states.shape[0],
            states.shape[1],
            lambda rows: states[:, rows],
            lambda layer, rows: states[layer, rows],
        )


def _dynamics_on_rows(
    source: RowSource, rows: dict[str, np.ndarray], seed: int, params: MetricParams
) -> LRDResult:
    p = params.clamped(rows["nrs"].size, rows["gfmi"].size)

    def reader(family: str) -> Callable[[int], np.ndarray]:
        return lambda layer: source.one_layer(layer, rows[family])

    for message in degenerate_layer_warnings(reader("frenet"), source.num_states):
        warnings.warn(f"mteb-lrd: degenerate input: {message}", UserWarning, stacklevel=3)
    same_rows = np.array_equal(rows["frenet"], rows["nrs"]) and np.array_equal(rows["nrs"], rows["gfmi"])
    width = source.one_layer(0, rows["frenet"][:1]).shape[1]
    if same_rows and rows["frenet"].size * source.num_states * width * 4 <= SHARED_SEARCH_BYTES:
        return lrd(
            source.all_layers(rows["frenet"]),
            rank=p.rank,
            var_threshold=p.var_threshold,
            nrs_k=p.nrs_k,
            n_anchors=p.n_anchors,
            seed=seed,
            gfmi_k=p.gfmi_k,
            percentiles=p.percentiles,
            backend=p.backend,
            device=p.device,
        )
    # Each family on its own rows, one hidden state at a time: one layer in memory, not all.
    f = frenet_by_layer(
        reader("frenet"), source.num_states, rank=p.rank, var_threshold=p.var_threshold, device=p.device
    )
    n = nrs_by_layer(
        reader("nrs"), source.num_states, k=p.nrs_k, n_anchors=p.n_anchors, seed=seed, backend=p.backend
    )
    g = gfmi_by_layer(
        reader("gfmi"),
        source.num_states,
        k=p.gfmi_k,
        percentiles=p.percentiles,
        backend=p.backend,
        device=p.device,
    )
    return LRDResult(
        f,
        n,
        g,
        n_input=source.num_rows,
        n_dropped=max(f.n_dropped, n.n_dropped, g.n_dropped),
        params={**asdict(p), "seed": seed},
    )


def layer_dynamics(
    states: np.ndarray | RowSource,
    caps: Caps = DEFAULT_CAPS,
    seed: int = DEFAULT_SEED,
    params: MetricParams = DEFAULT_PARAMS,
    rows: dict[str, np.ndarray] | None = None,
) -> LRDResult:
    """LRD of ``states`` ``(L+1, N, d)`` with each family on its own seeded sub-sample.

    When the three sub-samples coincide (``N`` at most every cap) and fit in
    :data:`SHARED_SEARCH_BYTES`, one :func:`~mteb_lrd.lrd` call shares the kNN search; otherwise
    each family runs on its own rows, one layer at a time (the same numbers).
    Neighbourhood sizes are clamped to ``N - 1`` of each family's sample (recorded in
    ``result.params``). ``states`` may be a :class:`RowSource` (e.g. a disk-backed store): only the
    sampled rows are read. ``rows``: each family's rows when drawn already (``caps.rows`` of a
    larger set whose drawn rows alone ``states`` holds); default ``caps.rows(N, seed)``. Degenerate
    input is looked for in the Frenet sample.
    """
    source = states if isinstance(states, RowSource) else RowSource.of(states)
    return _dynamics_on_rows(source, caps.rows(source.num_rows, seed) if rows is None else rows, seed, params)


def profile_texts(
    extractor: LayerExtractor,
    texts: Sequence[str],
    *,
    caps: Caps = DEFAULT_CAPS,
    seed: int = DEFAULT_SEED,
    prompt: str | None = None,
    params: MetricParams = DEFAULT_PARAMS,
    reproduce: str = "ours",
) -> tuple[LayerDynamics, LayerStates]:
    """Extract only the texts some family samples, then compute their layer dynamics.

    ``reproduce`` chooses the summary definitions (:func:`lrd_summary`); the extraction options of
    the authors' mode (``last_token="reference"``, ``pooling_overrides="reference"``, no prompt)
    belong to ``extractor`` and ``prompt``.

    Returns:
        The layer dynamics, and the extracted states of the sampled texts (the union of the
        families' rows, in ``texts`` order).
    """
    if reproduce not in REPRODUCE_MODES:
        raise ValueError(f"reproduce must be one of {REPRODUCE_MODES}; got {reproduce!r}")
    rows = caps.rows(len(texts), seed)
    union = rows_union(rows)
    extracted = extractor.extract([texts[i] for i in union], prompt=prompt)
    positions = {name: np.searchsorted(union, idx) for name, idx in rows.items()}
    result = _dynamics_on_rows(RowSource.of(extracted.states), positions, seed, params)
    info = {
        **extractor.describe(),
        "prompt": prompt,
        "n_empty_replaced": extracted.n_empty_replaced,
        "n_duplicates": extracted.n_duplicates,
    }
    return LayerDynamics(result, caps, seed, len(texts), info, reproduce), extracted
