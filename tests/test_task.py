"""The learning-rate schedule."""

import math
from pathlib import Path

import pytest
import torch
from tiny_run import SIZES, tiny_config, write_config

from seq2seq.cli import main
from seq2seq.corpus import write_corpus
from seq2seq.errors import Seq2SeqError
from seq2seq.task import WarmupThenDecay


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
    with pytest.raises(Seq2SeqError, match="max_epochs or trainer.max_steps"):
        WarmupThenDecay(10, "cosine", total_steps=None).check()


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
