"""Document families: Retrieval (rank the whole corpus) and Reranking (rank each query's candidates).

``corpus.jsonl`` rows: ``id`` (string or integer, unique), ``text``, optional ``title``;
``queries.jsonl`` rows: ``id`` (unique), ``text``; ``qrels/<split>.jsonl`` rows: ``query_id`` and
``corpus_id`` (or ``query-id`` / ``corpus-id``) naming a known query and document, optional
``score`` (an integer >= 0, default 1), each pair once. Reranking adds ``top_ranked/<split>.jsonl``:
``query_id`` and ``corpus_ids`` (the candidate documents, known and distinct), one row per query,
covering every query that has qrels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mteb_lrd.tasks.local_tasks.validation import (
    LocalTaskError,
    Rows,
    first_present,
    identifier,
    integer,
    text,
    unique_ids,
)

__all__ = ["retrieval_split"]


def _qrels(qrels: Rows, queries: Mapping[str, str], corpus: Mapping[str, str]) -> dict[str, dict[str, int]]:
    qkey = first_present(qrels, ("query_id", "query-id"))
    ckey = first_present(qrels, ("corpus_id", "corpus-id"))
    relevant: dict[str, dict[str, int]] = {}
    seen: dict[tuple[str, str], str] = {}
    for location, row in qrels:
        query, doc = identifier(row, location, qkey), identifier(row, location, ckey)
        if query not in queries:
            raise LocalTaskError(f"{location}: query {query!r} is not in queries.jsonl")
        if doc not in corpus:
            raise LocalTaskError(f"{location}: document {doc!r} is not in corpus.jsonl")
        if (query, doc) in seen:
            raise LocalTaskError(
                f"{location}: ({query!r}, {doc!r}) is listed twice (first at {seen[query, doc]})"
            )
        seen[query, doc] = location
        score = integer(row, location, "score", minimum=0) if "score" in row else 1
        relevant.setdefault(query, {})[doc] = score
    return relevant


def _top_ranked(
    rows: Rows, queries: Mapping[str, str], corpus: Mapping[str, str], relevant: Mapping[str, Any]
) -> dict[str, list[str]]:
    qkey = first_present(rows, ("query_id", "query-id"))
    ranked: dict[str, list[str]] = {}
    where: dict[str, str] = {}
    for location, row in rows:
        query = identifier(row, location, qkey)
        if query not in queries:
            raise LocalTaskError(f"{location}: query {query!r} is not in queries.jsonl")
        if query in ranked:
            raise LocalTaskError(
                f"{location}: query {query!r} has a second candidate list (first at {where[query]})"
            )
        candidates = row.get("corpus_ids")
        if not isinstance(candidates, list) or not candidates:
            raise LocalTaskError(
                f"{location}: field 'corpus_ids' must be a non-empty list of document ids, got {candidates!r}"
            )
        docs = [identifier({"corpus_ids": c}, location, "corpus_ids") for c in candidates]
        unknown = [d for d in docs if d not in corpus]
        if unknown:
            raise LocalTaskError(f"{location}: candidate documents {unknown} are not in corpus.jsonl")
        if len(set(docs)) != len(docs):
            raise LocalTaskError(f"{location}: a candidate document is listed twice in {docs}")
        ranked[query], where[query] = docs, location
    uncovered = sorted(set(relevant) - set(ranked))
    if uncovered:
        raise LocalTaskError(f"{rows.source}: queries {uncovered[:5]} have qrels but no candidate list")
    return ranked


def retrieval_split(data: Mapping[str, Any], *, reranking: bool) -> dict[str, Any]:
    """One split of a Retrieval / Reranking task in mteb's layout.

    Args:
        data: ``{"corpus": Rows, "queries": Rows, "qrels": Rows}`` and, for reranking, ``"top_ranked"``.
        reranking: whether candidate lists are required.

    Raises:
        LocalTaskError: for a bad row (naming its file and line), a duplicate id, qrels or candidates
            naming unknown queries or documents.
    """
    from datasets import Dataset

    missing = [
        part
        for part in ("corpus", "queries", "qrels", *(("top_ranked",) if reranking else ()))
        if part not in data
    ]
    if missing:
        raise LocalTaskError(f"a {'Reranking' if reranking else 'Retrieval'} split needs {missing} as well")
    corpus_rows, query_rows = data["corpus"].require("documents"), data["queries"].require("queries")
    corpus, queries = unique_ids(corpus_rows, "id", "document"), unique_ids(query_rows, "id", "query")
    relevant = _qrels(data["qrels"].require("relevance judgements"), queries, corpus)
    top_ranked = (
        _top_ranked(data["top_ranked"].require("candidate lists"), queries, corpus, relevant)
        if reranking
        else None
    )
    return {
        "corpus": Dataset.from_dict(
            {
                "id": list(corpus),
                "text": [text(row, where, "text") for where, row in corpus_rows],
                "title": [text(row, where, "title", default="") for where, row in corpus_rows],
            }
        ),
        "queries": Dataset.from_dict(
            {"id": list(queries), "text": [text(row, where, "text") for where, row in query_rows]}
        ),
        "relevant_docs": relevant,
        "top_ranked": top_ranked,
    }
