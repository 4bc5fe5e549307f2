"""The learning-rate schedule."""

import logging
import math
from pathlib import Path

import pytest
import torch
from tiny_run import SIZES, tiny_config, write_config

from seq2seq.commands.main import main
from seq2seq.common.errors import Seq2SeqError
from seq2seq.text.demo_corpus import write_corpus
from seq2seq.training.schedule import WarmupThenDecay


def test_warmup_rises_linearly_then_decays_as_inverse_sqrt():
    factor = WarmupThenDecay(100, "inverse_sqrt")
    assert factor(0) == pytest.approx(0.01)
    assert factor(49) == pytest.approx(0.5)
    assert factor(99) == pytest.approx(1.0)
    assert factor(399) == pytest.approx(math.sqrt(100 / 400))
    constant = WarmupThenDecay(10, "constant")
    assert constant(1000) == 1.0


def test_cosine_falls_from_1_to_0_at_the_last_step():
    factor = WarmupThenDecay(10, "cosine", total_steps=110)
    assert factor(9) == pytest.approx(1.0)
    assert factor(59) == pytest.approx(0.5)
    assert factor(109) == pytest.approx(0.0)
    assert factor(500) == pytest.approx(0.0)
    values = [factor(s) for s in range(9, 110)]
    assert all(a >= b for a, b in zip(values[:-1], values[1:], strict=True))


def test_cosine_without_a_step_budget_is_refused():
    with pytest.raises(Seq2SeqError, match="set trainer.max_epochs or trainer.max_steps"):
        WarmupThenDecay(10, "cosine").plan(None, 10)


def test_cosine_of_a_run_shorter_than_its_warm_up_warms_up_over_its_first_half():
    factor = WarmupThenDecay(500, "cosine")
    note = factor.plan(100, 500)
    assert note == (
        "the run has 100 training steps, no more than model.warmup_steps=500: the cosine "
        "schedule warms up over 50 instead"
    )
    assert factor(24) == pytest.approx(0.5)
    assert factor(49) == pytest.approx(1.0)
    assert factor(99) == pytest.approx(0.0)
    assert factor.plan(1, 500) is not None and factor.warmup_steps == 0  # fast_dev_run
    assert factor.plan(600, 500) is None and factor.warmup_steps == 500  # planned anew


@pytest.mark.slow  # a fit
def test_a_cosine_fit_ends_at_learning_rate_zero(tmp_path: Path):
    """The cosine's step budget comes from the Trainer (max_epochs x batches per epoch)."""
    corpus = tmp_path / "corpus"
    write_corpus(corpus, seed=3, sizes=SIZES)
    config = tiny_config(tmp_path, corpus)
    config["model"].update(schedule="cosine", warmup_steps=3)
    main(["fit", "--config", str(write_config(tmp_path / "cosine.yaml", config))])
    state = torch.load(tmp_path / "run/checkpoints/last.ckpt", weights_only=True)
    scheduler = state["lr_schedulers"][0]
    assert scheduler["last_epoch"] == state["global_step"] > 3
    assert scheduler["_last_lr"] == [pytest.approx(0.0, abs=1e-12)]


@pytest.mark.slow  # a fit
def test_a_cosine_fit_shorter_than_its_warm_up_trains_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    """It was refused: "the cosine schedule needs more training steps (18) than warm-up
    steps (1000)"."""
    corpus = tmp_path / "corpus"
    write_corpus(corpus, seed=3, sizes=SIZES)
    config = tiny_config(tmp_path, corpus)
    config["model"].update(schedule="cosine", warmup_steps=1000)
    caplog.set_level(logging.INFO, logger="seq2seq")
    main(["fit", "--config", str(write_config(tmp_path / "cosine.yaml", config))])
    state = torch.load(tmp_path / "run/checkpoints/last.ckpt", weights_only=True)
    steps = state["global_step"]
    note = f"the run has {steps} training steps, no more than model.warmup_steps=1000"
    assert sum(note in record.getMessage() for record in caplog.records) == 1
    assert state["lr_schedulers"][0]["_last_lr"] == [pytest.approx(0.0, abs=1e-12)]
