"""What :func:`~mteb_lrd.pruning.pruned.pruned_copy` removes and how it names the result: one frozen,
validated options object, the keywords of ``prune`` one to one."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from mteb_lrd.pruning.rules import BLOCK_MAPPINGS, RULES

__all__ = ["PruneOptions"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PruneOptions:
    """The blocks to remove, or the rule and budget that choose them, and the base model's name.

    Attributes:
        blocks: indices of the blocks to remove (checked against the model when it is pruned).
        rule: ``frenet``, ``nrs``, ``gfmi`` or ``composite`` to choose the blocks; with ``blocks``,
            any label of how they were chosen (recorded only).
        budget: the pruning budget, a fraction in ``(0, 1]``.
        texts: profiling texts for ``rule`` (``None``: the bundled STS Benchmark sample).
        mapping: hidden-state id → block mapping for ``rule`` (``reference`` or ``producer``).
        name / revision: the base model's name and revision for mteb results.

    Raises:
        ValueError: for neither blocks nor rule and budget, a bad rule, budget or mapping.
    """

    blocks: tuple[int, ...] | None = None
    rule: str | None = None
    budget: float | None = None
    texts: tuple[str, ...] | None = None
    mapping: str = "reference"
    name: str | None = None
    revision: str | None = None

    def __post_init__(self) -> None:
        for name in ("blocks", "texts"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
                    raise ValueError(f"{name} must be a sequence; got {type(value).__name__}")
                object.__setattr__(self, name, tuple(value))
        rule, budget = self.rule, self.budget
        if rule is not None and (not isinstance(rule, str) or not rule.strip()):
            raise ValueError(f"rule must be a non-empty string naming the selection rule, got {rule!r}")
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 < budget <= 1
        ):
            raise ValueError(f"budget must be a fraction in (0, 1], got {budget!r}")
        if self.mapping not in BLOCK_MAPPINGS:
            raise ValueError(f"mapping must be one of {BLOCK_MAPPINGS}, got {self.mapping!r}")
        if self.blocks is None and (rule is None or budget is None):
            raise ValueError(
                "give blocks=[...] to remove, or rule= (frenet, nrs, gfmi, composite) and budget= to choose them"
            )
        if self.blocks is not None and rule is not None and rule not in RULES:
            logger.info("rule %r is recorded as given (rules that choose blocks: %s)", rule, RULES)
