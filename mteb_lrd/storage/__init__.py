"""Where per-layer vectors are kept during a run: the vector store (in RAM up to a budget, then
spilled to disk; ``vector_store``), the sampled rows the layer dynamics read (``lrd_sample``), and
how the memory budget is shared between them (``memory_plan``)."""
