"""Every pruned variant of a model scored by plain mteb runs, encoded together.

:meth:`PrunedVariants.encoder` gives mteb one encoder per variant: for a SentenceTransformer mteb's own
``SentenceTransformerEncoderWrapper`` (prompts, similarity, scores), for a plain transformers model an
encoder with the metadata and similarity of the encoder that scores the full model; its ``encode``
reads the variant's vectors. The first run that meets a text encodes it, with every text the study expects
(both columns of an STS task: each distinct text once), by every variant at once
(:func:`~mteb_lrd.pruning.shared_prefix.encode_variants`: the blocks a variant shares with the full
model or a smaller variant run once for all), chunk by chunk so that an interrupted encoding resumes,
and then moves each variant's vectors, one whole file each, into a folder; the other variants' runs,
and a resumed study (which may ask for fewer variants), read them from there.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from mteb.models import SentenceTransformerEncoderWrapper
from mteb.models.abs_encoder import AbsEncoder

from mteb_lrd import _compat
from mteb_lrd.adapter.experiments import variant_meta
from mteb_lrd.adapter.plain_prompt import plain_run_prompt
from mteb_lrd.adapter.protocols import read_texts
from mteb_lrd.extraction.cache import ArrayCache
from mteb_lrd.io import content_key, temporary_folder, texts_digest
from mteb_lrd.pruning.rules import block_key
from mteb_lrd.pruning.shared_prefix import BlockSet, encode_variants

__all__ = ["PrunedVariants"]


class PrunedVariants:
    """The full model and every pruned variant of ``model``, for mteb runs one variant at a time.

    Args:
        model: a SentenceTransformer (left unchanged between calls).
        block_sets: the blocks each variant removes (the full model, ``()``, is always served).
        directory: where the vectors are kept: per prompt and text pool, one ``.npy`` per variant.
        batch_size: texts per forward pass.
        texts: the texts mteb will ask for (e.g. both columns of an STS task): a call whose texts
            are all among them encodes every one of them at once, each distinct text once, and the
            other calls are served from that; ``None``: each call's own texts.
        chunk_texts: texts per resumable chunk (an interrupted encoding recomputes at most one).
        full_encoder: a plain transformers model's mteb encoder (e.g. the layer-dynamics wrapper) whose
            metadata and similarity its variants keep; required for a plain model, unused for a
            SentenceTransformer.
        tokenizer / template / max_length: a plain model's tokenizer, text template and truncation
            (:func:`~mteb_lrd.pruning.shared_prefix.encode_variants`); they name its vectors' folder too.

    Raises:
        ValueError: for a block set the model cannot lose (see
            :func:`~mteb_lrd.pruning.shared_prefix.encode_variants`), a chunk size below 1, or a
            plain model without its full encoder.
    """

    def __init__(
        self,
        model: Any,
        block_sets: Sequence[Sequence[int]],
        directory: str | Path,
        *,
        batch_size: int = 32,
        texts: Sequence[str] | None = None,
        chunk_texts: int = 512,
        full_encoder: Any = None,
        tokenizer: Any = None,
        template: str | None = None,
        max_length: int = 512,
    ) -> None:
        if isinstance(chunk_texts, bool) or not isinstance(chunk_texts, int) or chunk_texts < 1:
            raise ValueError(f"chunk_texts must be a positive integer, got {chunk_texts!r}")
        from sentence_transformers import SentenceTransformer

        self.sentence_transformer = isinstance(model, SentenceTransformer)
        if not self.sentence_transformer and getattr(full_encoder, "mteb_model_meta", None) is None:
            raise ValueError(
                "a plain transformers model needs full_encoder: the mteb encoder that scores the full "
                "model, whose metadata and similarity its variants keep"
            )
        self.model = model
        self.full_encoder = full_encoder
        self.plain_settings: dict[str, Any] = (
            {} if self.sentence_transformer
            else {"tokenizer": tokenizer, "template": template, "max_length": max_length}
        )  # fmt: skip
        self.block_sets: list[BlockSet] = [(), *sorted({tuple(sorted(b)) for b in block_sets if len(b)})]
        self.directory = Path(directory)
        self.batch_size = batch_size
        self.chunk_texts = chunk_texts
        self.expected = None if texts is None else frozenset(texts)
        self._index: tuple[Path, dict[str, int]] | None = None

    def encoder(self, blocks: Sequence[int]) -> Any:
        """The mteb encoder of the variant without ``blocks`` (``[]``: the full model)."""
        key = tuple(sorted(blocks))
        if key not in self.block_sets:
            raise ValueError(f"blocks {list(key)} are not among this study's block sets")
        if not self.sentence_transformer:
            return _PlainVariantEncoder(self, key)
        with _compat.quiet_renamed_method_calls():  # mteb calls a method sentence-transformers renamed
            return _VariantEncoder(self.model, self, key)

    def vectors(self, blocks: BlockSet, texts: list[str], prompt: str | None) -> np.ndarray:
        """``(len(texts), D)``: the vectors of ``texts`` by the variant without ``blocks``."""
        pool = self._pool(texts)
        folder = self.directory / content_key({
            "texts": texts_digest(pool), "prompt": prompt, "batch_size": self.batch_size,
            "max_seq_length": getattr(self.model, "max_seq_length", None),
            **{k: v for k, v in self.plain_settings.items() if k != "tokenizer"},
        })  # fmt: skip
        missing = [b for b in self.block_sets if not (folder / f"{_file_name(b)}.npy").is_file()]
        if missing:
            self._encode(folder, pool, prompt, missing)
        if self._index is None or self._index[0] != folder:
            self._index = (folder, {text: row for row, text in enumerate(pool)})
        rows = np.fromiter((self._index[1][t] for t in texts), dtype=np.int64, count=len(texts))
        return np.asarray(np.load(folder / f"{_file_name(blocks)}.npy", mmap_mode="r")[rows])

    def _pool(self, texts: list[str]) -> list[str]:
        """The distinct texts to encode for a call, in the model's length order (longest first)."""
        wanted = self.expected if self.expected is not None and self.expected.issuperset(texts) else texts
        length = _compat.input_length(self.model) or len
        return sorted(set(wanted), key=lambda t: (-length(t), t))

    def _encode(self, folder: Path, pool: list[str], prompt: str | None, block_sets: list[BlockSet]) -> None:
        """Encode ``pool`` with ``block_sets`` chunk by chunk (each chunk kept in ``folder/chunks`` until
        every chunk is done), then move each variant's file into ``folder`` whole."""
        chunks = ArrayCache(folder / "chunks")
        scratch = temporary_folder(self.directory, ".encoding-")
        names = [_file_name(b) for b in block_sets]
        files: dict[str, np.memmap] = {}
        try:
            for start in range(0, len(pool), self.chunk_texts):
                part = pool[start : start + self.chunk_texts]
                key = f"chunk-{start}-{texts_digest(part)[:16]}-{content_key({'names': names})[:16]}"
                arrays = chunks.load(key, rows=len(part))
                if arrays is None:
                    codes, out = encode_variants(self.model, part, block_sets, prompt=prompt,
                                                 batch_size=self.batch_size, **self.plain_settings)  # fmt: skip
                    arrays = {_file_name(b): out[b][codes] for b in block_sets}
                    chunks.save(key, arrays, rows=len(part))
                for name in names:
                    if name not in files:
                        shape = (len(pool), arrays[name].shape[1])
                        files[name] = np.lib.format.open_memmap(scratch / f"{name}.npy", mode="w+",
                                                                dtype=np.float32, shape=shape)  # fmt: skip
                    files[name][start : start + len(part)] = arrays[name]
            for name, array in files.items():
                array.flush()
                os.replace(scratch / f"{name}.npy", folder / f"{name}.npy")
            shutil.rmtree(folder / "chunks", ignore_errors=True)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def clear(self) -> None:
        """Delete every kept vector (the folder itself included)."""
        shutil.rmtree(self.directory, ignore_errors=True)


def _file_name(blocks: BlockSet) -> str:
    return f"without-{block_key(blocks).replace(',', '-')}" if blocks else "full"


class _VariantEncoder(SentenceTransformerEncoderWrapper):
    """mteb's SentenceTransformer wrapper, with the vectors of one variant of :class:`PrunedVariants`."""

    def __init__(self, model: Any, variants: PrunedVariants, blocks: BlockSet) -> None:
        super().__init__(model)
        self.variants, self.blocks = variants, blocks
        self.mteb_model_meta = variant_meta(self.mteb_model_meta, model, blocks)

    def encode(self, inputs: Any, *, task_metadata: Any, hf_split: str, hf_subset: str,
               prompt_type: Any = None, **kwargs: Any) -> np.ndarray:  # fmt: skip
        """The variant's vectors of the inputs' texts, with the prompt a plain run would use."""
        prompt = plain_run_prompt(self, task_metadata, prompt_type)
        return self.variants.vectors(self.blocks, read_texts(inputs), prompt)


class _PlainVariantEncoder(AbsEncoder):
    """A plain transformers model's variant of :class:`PrunedVariants`: the metadata (as a pruned copy's)
    and similarity of the encoder that scores the full model; no prompt (that encoder gives a plain
    model none)."""

    def __init__(self, variants: PrunedVariants, blocks: BlockSet) -> None:
        self.variants, self.blocks = variants, blocks
        self.full = variants.full_encoder
        self.mteb_model_meta = variant_meta(self.full.mteb_model_meta, variants.model, blocks)

    def similarity(self, embeddings1: Any, embeddings2: Any) -> Any:
        """The full model's encoder's similarity."""
        return self.full.similarity(embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> Any:
        """The full model's encoder's pairwise similarity."""
        return self.full.similarity_pairwise(embeddings1, embeddings2)

    def encode(self, inputs: Any, *, task_metadata: Any, hf_split: str, hf_subset: str,
               prompt_type: Any = None, **kwargs: Any) -> np.ndarray:  # fmt: skip
        """The variant's vectors of the inputs' texts."""
        return self.variants.vectors(self.blocks, read_texts(inputs), None)
