"""The MTEB glue: the layer-dynamics wrapper and the seams that add its keys to results.

``options`` (what is computed), ``store`` (per-layer vectors of a task), ``wrapper`` (the mteb
encoder), ``augmentation`` (the ``layer_dynamics`` / ``per_layer`` keys), ``seams`` (where mteb is
patched; every private mteb name is in :mod:`mteb_lrd._compat`), ``loaded_models`` (what mteb's
own loaders load, wrapped) and ``results`` (reading results back); result names are
:mod:`mteb_lrd.models.naming`'s, tasks without the Hub :mod:`mteb_lrd.tasks`'. Every module is
listed in ``docs/architecture.md``.
"""
