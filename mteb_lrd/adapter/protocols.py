"""What the MTEB seams, the per-subset augmentation and the per-layer scoring need of the
layer-dynamics encoder, as a Protocol, and the text helpers they share.

mteb keeps ``EncoderProtocol`` apart from its models; likewise the modules that drive the wrapper
(:mod:`~mteb_lrd.adapter.seams`, :mod:`~mteb_lrd.adapter.augmentation`,
:mod:`~mteb_lrd.adapter.layer_scoring`) depend on this module, not on
:mod:`~mteb_lrd.adapter.wrapper`, so the wrapper can install the seams without an import circle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from mteb.types import BatchedInput, PromptType

if TYPE_CHECKING:  # pragma: no cover
    from mteb.abstasks.task_metadata import TaskMetadata

    from mteb_lrd.adapter.background_dynamics import BackgroundDynamics
    from mteb_lrd.adapter.options import LayerDynamicsOptions
    from mteb_lrd.storage.lrd_sample import LRDSample
    from mteb_lrd.storage.memory_plan import MemoryPlan
    from mteb_lrd.storage.vector_store import TextKey, VectorStore

__all__ = ["CallKey", "LayerDynamicsEncoder", "TextReader", "read_texts"]

CallKey = tuple[str, str, str]
"""``(task name, hf_split, hf_subset)`` of one ``encode`` call."""

TextReader = Callable[[Iterable[BatchedInput]], list[str]]
"""Reads the texts of an ``encode`` input."""


def read_texts(inputs: Iterable[BatchedInput]) -> list[str]:
    """The texts of an ``encode`` input, batch after batch."""
    return [text for batch in inputs for text in batch["text"]]  # type: ignore[typeddict-item]


class LayerDynamicsEncoder(Protocol):
    """The layer-dynamics encoder as the seams see it (:class:`~mteb_lrd.adapter.wrapper.LayerDynamicsModel`).

    Attributes:
        options: what is computed per task subset. layers: the states that get per-layer scores.
        store / sample / memory / background: the per-layer vectors, the LRD sample, the memory
            plan and the background LRD measurement of the current subset.
        extractor: the one-pass extractor (``num_layers``, ``pooling``, ...).
        calls: the texts each ``encode`` call of a subset saw, by :data:`CallKey`.
        last_states_info: pooling / final-norm / template of the last encoded states.
        depth: how deep the seams are nested in this encoder's subset evaluation.
    """

    options: LayerDynamicsOptions
    layers: Sequence[int]
    store: VectorStore
    sample: LRDSample
    memory: MemoryPlan
    background: BackgroundDynamics
    extractor: Any
    calls: dict[CallKey, list[tuple[PromptType | None, list[TextKey]]]]
    last_states_info: dict[str, Any]
    mteb_model_meta: Any
    depth: int

    def resolve_prompt(self, task_metadata: TaskMetadata, prompt_type: PromptType | None) -> str | None:
        """The prompt a plain run of this model would use."""

    def plan_subset(self, task_name: str, expected_texts: int | None) -> None:
        """Prepare for a subset whose layer dynamics will see ``expected_texts`` texts."""

    def layer_view(self, layer: int, texts: TextReader | None = None) -> Any:
        """An encoder serving the stored vectors of hidden state ``layer``."""

    def reencode(self, keys: list[TextKey]) -> None:
        """Encode sampled texts again whose states were not kept."""

    def search_device(self, task_type: str) -> Any:
        """Where retrieval searches of the per-layer scores run (``None``: CPU)."""

    def warn_unsupported(self, name: str, task_type: str) -> None:
        """Warn once that a task type gets no layer keys."""

    def clear(self) -> None:
        """Free the subset's vectors."""
