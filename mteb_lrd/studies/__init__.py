"""The paper's two studies on an offline model panel: label-free model selection and layer pruning.

``panel`` (six real models from PyPI), ``tasks`` (the study task set), ``runner`` (one resumable
cell runner for both studies), ``selection`` / ``pruning`` (what a cell measures),
``selection_analysis`` / ``pruning_analysis`` (statistics over cells) and ``statistics``.
"""
