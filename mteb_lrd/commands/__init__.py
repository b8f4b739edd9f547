"""Sub-commands of the ``mteb-lrd`` CLI: each module has ``register(subparsers)`` and ``run(args) -> int``."""
