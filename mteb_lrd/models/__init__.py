"""Models: the offline panel, resolving a model name or path to a folder, and loading it for MTEB."""
