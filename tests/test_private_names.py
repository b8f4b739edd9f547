"""Canaries: every private name of mteb, sentence-transformers and transformers that the plugin
touches (the table of ``mteb_lrd/_compat.py`` and docs/architecture.md), looked up directly, one
test each, so a release that moves one fails here under that name (``_compat.check()`` as a whole
is tests/test_seams.py's). Names whose absence only turns a speed-up or an interval off are marked
optional in the table; they are checked all the same."""

from __future__ import annotations

import importlib

import pytest

from mteb_lrd import _compat


def _module_attribute(module: str, name: str) -> object:
    return getattr(importlib.import_module(module), name)


def _class(path: str) -> type:
    module, _, name = path.rpartition(".")
    return _module_attribute(module, name)


def _st_model(tiny_st_dir):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(tiny_st_dir), device="cpu")


CLASS_METHODS = [
    ("mteb.abstasks.abstask.AbsTask", "_evaluate_subset"),
    ("mteb.abstasks.classification.AbsTaskClassification", "_evaluate_subset_cross_validation"),
    ("mteb.abstasks.abstask.AbsTask", "_add_main_score"),
    ("mteb.abstasks.sts.AbsTaskSTS", "_calculate_scores"),
    ("sentence_transformers.SentenceTransformer", "_input_length"),
    ("sentence_transformers.SentenceTransformer", "_can_flatten_inputs"),
    ("sentence_transformers.SentenceTransformer", "_interleave_sorted_indices"),
]
MODULE_NAMES = [
    ("mteb.evaluate", "_check_cache"),
    ("mteb.get_tasks", "_TASKS_REGISTRY"),
    ("mteb.models.model_implementations", "MODEL_REGISTRY"),
    ("mteb.models.sentence_transformer_wrapper", "_resolve_prompt"),
    ("mteb._create_dataloaders", "create_dataloader"),
    ("mteb._evaluators.retrieval_metrics", "evaluate_abstention"),
    ("transformers.utils.output_capturing", "maybe_install_capturing_hooks"),
]


@pytest.mark.parametrize(("owner", "name"), CLASS_METHODS, ids=[f"{o}.{n}" for o, n in CLASS_METHODS])
def test_a_private_method_is_where_the_plugin_looks(owner, name):
    assert callable(getattr(_class(owner), name, None)), f"{owner}.{name} moved"


@pytest.mark.parametrize(("module", "name"), MODULE_NAMES, ids=[f"{m}.{n}" for m, n in MODULE_NAMES])
def test_a_private_module_name_is_where_the_plugin_looks(module, name):
    found = _module_attribute(module, name)
    assert callable(found) or isinstance(found, dict), f"{module}.{name} moved or changed kind"


def test_the_registries_hold_what_the_plugin_reads():
    tasks, models = _compat.task_registry(), _compat.model_registry()
    assert "STSBenchmark" in tasks and isinstance(tasks["STSBenchmark"], type)
    assert "sentence-transformers/all-MiniLM-L6-v2" in models


def test_a_retrieval_task_keeps_its_search_depth_in_top_k():
    task = importlib.import_module("mteb").get_task("SciFact")
    assert isinstance(getattr(task, _compat.RETRIEVAL_TOP_K, None), int), "AbsTaskRetrieval._top_k moved"


def test_a_loaded_sentence_transformer_carries_its_model_card_text(tiny_st_dir):
    assert hasattr(_st_model(tiny_st_dir), "_model_card_text"), "SentenceTransformer._model_card_text moved"
