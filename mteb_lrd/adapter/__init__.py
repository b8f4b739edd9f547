"""The mteb adapter: the layer-dynamics wrapper and the seams that add its keys to results.

``options`` (what is computed), ``wrapper`` (the mteb encoder), ``seams`` (where mteb is patched;
every private mteb name is in :mod:`mteb_lrd._compat`), ``augmentation`` (the ``layer_dynamics`` /
``per_layer`` keys), ``layer_scoring`` and ``layer_intervals`` (per-layer scores and their bands),
``background_dynamics`` (the LRD in a worker thread), ``model_meta`` and ``experiments`` (the mteb
metadata of wrapped and pruned models). Per-layer vectors are kept by :mod:`mteb_lrd.storage`;
what the plugin registers is :mod:`mteb_lrd.registration`. Every module is listed in
``docs/architecture.md``.
"""
