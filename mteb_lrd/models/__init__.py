"""Models: the offline panel, resolving a model name or path to a folder, loading it for MTEB, and
its identity (name, revision, the pruning record a pruned model carries)."""
