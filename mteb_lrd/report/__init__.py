"""Reports of mteb results folders (variant-aware tables, figures, one self-contained HTML page) and
of the selection and pruning studies (:mod:`mteb_lrd.report.studies`)."""

from __future__ import annotations

from mteb_lrd.report.folder_report import write_report
from mteb_lrd.report.tables import Table, leaderboard, results_table, task_table, to_markdown

__all__ = ["Table", "leaderboard", "results_table", "task_table", "to_markdown", "write_report"]
