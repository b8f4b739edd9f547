"""Which hidden states get per-layer scores: parsing, resolving, and the "already done" rule."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mteb_lrd.adapter.layer_choice import check_layer_choice, choice_label, covers, resolve_layers
from mteb_lrd.adapter.options import LayerDynamicsOptions, row_is_complete


@pytest.mark.parametrize(
    ("choice", "num_states", "expected"),
    [
        ("auto", 7, (0, 1, 2, 3, 4, 5, 6)),  # MiniLM: every state
        ("auto", 13, tuple(range(13))),  # BERT-base / mpnet: every state
        ("auto", 33, (0, 4, 8, 12, 16, 20, 24, 28, 32)),  # a 32-block decoder: 9 evenly spaced
        ("auto", 29, (0, 4, 7, 10, 14, 18, 21, 24, 28)),  # np.round(linspace(0, 28, 9)), half to even
        ("all", 33, tuple(range(33))),
        ("every:4", 13, (0, 4, 8, 12)),
        ("every:5", 13, (0, 5, 10, 12)),  # h_L added
        ("last:3", 13, (10, 11, 12)),
        ("last:50", 7, tuple(range(7))),
        ("0,8", 13, (0, 8, 12)),
        ([3, 1, 3], 7, (1, 3, 6)),
        ((6,), 7, (6,)),
    ],
)
def test_resolve_layers(choice, num_states, expected):
    assert resolve_layers(choice, num_states) == expected


def test_an_index_beyond_the_last_state_names_the_range():
    with pytest.raises(ValueError, match=r"hidden states \[13\].*h_0 \.\. h_12"):
        resolve_layers([0, 13], 13)


@given(st.text(max_size=12))
def test_any_text_is_accepted_or_refused_with_the_allowed_forms(text):
    try:
        check_layer_choice(text)
    except ValueError as err:
        assert "per_layer_layers" in str(err)
    else:  # accepted: it resolves on a 13-state model unless an index is out of range
        try:
            layers = resolve_layers(text, 13)
        except ValueError as err:
            assert "h_0 .. h_12" in str(err)
        else:
            assert layers[-1] == 12 and list(layers) == sorted(set(layers))


@pytest.mark.parametrize(
    "bad", ["every:0", "last:0", "every:", "-1", "1,,2", "", [], [-1], [1.5], [True], 3, None]
)
def test_bad_choices_fail_up_front(bad):
    with pytest.raises(ValueError, match="per_layer_layers"):
        LayerDynamicsOptions(per_layer_layers=bad)


def test_choice_label_is_canonical():
    assert choice_label([8, 0, 8]) == choice_label("0,8") == "0,8"
    assert choice_label("auto") == "auto"
    assert LayerDynamicsOptions(per_layer_layers=[2, 1]).per_layer_layers == (2, 1)  # hashable


def test_covers_and_row_is_complete():
    all_seven = {"layers": list(range(7)), "scores": [0.1] * 7}  # an entry written before the choice existed
    last_two = {"layers": [5, 6], "num_states": 7, "scores": [0.1, 0.2]}
    assert covers(all_seven, "auto") and covers(all_seven, "last:2") and covers(all_seven, [0, 3])
    assert covers(last_two, "last:2") and not covers(last_two, "all") and not covers(last_two, "every:2")
    assert not covers({"error": "boom", "layers": [6]}, "last:1")
    keys = ("layer_dynamics", "per_layer")
    assert row_is_complete({"layer_dynamics": {}, "per_layer": last_two}, keys, "last:2")
    assert not row_is_complete({"layer_dynamics": {}, "per_layer": last_two}, keys, "all")
    assert not row_is_complete({"per_layer": all_seven}, keys, "auto")  # a key missing
    assert row_is_complete({"layer_dynamics": {}}, ("layer_dynamics",), "all")  # per_layer not wanted
    # an error entry is final: not retried forever
    assert row_is_complete({"layer_dynamics": {}, "per_layer": {"error": "x"}}, keys, "all")


def _forwards(model):
    counter = {"n": 0}
    handle = model[0].auto_model.embeddings.register_forward_hook(
        lambda *_: counter.__setitem__("n", counter["n"] + 1)
    )
    return counter, handle


def test_a_rerun_with_states_not_scored_yet_is_not_skipped(tiny_st, tmp_path):
    import mteb

    from mteb_lrd import with_layer_dynamics
    from tests.mteb_helpers import sts_task

    cache = mteb.ResultCache(tmp_path / "results")
    counter, handle = _forwards(tiny_st)

    def run(choice):
        counter["n"] = 0
        result = mteb.evaluate(
            with_layer_dynamics(tiny_st, per_layer_layers=choice), [sts_task()], cache=cache,
            encode_kwargs={"batch_size": 8}, co2_tracker=False, show_progress_bar=False,
        )  # fmt: skip
        return counter["n"], result.task_results[0].scores["test"][0]["per_layer"]

    try:
        forwards, first = run("last:2")
        assert forwards > 0 and first["layers"] == [3, 4] and first["layer_choice"] == "last:2"
        assert first["num_states"] == 5 and first["relative_depth"] == [0.75, 1.0]
        forwards, again = run("last:2")
        assert forwards == 0 and again["layers"] == first["layers"]  # done: skipped (mteb rounds on reading)
        assert again["scores"] == pytest.approx(first["scores"], abs=1e-6)
        forwards, wider = run("every:2")  # h_0 and h_2 were never scored: re-run
        assert forwards > 0 and wider["layers"] == [0, 2, 4]
        assert wider["scores"][-1] == pytest.approx(first["scores"][-1], abs=1e-6)
        forwards, _ = run([4])  # covered by the stored entry
        assert forwards == 0
    finally:
        handle.remove()


def test_ray_ledger_checks_the_layer_choice(tmp_path):
    from mteb_lrd.io import atomic_write_json
    from mteb_lrd.runners.distributed import Unit, UnitConfig, _ledger, is_finished

    unit = Unit("default", "demo")
    row = {"hf_subset": "default", "main_score": 0.5, "layer_dynamics": {},
           "per_layer": {"layers": [4, 5, 6], "num_states": 7, "scores": [0.1, 0.2, 0.3]}}  # fmt: skip
    result = tmp_path / "Demo.json"
    atomic_write_json(result, {"scores": {"test": [row]}})
    for choice, done in (("last:3", True), ("last:2", True), ("auto", False), ([0, 6], False)):
        config = UnitConfig(str(tmp_path), {"per_layer_layers": choice})
        atomic_write_json(_ledger(config, unit), {"path": str(result)})
        assert is_finished(unit, config) is done, choice
    assert is_finished(unit, UnitConfig(str(tmp_path), {"per_layer": False}))
