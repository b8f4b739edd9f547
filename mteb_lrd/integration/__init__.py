"""The MTEB glue: the layer-dynamics wrapper, the seams that add its keys to results, local tasks.

``options`` (what is computed), ``store`` (per-layer vectors of a task), ``wrapper`` (the mteb
encoder), ``augmentation`` (the ``layer_dynamics`` / ``per_layer`` keys), ``seams`` (where mteb is
patched; every private mteb name is in :mod:`mteb_lrd._compat`), ``loaded_models`` (what mteb's
own loaders load, wrapped), ``local_tasks`` / ``shared_tasks`` (tasks without the Hub) and
``results`` (reading results back); result names are :mod:`mteb_lrd.models.naming`'s. Every module
is listed in ``docs/architecture.md``.
"""
