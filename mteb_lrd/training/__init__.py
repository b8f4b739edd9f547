"""Layer dynamics while a model trains: the sentence-transformers evaluator
(``layer_dynamics_evaluator``) that logs LRD scores and per-layer STS at every evaluation."""
