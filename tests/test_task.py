"""The learning-rate schedule."""

import math

import pytest

from seq2seq.task import warmup_then_decay


def test_warmup_rises_linearly_then_decays_as_inverse_sqrt():
    factor = warmup_then_decay(100, "inverse_sqrt")
    assert factor(0) == pytest.approx(0.01)
    assert factor(49) == pytest.approx(0.5)
    assert factor(99) == pytest.approx(1.0)
    assert factor(399) == pytest.approx(math.sqrt(100 / 400))
    constant = warmup_then_decay(10, "constant")
    assert constant(1000) == 1.0
