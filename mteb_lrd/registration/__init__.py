"""How mteb meets the plugin's models: what the plugin registers (``mteb_registration``: tasks,
``mteb-lrd/<name>`` models, local model folders), what mteb's own loaders load, wrapped
(``loaded_models``), and ``mteb_lrd.prune`` with mteb's experiment hook (``pruned_models``)."""
