"""Models → pooled, L2-normalised vectors of every hidden state, in one forward pass per batch.

``architectures`` (where each family keeps its blocks and final norm), ``loading`` (paths, devices,
dtypes), ``pooling``, ``extractor`` (:class:`~mteb_lrd.extraction.extractor.LayerExtractor`),
``identity`` (a model digest for cache keys), ``cache`` (atomic, content-addressed shards) and
``templates`` (texts put into a template such as PromptEOL before tokenisation).
"""
