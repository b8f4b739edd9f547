"""How many distinct texts a task subset will hand the layer dynamics, read from its data before
mteb encodes them (so that the wrapper keeps every hidden state of the sampled texts alone).

An expectation only saves work: when it is wrong or missing, the wrapper still gets the exact
sample, by encoding the sampled texts it did not keep once more (:mod:`mteb_lrd.storage.lrd_sample`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mteb_lrd.adapter.options import DOCUMENT_TYPES

__all__ = ["expected_texts"]

PromptOf = Callable[[Any], str]
"""``prompt_type -> prompt text`` the wrapper would key a text with (``""``: none)."""


def _pair_columns(task: Any) -> tuple[Any, Any] | None:
    task_type = str(task.metadata.type)
    if task_type == "STS":
        columns = getattr(task, "column_names", None)
        return (columns[0], columns[1]) if isinstance(columns, (tuple, list)) and len(columns) == 2 else None
    if task_type == "PairClassification":
        return getattr(task, "input1_column_name", None), getattr(task, "input2_column_name", None)
    return None


def _distinct_documents(corpus: Any) -> int:
    """Distinct documents as mteb's dataloader writes them: ``title + " " + text`` when there is a
    title, else the text, stripped either way (``mteb._create_dataloaders._corpus_to_dict``)."""
    texts = corpus["text"]
    titles = corpus["title"] if "title" in getattr(corpus, "column_names", ()) else [None] * len(texts)
    if not all(isinstance(text, str) for text in texts):
        raise TypeError("a corpus entry is not a text")
    return len(
        {(f"{title} {text}" if title else text).strip() for title, text in zip(titles, texts, strict=True)}
    )


def expected_texts(task: Any, data_split: Any, prompt_of: PromptOf) -> int | None:
    """The number of distinct ``(prompt, text)`` the layer dynamics of this subset will use.

    Retrieval / reranking: the distinct documents of the corpus. STS / pair
    classification with text columns: the distinct texts of both columns under their prompts.
    ``None`` for other task types (classification and clustering may sub-sample while scoring)
    or data of an unexpected shape.
    """
    task_type = str(task.metadata.type)
    try:
        if task_type in DOCUMENT_TYPES:
            return _distinct_documents(data_split["corpus"])
        columns = _pair_columns(task)
        if columns is None or not all(isinstance(column, str) for column in columns):
            return None
        prompt_types = (getattr(task, "input1_prompt_type", None), getattr(task, "input2_prompt_type", None))
        keys: set[tuple[str, str]] = set()
        for column, prompt_type in zip(columns, prompt_types, strict=True):
            prompt = prompt_of(prompt_type)
            keys.update((prompt, text) for text in data_split[column])
        return len(keys)
    except (KeyError, TypeError, AttributeError, ValueError):
        return None
