"""MTEB tasks without the Hugging Face Hub: local JSON-lines folders and in-memory rows.

A task is a class (mteb's registry maps names to classes and instantiates them without
arguments), built from a folder of JSON-lines files (:func:`local_task`) or from in-memory rows
(:func:`make_task`):

======================  =========================================  ==========================================
task type               files                                      fields per line
======================  =========================================  ==========================================
``STS``                 ``<split>.jsonl``                          sentence1, sentence2, score (finite, in
                                                                   ``score_range``, default 0..5)
``PairClassification``  ``<split>.jsonl``                          sentence1, sentence2, label (0 or 1)
``Classification``      ``train.jsonl`` + ``<split>.jsonl``        text, label (strings or integers)
``Clustering``          ``<split>.jsonl``                          text, label
``BitextMining``        ``<split>.jsonl``                          sentence1, sentence2 (a translation pair)
``Retrieval``           ``corpus.jsonl``, ``queries.jsonl``,       id, text (, title); query_id, corpus_id
                        ``qrels/<split>.jsonl``                    (, score: integer >= 0, default 1)
``Reranking``           as Retrieval + ``top_ranked/<split>.jsonl`` query_id, corpus_ids (candidate list)
======================  =========================================  ==========================================

``<split>`` is ``dev``, ``validation`` or ``test`` unless ``eval_splits`` names others; other
``*.jsonl`` files are named in a warning and ignored. Every row is checked when the task loads
(fields present and typed, scores finite, labels 0 / 1 where binary, ids unique, qrels and
candidates pointing at known queries and documents), and the first bad row stops the load with a
:class:`LocalTaskError` naming ``<file>:<line>``. Classification labels are mapped to ``0 .. K-1``
in sorted order (with two labels, the one that sorts second is the positive class); see
:mod:`~mteb_lrd.tasks.local_tasks.labelled`.

The shared STS sets and the bundled demo are in :mod:`mteb_lrd.tasks.shared_tasks`; registered
tasks (:func:`~mteb_lrd.tasks.shared_tasks.register_tasks`) work with ``mteb.get_task(name)``,
the ``mteb run`` CLI and leaderboard tables.
"""

from __future__ import annotations

from mteb_lrd.tasks.local_tasks.builder import MAIN_SCORES, TASK_TYPES, TaskSettings, make_task
from mteb_lrd.tasks.local_tasks.folder import SPLIT_NAMES, content_hash, local_task
from mteb_lrd.tasks.local_tasks.labelled import label_mapping
from mteb_lrd.tasks.local_tasks.validation import LocalTaskError, Rows

__all__ = [
    "MAIN_SCORES",
    "SPLIT_NAMES",
    "TASK_TYPES",
    "LocalTaskError",
    "Rows",
    "TaskSettings",
    "content_hash",
    "label_mapping",
    "local_task",
    "make_task",
]
