"""The paper's two studies on an offline model panel: label-free model selection and layer pruning.

``tasks`` (the study task set), ``runner`` (one resumable cell runner for both studies),
``selection`` / ``pruning`` (what a cell measures), ``selection_analysis`` / ``pruning_analysis``
(statistics over cells), ``known_vectors`` and ``pruned_variants`` (the mteb encoders a cell
hands mteb), ``exhaustive_reference`` and ``tidy`` (the committed records). The model
panel (nine real models from PyPI) is :mod:`mteb_lrd.models.panel`; the statistics are
:mod:`mteb_lrd.metrics.statistics` and :mod:`mteb_lrd.metrics.permutation`.
"""
