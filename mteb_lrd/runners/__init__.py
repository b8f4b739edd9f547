"""Running (model, task) units: one model on some tasks in this process (``model_evaluation``), the
settings a run shares (``run_config``), units fanned out over Ray workers with their ledger
(``distributed``), and mteb's result cache with untorn files (``atomic_cache``)."""
