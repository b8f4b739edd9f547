"""Pure LRD mathematics: arrays in, small result objects out. No model, no I/O, no mteb."""

from __future__ import annotations

from mteb_lrd.metrics.frenet import FrenetResult, frenet, grassmann_distance, menger_curvature
from mteb_lrd.metrics.gfmi import GFMIResult, gfmi, mutual_information
from mteb_lrd.metrics.knn import knn
from mteb_lrd.metrics.lrd import LRDResult, lrd
from mteb_lrd.metrics.nrs import NRSResult, jaccard_retention, nrs
from mteb_lrd.metrics.states import prepare_states, subsample

__all__ = [
    "FrenetResult",
    "GFMIResult",
    "LRDResult",
    "NRSResult",
    "frenet",
    "gfmi",
    "grassmann_distance",
    "jaccard_retention",
    "knn",
    "lrd",
    "menger_curvature",
    "mutual_information",
    "nrs",
    "prepare_states",
    "subsample",
]
