"""Inference-time layer pruning: block surgery, rule scores, block choice, pruned models.

``surgery`` (removing / skipping blocks, plain torch), ``rules`` (spec §6 per-layer scores and
baselines, pure numpy), ``block_influence`` (ShortGPT), ``choose`` (blocks from a model's own
profiles, every method of the study) and ``pruned`` (:func:`~mteb_lrd.pruning.pruned.pruned_copy`).
"""
