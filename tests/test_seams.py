"""Canaries for the mteb seams: they fail the moment mteb moves under the plugin.

Each test pins one promise of :mod:`mteb_lrd.adapter.seams` against mteb's own task classes and
mock tasks: every subset method is wrapped, every supported task type (cross-validated classification
included) gets both layer keys with numbers equal to an independent re-computation, a copied model
meta still triggers the re-run that adds keys, and each overwrite strategy behaves as documented.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import mteb
import numpy as np
import pytest
from mteb.abstasks.abstask import AbsTask
from mteb.abstasks.task_metadata import TaskMetadata

from mteb_lrd import _compat, with_layer_dynamics
from mteb_lrd.adapter import seams
from tests.mteb_helpers import LayerEncoder, classification_task, sts_task

RUN = {"co2_tracker": False, "show_progress_bar": False}
PLUGINS = Path(__file__).resolve().parents[1] / "plugins"


def _mock(name: str) -> AbsTask:
    from mteb.mocks import mock_tasks
    from mteb.mocks.mock_tasks import clustering

    return getattr(mock_tasks, name, None or getattr(clustering, name, None))()


def _cross_validated_task() -> AbsTask:
    """A text classification task evaluated by k-fold cross-validation on its train split."""
    base = type(classification_task())

    class TinyClassificationCrossVal(base):
        metadata = base.metadata.model_copy(
            update={"name": "TinyClassificationCrossVal", "eval_splits": ["train"]}
        )
        is_cross_validation = True
        n_splits = 2

    return TinyClassificationCrossVal()


SUPPORTED_MOCKS = [
    "MockSTSTask",
    "MockClassificationTask",
    "MockPairClassificationTask",
    "MockClusteringTask",
    "MockMultilingualClusteringFastTask",
    "MockRetrievalTask",
    "MockRerankingTask",
]


def test_compat_check_finds_every_private_name():
    assert _compat.check() == []


def test_every_subset_method_and_the_cache_check_are_wrapped():
    seams.install_seams()
    from mteb.abstasks.classification import AbsTaskClassification

    found = seams.installed_seams()
    assert found["cache_check"] == ["mteb.evaluate._check_cache"]
    assert "AbsTaskClassification._evaluate_subset_cross_validation" in found["subset_methods"]
    for cls in [AbsTask, *seams._subclasses(AbsTask)]:
        for name in _compat.SUBSET_METHODS:
            function = cls.__dict__.get(name)
            if function is not None and not getattr(function, "__isabstractmethod__", False):
                assert hasattr(function, seams.ORIGINAL), f"{cls.__qualname__}.{name} is not wrapped"
    # the wrapped functions are the ones mteb really calls
    assert hasattr(AbsTaskClassification._evaluate_subset_cross_validation, seams.ORIGINAL)
    assert hasattr(mteb.evaluate.__globals__["_check_cache"], seams.ORIGINAL)


@pytest.mark.parametrize("make", [*SUPPORTED_MOCKS, "cross-validation"])
def test_every_supported_task_type_gets_both_keys(make, tiny_st):
    task = _cross_validated_task() if make == "cross-validation" else _mock(make)
    plain = mteb.evaluate(tiny_st, [task], cache=None, **RUN).task_results[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no "no augmentation ran" warning
        result = mteb.evaluate(with_layer_dynamics(tiny_st), [task], cache=None, **RUN).task_results[0]
    for split, rows in result.scores.items():
        for row, plain_row in zip(rows, plain.scores[split], strict=True):
            assert row["main_score"] == pytest.approx(plain_row["main_score"], abs=1e-9)
            dynamics = row["layer_dynamics"]
            if dynamics["n_texts"] >= 4:
                assert "error" not in dynamics, dynamics
                assert len(dynamics["frenet"]["speed"]) == 4
            else:  # some mock tasks have 2 distinct texts: too few for the metrics, said so
                assert "usable texts" in dynamics["error"]
            per_layer = row["per_layer"]
            assert per_layer["layers"] == [0, 1, 2, 3, 4]
            assert all(s is not None for s in per_layer["scores"])
            # tiny_st ends in Normalize: its embedding is the L2-normalised last layer
            assert per_layer["scores"][-1] == pytest.approx(row["main_score"], abs=1e-6)


@pytest.mark.parametrize("make", ["MockSTSTask", "MockRetrievalTask", "classification"])
def test_per_layer_scores_equal_the_task_evaluator_on_each_layer(make, tiny_st):
    """Layer l of ``per_layer`` is the task's own evaluator on ``states[l]``, computed independently."""

    def fresh() -> AbsTask:
        return classification_task() if make == "classification" else _mock(make)

    result = mteb.evaluate(with_layer_dynamics(tiny_st), [fresh()], cache=None, **RUN).task_results[0]
    scores = result.scores["test"][0]["per_layer"]["scores"]
    assert len(scores) == 5
    for layer in range(5):
        expected = mteb.evaluate(LayerEncoder(tiny_st, layer), [fresh()], cache=None, **RUN).task_results[0]
        assert scores[layer] == pytest.approx(expected.scores["test"][0]["main_score"], abs=1e-6), layer


def _task_file(root: Path, name: str) -> dict:
    (path,) = root.rglob(f"{name}.json")
    return json.loads(path.read_text())


def test_copied_meta_still_reruns_to_add_keys(tiny_st, tmp_path):
    """mteb copies the meta to fold encode_kwargs precision into experiment_kwargs."""
    cache = mteb.ResultCache(tmp_path)
    kwargs = {"encode_kwargs": {"precision": "float32"}, **RUN}
    task = sts_task()
    mteb.evaluate(tiny_st, [task], cache=cache, **kwargs)
    assert "layer_dynamics" not in _task_file(tmp_path, task.metadata.name)["scores"]["test"][0]
    mteb.evaluate(with_layer_dynamics(tiny_st), [task], cache=cache, **kwargs)
    row = _task_file(tmp_path, task.metadata.name)["scores"]["test"][0]
    assert "layer_dynamics" in row and "per_layer" in row


@pytest.mark.parametrize("strategy", ["only-missing", "always", "never", "only-cache"])
def test_each_overwrite_strategy(strategy, tiny_st, tmp_path):
    cache = mteb.ResultCache(tmp_path)
    task = sts_task()
    mteb.evaluate(tiny_st, [task], cache=cache, **RUN)  # plain results, no layer keys
    before = _task_file(tmp_path, task.metadata.name)
    wrapped = with_layer_dynamics(tiny_st)
    mteb.evaluate(wrapped, [task], cache=cache, overwrite_strategy=strategy, **RUN)
    row = _task_file(tmp_path, task.metadata.name)["scores"]["test"][0]
    if strategy in ("only-missing", "always"):  # re-run: keys added
        assert "layer_dynamics" in row and "per_layer" in row
    else:  # never / only-cache: the cached file is served unchanged
        assert _task_file(tmp_path, task.metadata.name) == before


def test_wrappers_pass_new_mteb_parameters_through():
    """A parameter a future mteb adds reaches the original untouched (wrappers take *args, **kwargs)."""
    calls = []

    def check_cache(task, meta, cache, overwrite_strategy, *, new_flag=False):
        calls.append(new_flag)
        return None, {}

    def evaluate_subset(self, model, data_split, *, hf_split, hf_subset, brand_new=None, **kwargs):
        calls.append(brand_new)
        return {"main_score": 1.0}

    assert seams._wrap_cache_check(check_cache)("t", "m", None, "only-missing", new_flag=True) == (None, {})
    wrapped = seams._wrap_subset_method(evaluate_subset)
    assert wrapped(object(), object(), None, hf_split="test", hf_subset="default", brand_new=7) == {
        "main_score": 1.0
    }
    assert calls == [True, 7]


def test_marker_not_class_identity_recognises_the_wrapper(tiny_st):
    wrapped = with_layer_dynamics(tiny_st)
    assert seams.is_layer_dynamics_model(wrapped)
    assert not seams.is_layer_dynamics_model(wrapped.layer_view(0))
    assert not seams.is_layer_dynamics_model(tiny_st)


def _bypassing_task() -> AbsTask:
    """A task whose evaluate() encodes without going through any subset method."""

    class Bypass(AbsTask):
        metadata = sts_task().metadata.model_copy(update={"name": "BypassSTS"})

        def load_data(self, **kwargs):
            self.data_loaded = True

        def evaluate(self, model, split="test", subsets_to_run=None, *, encode_kwargs, **kwargs):
            from torch.utils.data import DataLoader

            loader = DataLoader([{"text": ["a b", "c d"]}], batch_size=None)
            model.encode(loader, task_metadata=self.metadata, hf_split=split, hf_subset="default")
            return {
                "default": {
                    "main_score": 0.5,
                    "cosine_spearman": 0.5,
                    "hf_subset": "default",
                    "languages": ["eng-Latn"],
                }
            }

        def _evaluate_subset(self, *args, **kwargs):  # pragma: no cover - never called
            raise AssertionError

        def _calculate_descriptive_statistics_from_split(self, *args, **kwargs):  # pragma: no cover
            return {}

    assert isinstance(Bypass.metadata, TaskMetadata)
    return Bypass()


def test_loud_warning_when_no_augmentation_ran(tiny_st):
    wrapped = with_layer_dynamics(tiny_st)
    with pytest.warns(RuntimeWarning, match="no augmentation ran.*BypassSTS"):
        mteb.evaluate(wrapped, [_bypassing_task(), sts_task()], cache=None, **RUN)


def test_plugin_warns_and_stays_off_when_a_seam_is_missing(tmp_path):
    """A renamed private mteb name must never break ``import mteb`` for plugin users."""
    code = (
        "import importlib, warnings\n"
        "del importlib.import_module('mteb.get_tasks')._TASKS_REGISTRY\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    import mteb_lrd_plugin\n"
        "print(mteb_lrd_plugin.register())\n"
        "print([str(x.message) for x in w if 'mteb-lrd' in str(x.message)])\n"
    )
    env = {"PYTHONPATH": f"{PLUGINS}", "MTEB_LRD_PLUGIN": "0", "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    registered, messages = out.stdout.strip().splitlines()[-2:]
    assert registered == "[]"
    assert "_TASKS_REGISTRY" in messages and "plugin is off" in messages


def test_sts_per_layer_scores_carry_a_bootstrap_interval_over_pairs(tiny_st):
    """The interval is the percentile bootstrap of Spearman(cosine of layer l, gold) over the pairs,
    computed here from an independent extraction of every layer; other task types carry none."""
    from scipy import stats

    from mteb_lrd import extract_layer_states

    result = mteb.evaluate(with_layer_dynamics(tiny_st), [sts_task()], cache=None, **RUN)
    interval = result.task_results[0].scores["test"][0]["per_layer"]["interval"]
    assert (interval["over"], interval["seed"], interval["resamples"]) == ("pairs", 0, 1000)
    task = sts_task()
    task.load_data()
    rows = task.dataset["default"]["test"]
    gold = np.asarray(rows["score"], dtype=float)
    first = extract_layer_states(tiny_st, list(rows["sentence1"]), show_progress_bar=False).states
    second = extract_layer_states(tiny_st, list(rows["sentence2"]), show_progress_bar=False).states
    idx = np.random.default_rng(0).integers(0, gold.size, size=(1000, gold.size))
    for layer in range(5):
        a, b = np.asarray(first[layer], dtype=float), np.asarray(second[layer], dtype=float)
        cosine = np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        rho = np.array([stats.spearmanr(cosine[i], gold[i]).statistic for i in idx])
        low, high = np.nanquantile(rho, [0.025, 0.975])
        assert interval["low"][layer] == pytest.approx(low, abs=1e-6), layer
        assert interval["high"][layer] == pytest.approx(high, abs=1e-6), layer
    retrieval = mteb.evaluate(with_layer_dynamics(tiny_st), [_mock("MockRetrievalTask")], cache=None, **RUN)
    assert "interval" not in retrieval.task_results[0].scores["test"][0]["per_layer"]


def test_an_undefined_layer_score_is_written_as_null_in_strict_json(tiny_model_dir, tmp_path):
    """A CLS-pooled encoder's h_0 is one vector for every text: its STS score and interval are
    undefined, and the result file stays strict JSON (null, never NaN)."""
    path = tiny_model_dir("bert")
    wrapped = with_layer_dynamics(str(path), pooling="cls", name="tiny/cls")
    mteb.evaluate(wrapped, [sts_task()], cache=mteb.ResultCache(str(tmp_path)), **RUN)
    (written,) = [p for p in tmp_path.rglob("*.json") if p.name != "model_meta.json"]
    per_layer = json.loads(written.read_text(), parse_constant=lambda name: pytest.fail(f"{name} in {written}"))[
        "scores"]["test"][0]["per_layer"]  # fmt: skip
    assert per_layer["scores"][0] is None and per_layer["interval"]["low"][0] is None
    assert per_layer["scores"][-1] is not None and per_layer["interval"]["low"][-1] is not None


def test_no_future_warning_from_our_calls(tiny_st):
    """mteb calls sentence-transformers' renamed get_sentence_embedding_dimension when it wraps a
    SentenceTransformer: that FutureWarning is not the user's concern, and no other shows."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        mteb.evaluate(with_layer_dynamics(tiny_st), [sts_task()], cache=None, **RUN)
