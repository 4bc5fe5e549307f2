"""scripts/peers/bench_joey_speed.py offline: medians, and the A B A B order with resuming
(joeykit.compare)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
from test_bench_scripts import load_script, usage_error


@pytest.fixture(scope="module")
def speed() -> ModuleType:
    return load_script("peers/bench_joey_speed")


def test_the_first_interval_is_left_out_as_warm_up(speed: ModuleType):
    assert speed.steady_rate([100.0, 900.0, 1100.0, 1000.0]) == 1000.0
    assert speed.steady_rate([700.0]) == 700.0  # too short a run: the one interval it has
    assert speed.steady_rate([]) is None


def test_summary_pairs_rounds_and_ignores_an_unfinished_one(speed: ModuleType):
    def run(rate: float) -> dict:
        return {"target_tokens_per_sec": rate}

    rounds = [
        {"joey": run(600.0), "seq2seq": run(3000.0)},
        {"joey": run(500.0), "seq2seq": run(3000.0)},
        {"joey": run(10.0)},  # interrupted before seq2seq's run
    ]
    summarize = load_script("peers/joeykit").summarize
    summary = summarize(rounds, "target_tokens_per_sec")
    assert summary["paired_rounds"] == 2
    assert summary["joey_median"] == 550.0 and summary["seq2seq_median"] == 3000.0
    assert summary["ratio"] == pytest.approx(3000.0 / 550.0)
    assert summary["ratio_per_round"] == [5.0, 6.0]
    assert summarize([{"joey": run(1.0)}], "target_tokens_per_sec") == {}


def test_runs_alternate_and_a_finished_run_is_not_redone(
    speed: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    corpus = tmp_path / "multi30k"
    corpus.mkdir()
    (corpus / "train.en.gz").write_bytes(b"")
    calls: list[tuple[str, str]] = []

    def fake_joey(python, model, data_dir, work, minutes, log_every) -> dict:
        calls.append(("joey", work.name))
        return {"target_tokens_per_sec": 500.0}

    def fake_ours(config, corpus, run_dir, minutes, log_every) -> dict:
        calls.append(("seq2seq", run_dir.name))
        return {"target_tokens_per_sec": 2000.0}

    monkeypatch.setattr(speed, "joey_environment", lambda args: (Path("python"), corpus))
    monkeypatch.setattr(speed, "measure_train", fake_joey)
    monkeypatch.setattr(speed, "train_ours", fake_ours)
    out = tmp_path / "joey-speed.json"
    common = ["--corpus", str(corpus), "--cache", str(tmp_path / "cache"), "--out", str(out)]

    speed.main([*common, "--rounds", "1"])
    speed.main([*common, "--rounds", "2"])  # adds the second round only

    assert calls == [
        ("joey", "rnn-round0"), ("seq2seq", "rnn-round0"),
        ("joey", "transformer-round0"), ("seq2seq", "transformer-round0"),
        ("joey", "rnn-round1"), ("seq2seq", "rnn-round1"),
        ("joey", "transformer-round1"), ("seq2seq", "transformer-round1"),
    ]  # fmt: skip
    record = json.loads(out.read_text())
    pair = {"joey": {"target_tokens_per_sec": 500.0}, "seq2seq": {"target_tokens_per_sec": 2000.0}}
    assert record["transformer"]["rounds"] == [pair, pair]
    assert record["transformer"]["ratio"] == 4.0 and record["rnn"]["ratio_per_round"] == [4.0] * 2


def test_bad_arguments_are_refused(speed: ModuleType, tmp_path: Path, capsys):
    message = usage_error(capsys, speed.parse_args, ["--minutes", "0", "--corpus", str(tmp_path)])
    assert message.endswith("error: --minutes must be positive")
    message = usage_error(capsys, speed.parse_args, ["--corpus", str(tmp_path)])  # no corpus
    assert message.endswith(f"error: no Multi30k corpus in {tmp_path} (run `make multi30k`)")
