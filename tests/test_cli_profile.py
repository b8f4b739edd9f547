"""``mteb-lrd profile`` end to end on a tiny model, and its input handling."""

from __future__ import annotations

import json

import pytest

from mteb_lrd.cli import main
from mteb_lrd.cli.profile import read_text_file


def test_profile_end_to_end(tiny_st_dir, texts, tmp_path, capsys):
    data = tmp_path / "texts.jsonl"
    data.write_text("\n".join(json.dumps({"text": t}) for t in texts * 3), encoding="utf-8")
    out = tmp_path / "lrd.json"
    code = main(
        [
            "profile",
            "--model",
            str(tiny_st_dir),
            "--texts",
            str(data),
            "--out",
            str(out),
            "--no-progress",
            "--nrs-k",
            "4",
            "--gfmi-k",
            "5",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "frenet_d0L" in printed and "layer" in printed
    record = json.loads(out.read_text())
    assert record["num_layers"] == 4 and len(record["frenet"]["speed"]) == 4
    assert record["n_texts"] == len(texts)  # duplicates folded by read_text_file
    assert record["extraction"]["pooling"] == "sentence-transformers:mean"


def test_read_texts_forms(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(
        '"plain"\n{"text": "a"}\n{"sentence1": "b", "sentence2": "a", "score": 1}\n\n', encoding="utf-8"
    )
    assert read_text_file(path) == ["plain", "a", "b"]
    path.write_text('{"other": 1}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=":1: expected"):
        read_text_file(path)
    path.write_text("{oops\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not JSON"):
        read_text_file(path)


def test_bad_input_is_one_clear_line(tmp_path, capsys):
    code = main(["profile", "--texts", str(tmp_path / "missing.jsonl"), "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("mteb-lrd profile: error:") and "missing.jsonl" in err
