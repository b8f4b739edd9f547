"""Local tasks: every row checked with file:line, labels mapped, the new families evaluated through mteb."""

from __future__ import annotations

import json
import math
import warnings

import mteb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sentence_transformers import SentenceTransformer

from mteb_lrd import local_task, with_layer_dynamics
from mteb_lrd.tasks.local_tasks import LocalTaskError, label_mapping, make_task
from tests.tiny_models import TEXTS

RUN = {"co2_tracker": False, "show_progress_bar": False}


def _write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


def _load(folder, task_type, **kwargs):
    task = local_task(folder, task_type, **kwargs)()
    task.load_data()
    return task


@pytest.fixture(scope="module")
def tiny_st(tiny_st_dir):
    return SentenceTransformer(str(tiny_st_dir), device="cpu")


def _sts_rows(n=6):
    return [{"sentence1": TEXTS[i], "sentence2": TEXTS[i + 1], "score": i % 5} for i in range(n)]


# -- every row, with file:line --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"sentence1": "a", "score": 1}, "missing field 'sentence2'"),
        ({"sentence1": "a", "sentence2": 3, "score": 1}, "'sentence2' must be a string, got int 3"),
        ({"sentence1": "a", "sentence2": "b", "score": "4"}, "'score' must be a number, got str '4'"),
        ({"sentence1": "a", "sentence2": "b", "score": None}, "'score' must be a number, got null"),
        ('{"sentence1": "a", "sentence2": "b", "score": NaN}', "'score' is nan; scores must be finite"),
        ({"sentence1": "a", "sentence2": "b", "score": 7}, r"outside the task's score range \[0.0, 5.0\]"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"sentence1": "a", ', "not a JSON object"),
    ],
)
def test_a_bad_later_row_is_named_with_file_and_line(tmp_path, bad, message):
    rows = _sts_rows()
    rows.insert(3, bad)
    _write(tmp_path / "sts" / "test.jsonl", rows)
    task = local_task(tmp_path / "sts", "STS")()
    with pytest.raises(ValueError, match=rf"sts/test\.jsonl:4: .*{message}"):
        task.load_data()


def test_in_memory_rows_are_located_by_index():
    rows = _sts_rows()
    rows[2] = {**rows[2], "score": float("nan")}
    task = make_task("STS", "MemSTS", lambda: {"default": {"test": rows}})()
    with pytest.raises(LocalTaskError, match=r"MemSTS/default/test row 3: field 'score' is nan"):
        task.load_data()


@pytest.mark.parametrize("value", [0.7, 2, -1, "1", "yes", None])
def test_pair_labels_must_be_0_or_1(tmp_path, value):
    rows = [{"sentence1": TEXTS[i], "sentence2": TEXTS[i + 1], "label": i % 2} for i in range(5)]
    rows.append({"sentence1": "a", "sentence2": "b", "label": value})
    _write(tmp_path / "pairs" / "test.jsonl", rows)
    with pytest.raises(LocalTaskError, match=r"pairs/test\.jsonl:6: field 'label' must be one of \[0, 1\]"):
        _load(tmp_path / "pairs", "PairClassification")


def test_pair_labels_accept_booleans_and_whole_floats(tmp_path):
    rows = [{"sentence1": "a", "sentence2": "b", "label": v} for v in (True, False, 1.0, 0.0, 1, 0)]
    _write(tmp_path / "pairs" / "test.jsonl", rows)
    task = _load(tmp_path / "pairs", "PairClassification")
    assert list(task.dataset["default"]["test"]["labels"]) == [1, 0, 1, 0, 1, 0]


def _retrieval(tmp_path, corpus=None, queries=None, qrels=None):
    folder = tmp_path / "ret"
    _write(folder / "corpus.jsonl", corpus or [{"id": f"d{i}", "text": TEXTS[i]} for i in range(4)])
    _write(folder / "queries.jsonl", queries or [{"id": "q1", "text": "cat"}, {"id": "q2", "text": "dog"}])
    _write(folder / "qrels" / "test.jsonl", qrels or [{"query_id": "q1", "corpus_id": "d0"}])
    return folder


@pytest.mark.parametrize(
    ("part", "rows", "message"),
    [
        ("qrels", [{"query_id": "q1", "corpus_id": "d0"}, {"query_id": "q1", "corpus_id": "d9"}],
         r"qrels/test\.jsonl:2: document 'd9' is not in corpus\.jsonl"),
        ("qrels", [{"query_id": "q7", "corpus_id": "d0"}], r"qrels/test\.jsonl:1: query 'q7' is not in queries"),
        ("qrels", [{"query_id": "q1", "corpus_id": "d0"}, {"query_id": "q1", "corpus_id": "d0"}],
         r"qrels/test\.jsonl:2: \('q1', 'd0'\) is listed twice \(first at .*qrels/test\.jsonl:1\)"),
        ("qrels", [{"query_id": "q1", "corpus_id": "d0", "score": 0.5}],
         r"test\.jsonl:1: field 'score' must be an integer"),
        ("corpus", [{"id": "d0", "text": "a"}, {"id": "d1", "text": "b"}, {"id": "d0", "text": "c"}],
         r"corpus\.jsonl:3: duplicate document id 'd0' \(first at .*corpus\.jsonl:1\)"),
        ("queries", [{"id": "q1", "text": "a"}, {"id": 1.5, "text": "b"}],
         r"queries\.jsonl:2: field 'id' must be a non-empty string or an integer, got float"),
        ("corpus", [{"id": "d0", "text": "a"}, {"id": "d1"}], r"corpus\.jsonl:2: missing field 'text'"),
    ],
)  # fmt: skip
def test_retrieval_rows_are_checked(tmp_path, part, rows, message):
    folder = _retrieval(tmp_path, **{part: rows})
    with pytest.raises(LocalTaskError, match=message):
        _load(folder, "Retrieval")


# -- splits ---------------------------------------------------------------------------------------


def test_stray_jsonl_files_are_not_splits(tmp_path):
    folder = tmp_path / "sts"
    _write(folder / "test.jsonl", _sts_rows())
    _write(folder / "dev.jsonl", _sts_rows())
    _write(folder / "notes.jsonl", [{"note": "not data"}])
    with pytest.warns(UserWarning, match=r"ignoring notes\.jsonl: not a split"):
        task = _load(folder, "STS")
    assert task.metadata.eval_splits == ["dev", "test"] and set(task.dataset["default"]) == {"dev", "test"}
    # named explicitly, any file is a split (and no warning)
    _write(folder / "extra.jsonl", _sts_rows())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        explicit = local_task(folder, "STS", eval_splits=["extra", "notes"])
    assert explicit.metadata.eval_splits == ["extra", "notes"]


def test_stray_files_of_a_retrieval_folder_are_named(tmp_path):
    folder = _retrieval(tmp_path)
    _write(folder / "test.jsonl", [{"oops": 1}])
    _write(folder / "qrels" / "scratch.jsonl", [{"oops": 1}])
    with pytest.warns(UserWarning, match=r"ignoring test\.jsonl, qrels/scratch\.jsonl"):
        assert local_task(folder, "Retrieval").metadata.eval_splits == ["test"]


def test_only_stray_files_is_an_error(tmp_path):
    _write(tmp_path / "x" / "mydata.jsonl", _sts_rows())
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="missing files .*dev, validation, test"):
        local_task(tmp_path / "x", "STS")


# -- classification labels ------------------------------------------------------------------------


def _classification_folder(tmp_path, labels_train, labels_test):
    folder = tmp_path / "cls"
    _write(folder / "train.jsonl", [{"text": TEXTS[i % 16], "label": v} for i, v in enumerate(labels_train)])
    _write(
        folder / "test.jsonl", [{"text": TEXTS[(i + 5) % 16], "label": v} for i, v in enumerate(labels_test)]
    )
    return folder


def test_label_mapping_is_sorted_and_deterministic():
    assert label_mapping(["pos", "neg", "pos"]) == {"neg": 0, "pos": 1}
    assert label_mapping([7, 3, 5]) == {3: 0, 5: 1, 7: 2}


@pytest.mark.parametrize(("labels", "expected"), [(["pos", "neg"], [1, 0]), ([7, 3], [1, 0])])
def test_binary_string_and_non_01_labels_evaluate(tmp_path, tiny_st, labels, expected):
    folder = _classification_folder(tmp_path, labels * 8, labels * 4)
    task = local_task(folder, "Classification", n_experiments=2, samples_per_label=4)()
    task.load_data()
    assert list(task.dataset["default"]["test"]["label"])[:2] == expected
    result = mteb.evaluate(tiny_st, [task], cache=None, **RUN).task_results[0]
    scores = result.scores["test"][0]
    assert 0 <= scores["accuracy"] <= 1 and scores["ap"] is not None and math.isfinite(scores["ap"])


def test_classification_label_errors(tmp_path):
    folder = _classification_folder(tmp_path, ["a", "b", "a"], ["a", "c"])
    with pytest.raises(
        LocalTaskError, match=r"cls/test\.jsonl:2: label 'c' does not occur in .*train\.jsonl"
    ):
        _load(folder, "Classification")
    folder = _classification_folder(tmp_path, ["a", "b", 1], ["a"])
    with pytest.raises(
        LocalTaskError,
        match=r"train\.jsonl:3: label 1 \(int\) is not of the kind of 'a' \(str, at .*train\.jsonl:1\)",
    ):
        _load(folder, "Classification")
    folder = _classification_folder(tmp_path, ["a", "b", 0.5], ["a"])
    with pytest.raises(
        LocalTaskError, match=r"train\.jsonl:3: field 'label' must be a string or an integer label"
    ):
        _load(folder, "Classification")


# -- the new families -----------------------------------------------------------------------------


def test_clustering_task_evaluates(tmp_path, tiny_st):
    rows = [{"text": t, "label": ["animals", "things"][i % 2]} for i, t in enumerate(TEXTS)]
    _write(tmp_path / "clu" / "test.jsonl", rows)
    task = _load(tmp_path / "clu", "Clustering")
    assert task.metadata.type == "Clustering" and task.metadata.main_score == "v_measure"
    assert list(task.dataset["default"]["test"]["sentences"]) == TEXTS
    result = mteb.evaluate(tiny_st, [task], cache=None, **RUN).task_results[0]
    assert 0 <= result.scores["test"][0]["v_measure"] <= 1
    _write(tmp_path / "one" / "test.jsonl", [{"text": t, "label": "x"} for t in TEXTS])
    with pytest.raises(LocalTaskError, match="only one label"):
        _load(tmp_path / "one", "Clustering")


def _reranking(tmp_path, top_ranked):
    folder = _retrieval(
        tmp_path,
        qrels=[{"query_id": "q1", "corpus_id": "d0"}, {"query_id": "q2", "corpus_id": "d1", "score": 2}],
    )
    _write(folder / "top_ranked" / "test.jsonl", top_ranked)
    return folder


def test_reranking_task_evaluates(tmp_path, tiny_st):
    folder = _reranking(
        tmp_path,
        [
            {"query_id": "q1", "corpus_ids": ["d0", "d2"]},
            {"query_id": "q2", "corpus_ids": ["d1", "d3", "d0"]},
        ],
    )
    task = _load(folder, "Reranking")
    split = task.dataset["default"]["test"]
    assert split["top_ranked"] == {"q1": ["d0", "d2"], "q2": ["d1", "d3", "d0"]}
    assert split["relevant_docs"] == {"q1": {"d0": 1}, "q2": {"d1": 2}}
    result = mteb.evaluate(tiny_st, [task], cache=None, **RUN).task_results[0]
    assert 0 <= result.scores["test"][0]["map_at_1000"] <= 1


@pytest.mark.parametrize(
    ("top_ranked", "message"),
    [
        (
            [{"query_id": "q1", "corpus_ids": ["d0", "d9"]}],
            r"top_ranked/test\.jsonl:1: candidate documents \['d9'\]",
        ),
        (
            [{"query_id": "q1", "corpus_ids": ["d0"]}, {"query_id": "q1", "corpus_ids": ["d1"]}],
            "second candidate list",
        ),
        ([{"query_id": "q1", "corpus_ids": []}], "must be a non-empty list"),
        ([{"query_id": "q1", "corpus_ids": ["d0", "d0"]}], "listed twice"),
        ([{"query_id": "q1", "corpus_ids": ["d0"]}], r"queries \['q2'\] have qrels but no candidate list"),
    ],
)
def test_reranking_candidates_are_checked(tmp_path, top_ranked, message):
    with pytest.raises(LocalTaskError, match=message):
        _load(_reranking(tmp_path, top_ranked), "Reranking")


def test_reranking_needs_candidate_files(tmp_path):
    with pytest.raises(ValueError, match=r"top_ranked/test\.jsonl"):
        local_task(_retrieval(tmp_path), "Reranking")


def test_bitext_mining_task_evaluates_and_the_wrapper_names_its_type(tmp_path, tiny_st):
    rows = [{"sentence1": t, "sentence2": t.upper()} for t in TEXTS[:8]]
    _write(tmp_path / "bitext" / "test.jsonl", rows)
    task = _load(tmp_path / "bitext", "BitextMining", languages=["eng-Latn", "deu-Latn"])
    result = mteb.evaluate(tiny_st, [task], cache=None, **RUN).task_results[0]
    assert 0 <= result.scores["test"][0]["f1"] <= 1
    fresh = local_task(tmp_path / "bitext", "BitextMining")()
    with pytest.warns(
        UserWarning, match=r"type 'BitextMining'; layer_dynamics and per_layer are computed for"
    ):
        wrapped = mteb.evaluate(with_layer_dynamics(tiny_st), [fresh], cache=None, **RUN).task_results[0]
    row = wrapped.scores["test"][0]
    assert "layer_dynamics" not in row and row["f1"] == pytest.approx(result.scores["test"][0]["f1"])


# -- hypothesis: any single malformed row is reported with its line -------------------------------

_BAD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: not (0 <= x <= 5)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    line=st.integers(min_value=1, max_value=8),
    field=st.sampled_from(["sentence1", "sentence2", "score"]),
    value=_BAD_VALUES,
    drop=st.booleans(),
)
def test_any_malformed_sts_row_names_its_line(tmp_path_factory, line, field, value, drop):
    folder = tmp_path_factory.mktemp("h") / "sts"
    rows = _sts_rows(8)
    if drop:
        del rows[line - 1][field]
    else:
        rows[line - 1][field] = value
    _write(folder / "test.jsonl", [json.dumps(r) for r in rows])
    task = local_task(folder, "STS")()
    with pytest.raises(LocalTaskError, match=rf"test\.jsonl:{line}: .*'{field}'"):
        task.load_data()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    line=st.integers(min_value=1, max_value=6),
    value=st.one_of(
        st.floats().filter(lambda x: x not in (0.0, 1.0)),
        st.integers().filter(lambda x: x not in (0, 1)),
        st.text(max_size=4),
        st.none(),
    ),
)
def test_any_malformed_pair_label_names_its_line(tmp_path_factory, line, value):
    folder = tmp_path_factory.mktemp("h") / "pairs"
    rows = [{"sentence1": TEXTS[i], "sentence2": TEXTS[i + 1], "label": i % 2} for i in range(6)]
    rows[line - 1]["label"] = value
    _write(folder / "test.jsonl", [json.dumps(r) for r in rows])
    task = local_task(folder, "PairClassification")()
    with pytest.raises(LocalTaskError, match=rf"test\.jsonl:{line}: field 'label' must be one of \[0, 1\]"):
        task.load_data()


def test_new_supported_families_get_the_layer_keys(tmp_path, tiny_st):
    rows = [{"text": t, "label": ["animals", "things"][i % 2]} for i, t in enumerate(TEXTS)]
    _write(tmp_path / "clu" / "test.jsonl", rows)
    folder = _reranking(
        tmp_path,
        [{"query_id": "q1", "corpus_ids": ["d0", "d2"]}, {"query_id": "q2", "corpus_ids": ["d1", "d3"]}],
    )
    tasks = [local_task(tmp_path / "clu", "Clustering")(), local_task(folder, "Reranking")()]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no "no augmentation ran" warning
        results = mteb.evaluate(with_layer_dynamics(tiny_st), tasks, cache=None, **RUN).task_results
    for result in results:
        row = result.scores["test"][0]
        assert "layer_dynamics" in row and row["per_layer"]["layers"] == [0, 1, 2, 3, 4], result.task_name
        # every layer replays the ordinary run's random draws (clustering bootstraps from the task's rng)
        assert row["per_layer"]["scores"][-1] == pytest.approx(row["main_score"], abs=1e-6), result.task_name


def test_make_task_takes_its_settings_as_an_object_or_as_keywords():
    from mteb_lrd.tasks.local_tasks import TaskSettings, make_task

    rows = [
        {"sentence1": "a b", "sentence2": "a c", "score": 1.0},
        {"sentence1": "x", "sentence2": "y", "score": 3.0},
    ]
    settings = TaskSettings(eval_splits=("dev",), score_range=(0.0, 4.0), revision="r1")
    by_object = make_task("STS", "ObjSTS", lambda: {"default": {"dev": rows}}, settings)
    by_keywords = make_task("STS", "KwSTS", lambda: {"default": {"dev": rows}}, eval_splits=("dev",),
                            score_range=(0.0, 4.0), revision="r1")  # fmt: skip
    for cls in (by_object, by_keywords):
        assert cls.metadata.eval_splits == ["dev"] and cls.metadata.dataset["revision"] == "r1"
        assert (cls.min_score, cls.max_score) == (0.0, 4.0)
    overridden = make_task(
        "STS", "OvSTS", lambda: {"default": {"test": rows}}, settings, eval_splits=("test",)
    )
    assert overridden.metadata.eval_splits == ["test"]
    with pytest.raises(TypeError, match="eval_split"):
        make_task("STS", "BadSTS", lambda: {}, eval_split=("dev",))
    with pytest.raises(ValueError, match="eval_splits must name at least one split"):
        TaskSettings(eval_splits=())
