"""Long work reports itself: a bar on a terminal, log lines with done/total, rate and time left
everywhere else (a job writing to a file)."""

from __future__ import annotations

import logging

import pytest

import mteb_lrd.progress as progress
from mteb_lrd.progress import Progress
from tests.tiny_models import TEXTS, load_tiny_tokenizer


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "mteb_lrd.progress"]


def test_a_stage_longer_than_the_interval_logs_done_total_rate_and_time_left(caplog, monkeypatch):
    clock = iter(range(0, 1000, 10))  # every reading 10 s later than the one before
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    with caplog.at_level(logging.INFO, logger="mteb_lrd.progress"):
        items = list(Progress(range(4), desc="DySem forward", unit="batch", interval=15))
    assert items == [0, 1, 2, 3]
    lines = _lines(caplog)
    # readings: start 0; updates at 10 (no line), 20 (line), 30 (no), 40 (line); close at 50
    assert lines[0] == "DySem forward: 2/4 batch (50 %), 0.1 batch/s, about 20s left"
    assert lines[1] == "DySem forward: 4/4 batch (100 %), 0.1 batch/s, about 0s left"
    assert lines[2] == "DySem forward: done, 4 batch in 50s"


def test_a_short_stage_stays_quiet_and_a_bar_logs_nothing(caplog):
    with caplog.at_level(logging.INFO, logger="mteb_lrd.progress"):
        list(Progress(range(3), desc="quick"))
        with Progress(total=3, desc="bar", show=True) as bar:
            bar.update(3)
    assert _lines(caplog) == []


def test_without_a_total_the_count_is_logged(caplog):
    with caplog.at_level(logging.INFO, logger="mteb_lrd.progress"):
        counter = Progress(desc="texts", unit="text", interval=0.0)
        counter.update(7)
        counter.close()
    assert _lines(caplog)[0].startswith("texts: 7 text, ")


def test_iterating_a_counter_without_items_is_refused():
    with pytest.raises(TypeError, match="update"):
        list(Progress(desc="x"))


@pytest.mark.parametrize("stage", ["extraction", "dysem"])
def test_model_stages_log_when_no_bar_is_shown(stage, tiny_model_dir, caplog, monkeypatch):
    """A tiny model's extraction and DySem forward passes, no bar (output to a file): log lines."""
    monkeypatch.setattr(progress, "LOG_INTERVAL_S", 0.0)
    path = tiny_model_dir("llama")
    with caplog.at_level(logging.INFO, logger="mteb_lrd.progress"):
        if stage == "extraction":
            from mteb_lrd.extraction.extractor import LayerExtractor

            extractor = LayerExtractor(
                str(path), load_tiny_tokenizer(path), batch_size=4, show_progress_bar=False
            )
            extractor.extract(TEXTS)
            desc, unit = "layers", "text"
        else:
            from mteb_lrd.dysem.representation import RepresentationExtractor

            dysem = RepresentationExtractor(path, load_tiny_tokenizer(path), batch_size=4, device="cpu")
            dysem.show_progress_bar = False
            dysem.extract(TEXTS, ["attention"])
            desc, unit = "DySem forward", "batch"
    lines = _lines(caplog)
    assert any(
        line.startswith(f"{desc}: ") and f"/{len(TEXTS) if unit == 'text' else 4} {unit}" in line
        for line in lines
    ), lines
    assert lines[-1].startswith(f"{desc}: done")
