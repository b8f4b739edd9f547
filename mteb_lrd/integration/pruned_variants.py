"""Every pruned variant of a SentenceTransformer scored by plain mteb runs, encoded together.

:meth:`PrunedVariants.encoder` gives mteb one encoder per variant: mteb's own
``SentenceTransformerEncoderWrapper`` (prompts, similarity, scores) whose ``encode`` reads the
variant's vectors. The first run that meets a text list encodes it with every variant at once
(:func:`~mteb_lrd.pruning.shared_prefix.encode_variants`: the blocks before a variant's first removed
block run once for all) and moves each variant's vectors, one whole file each, into a folder; the
other variants' runs, and a resumed study (which may ask for fewer variants), read them from there.
"""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from mteb.models import SentenceTransformerEncoderWrapper

from mteb_lrd import _compat
from mteb_lrd.integration.plain_prompt import plain_run_prompt
from mteb_lrd.integration.protocols import read_texts
from mteb_lrd.io import atomic_write_bytes, content_key, temporary_folder, texts_digest
from mteb_lrd.pruning.rules import block_key
from mteb_lrd.pruning.shared_prefix import BlockSet, encode_variants

__all__ = ["PrunedVariants"]


class PrunedVariants:
    """The full model and every pruned variant of ``model``, for mteb runs one variant at a time.

    Args:
        model: a SentenceTransformer (left unchanged between calls).
        block_sets: the blocks each variant removes (the full model, ``()``, is always served).
        directory: where each encoded text list's vectors are kept (one ``.npy`` per variant).
        batch_size: texts per forward pass.

    Raises:
        ValueError: for a block set the model cannot lose (see
            :func:`~mteb_lrd.pruning.shared_prefix.encode_variants`).
    """

    def __init__(
        self, model: Any, block_sets: Sequence[Sequence[int]], directory: str | Path, *, batch_size: int = 32
    ) -> None:
        self.model = model
        self.block_sets: list[BlockSet] = [(), *sorted({tuple(sorted(b)) for b in block_sets if len(b)})]
        self.directory = Path(directory)
        self.batch_size = batch_size

    def encoder(self, blocks: Sequence[int]) -> SentenceTransformerEncoderWrapper:
        """The mteb encoder of the variant without ``blocks`` (``[]``: the full model)."""
        key = tuple(sorted(blocks))
        if key not in self.block_sets:
            raise ValueError(f"blocks {list(key)} are not among this study's block sets")
        with _compat.quiet_renamed_method_calls():  # mteb calls a method sentence-transformers renamed
            return _VariantEncoder(self.model, self, key)

    def vectors(self, blocks: BlockSet, texts: list[str], prompt: str | None) -> np.ndarray:
        """``(len(texts), D)``: the vectors of ``texts`` by the variant without ``blocks``."""
        folder = self.directory / content_key({
            "texts": texts_digest(texts), "prompt": prompt, "batch_size": self.batch_size,
            "max_seq_length": getattr(self.model, "max_seq_length", None),
        })  # fmt: skip
        missing = [b for b in self.block_sets if not (folder / f"{_file_name(b)}.npy").is_file()]
        if missing or not (folder / "codes.npy").is_file():
            self._encode(folder, texts, prompt, missing)
        codes = np.load(folder / "codes.npy")
        return np.asarray(np.load(folder / f"{_file_name(blocks)}.npy", mmap_mode="r")[codes])

    def _encode(self, folder: Path, texts: list[str], prompt: str | None, block_sets: list[BlockSet]) -> None:
        """Encode ``texts`` with the full model and ``block_sets``; each file moves into ``folder``
        whole (a variant's file, then the codes), so a folder only ever holds complete files."""
        folder.mkdir(parents=True, exist_ok=True)
        scratch = temporary_folder(self.directory, ".encoding-")
        maps: list[np.memmap] = []

        def allocate(blocks: BlockSet, shape: tuple[int, int]) -> np.ndarray:
            path = scratch / f"{_file_name(blocks)}.npy"
            maps.append(np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=shape))
            return maps[-1]

        try:
            codes, _ = encode_variants(self.model, texts, block_sets, prompt=prompt,
                                       batch_size=self.batch_size, allocate=allocate)  # fmt: skip
            for array in maps:
                array.flush()
            for path in scratch.glob("*.npy"):
                os.replace(path, folder / path.name)
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, codes)
            atomic_write_bytes(folder / "codes.npy", buffer.getvalue())  # last: the folder is complete
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

    def encode(self, inputs: Any, *, task_metadata: Any, hf_split: str, hf_subset: str,
               prompt_type: Any = None, **kwargs: Any) -> np.ndarray:  # fmt: skip
        """The variant's vectors of the inputs' texts, with the prompt a plain run would use."""
        prompt = plain_run_prompt(self, task_metadata, prompt_type)
        return self.variants.vectors(self.blocks, read_texts(inputs), prompt)
