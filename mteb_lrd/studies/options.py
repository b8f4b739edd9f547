"""The options of the studies, validated once: how every cell measures (:class:`CellOptions`,
shared by selection and pruning) and what the pruning study compares (:class:`PruneStudyOptions`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mteb_lrd.extraction.templates import resolve_template
from mteb_lrd.metrics.params import MetricParams
from mteb_lrd.metrics.summaries import REPRODUCE_MODES
from mteb_lrd.parameters import DEFAULT_CAPS, Caps
from mteb_lrd.pruning.choose import BUDGETS, RANDOM_SEEDS
from mteb_lrd.studies.runner import LRD_PROMPTS, TEXT_ORDERS

__all__ = ["CellOptions", "PruneStudyOptions"]


def _positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")


@dataclass(frozen=True)
class CellOptions:
    """How each (model, task) cell of a study is measured.

    Attributes:
        caps: per-family text caps (default the reference's 1000 / 1000 / 5000).
        seed: sub-sampling / anchor seed. batch_size: encode batch size. max_length: token truncation.
        lrd_kwargs: metric parameters (:class:`~mteb_lrd.parameters.MetricParams` fields).
        reproduce: ``"ours"`` or ``"authors"`` (their summaries, decoder last-token rule, pooling
            overrides, no LRD prompt); recorded in every cell.
        text_order: ``"interleaved"`` (the authors') or ``"columns"``.
        prompt_policy: ``"mteb"`` (the prompt of the MTEB run) or ``"none"``.
        decoder_template: the text template plain decoders read for scoring and LRD alike
            (``"prompteol"``, a text with ``{text}``, or ``None``: bare texts).

    Raises:
        ValueError: for any value outside its domain (before any model loads).
    """

    caps: Caps = DEFAULT_CAPS
    seed: int = 42
    batch_size: int = 32
    max_length: int = 512
    lrd_kwargs: Mapping[str, Any] = field(default_factory=dict)
    reproduce: str = "ours"
    text_order: str = "interleaved"
    prompt_policy: str = "mteb"
    decoder_template: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.caps, Caps):
            raise ValueError(f"caps must be a mteb_lrd.parameters.Caps, got {type(self.caps).__name__}")
        for name in ("batch_size", "max_length"):
            _positive(name, getattr(self, name))
        MetricParams(**dict(self.lrd_kwargs))  # the metric parameters' own checks
        if self.reproduce not in REPRODUCE_MODES:
            raise ValueError(f"reproduce must be one of {REPRODUCE_MODES}; got {self.reproduce!r}")
        if self.text_order not in TEXT_ORDERS:
            raise ValueError(f"text_order must be one of {TEXT_ORDERS}; got {self.text_order!r}")
        if self.prompt_policy not in LRD_PROMPTS:
            raise ValueError(f"prompt_policy must be one of {LRD_PROMPTS}; got {self.prompt_policy!r}")
        resolve_template(self.decoder_template)


@dataclass(frozen=True)
class PruneStudyOptions:
    """What the pruning study compares.

    Attributes:
        budgets: fractions of the candidate blocks to remove, each in (0, 1].
        protect: first and last layers never removed. mapping: ``"reference"`` (layer id l → block l)
            or ``"producer"`` (layer l → the block that produced it).
        random_seeds: seeds of the Random baseline. speed_texts: texts timed for the speed-up.
        all_subsets: sizes of candidate block sets to score exhaustively (e.g. ``(1, 2)``: every
            single block and every pair), the reference each rule's choice of that size is ranked
            against; ``()`` scores only the methods' choices.
        shared_prefix: encode a model's variants together, each from the state the full model or a
            smaller variant had where they part (:mod:`mteb_lrd.pruning.shared_prefix`; the vectors
            of the pruned copies, fewer blocks run);
            ``False``: each variant a pruned copy encoded on its own.

    Raises:
        ValueError: for a bad mapping, budget, count or subset size.
    """

    budgets: tuple[float, ...] = tuple(BUDGETS)
    protect: int = 3
    mapping: str = "reference"
    random_seeds: tuple[int, ...] = tuple(RANDOM_SEEDS)
    speed_texts: int = 64
    all_subsets: tuple[int, ...] = ()
    shared_prefix: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.shared_prefix, bool):
            raise ValueError(f"shared_prefix must be True or False, got {self.shared_prefix!r}")
        object.__setattr__(self, "all_subsets", tuple(sorted(set(self.all_subsets))))
        for size in self.all_subsets:
            _positive("all_subsets size", size)
        if self.mapping not in ("reference", "producer"):
            raise ValueError(f"mapping must be 'reference' or 'producer', got {self.mapping!r}")
        if not self.budgets or any(not 0 < b <= 1 for b in self.budgets):
            raise ValueError(f"budgets must be fractions in (0, 1], got {list(self.budgets)}")
        _positive("speed_texts", self.speed_texts)
        if isinstance(self.protect, bool) or not isinstance(self.protect, int) or self.protect < 0:
            raise ValueError(f"protect must be a non-negative integer; got {self.protect!r}")
