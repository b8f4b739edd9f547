"""An mteb encoder that serves vectors computed before and has its model encode only the rest.

The studies extract a cell's sampled texts (every hidden state, the model's own output among them)
before mteb scores the cell on all of its texts; :class:`KnownVectors` hands mteb those outputs
instead of encoding the same texts twice. A composition wrapper, as mteb's ``CompressionWrapper``:
prompts, similarity and metadata stay the wrapped encoder's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mteb_lrd.adapter.plain_prompt import plain_run_prompt
from mteb_lrd.adapter.protocols import read_texts

__all__ = ["KnownVectors"]


class KnownVectors:
    """Wraps an mteb encoder: texts with a known vector are served, the others encoded by ``model``.

    Args:
        model: an mteb encoder (mteb's SentenceTransformer wrapper or a layer-dynamics model).
        vectors: ``{(prompt, text): vector}``, the model's own output for ``text`` under ``prompt``
            (``""``: none), e.g. from an extraction of the same texts with the same settings.

    Raises:
        ValueError: when the vectors differ in length.
    """

    def __init__(self, model: Any, vectors: Mapping[tuple[str, str], np.ndarray]) -> None:
        if len({np.shape(v) for v in vectors.values()}) > 1:
            raise ValueError("the known vectors differ in shape")
        self.model = model
        self.vectors = vectors
        self.served = 0

    @property
    def mteb_model_meta(self) -> Any:
        """The wrapped encoder's metadata."""
        return self.model.mteb_model_meta

    def _prompt(self, task_metadata: Any, prompt_type: Any) -> str:
        resolve = getattr(self.model, "resolve_prompt", None)
        if resolve is not None:
            return resolve(task_metadata, prompt_type) or ""
        return plain_run_prompt(self.model, task_metadata, prompt_type) or ""

    def encode(self, inputs: Any, *, task_metadata: Any, hf_split: str, hf_subset: str,
               prompt_type: Any = None, **kwargs: Any) -> np.ndarray:  # fmt: skip
        """The known vectors of the inputs' texts, the wrapped encoder's for the others."""
        texts = read_texts(inputs)
        if not texts:
            raise ValueError("texts is empty: nothing to encode")
        prompt = self._prompt(task_metadata, prompt_type)
        keys = [(prompt, text) for text in texts]
        known = np.fromiter((key in self.vectors for key in keys), dtype=bool, count=len(keys))
        out: np.ndarray | None = None
        if not known.all():
            unknown = [text for text, hit in zip(texts, known, strict=True) if not hit]
            encoded = np.asarray(self.model.encode(_text_loader(unknown, kwargs.get("batch_size")),
                                                   task_metadata=task_metadata, hf_split=hf_split,
                                                   hf_subset=hf_subset, prompt_type=prompt_type, **kwargs))  # fmt: skip
            out = np.empty((len(texts), encoded.shape[1]), dtype=encoded.dtype)
            out[~known] = encoded
        rows = np.flatnonzero(known)
        if rows.size:
            served = np.stack([self.vectors[keys[i]] for i in rows])
            out = np.empty((len(texts), served.shape[1]), dtype=served.dtype) if out is None else out
            out[rows] = served
            self.served += int(rows.size)
        return out  # type: ignore[return-value]  # one of the two branches ran: texts is not empty

    def similarity(self, embeddings1: Any, embeddings2: Any) -> Any:
        """The wrapped encoder's similarity matrix."""
        return self.model.similarity(embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> Any:
        """The wrapped encoder's row-wise similarity."""
        return self.model.similarity_pairwise(embeddings1, embeddings2)


def _text_loader(texts: list[str], batch_size: int | None) -> Any:
    """A DataLoader of ``{"text": [...]}`` batches over ``texts``, as mteb hands encoders."""
    from datasets import Dataset
    from torch.utils.data import DataLoader

    return DataLoader(Dataset.from_dict({"text": texts}), batch_size=int(batch_size or 32))
