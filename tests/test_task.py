"""The training loss and the learning-rate schedule."""

import math

import pytest
import torch
import torch.nn.functional as F

from seq2seq.task import label_smoothed_nll, warmup_then_decay


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_loss_equals_torch_cross_entropy_on_valid_positions(smoothing):
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11)
    target = torch.randint(0, 11, (3, 5))
    lengths = torch.tensor([5, 2, 0])
    loss, nll, n_tokens = label_smoothed_nll(logits, target, lengths, smoothing)
    valid = torch.arange(5) < lengths.unsqueeze(1)
    expected = F.cross_entropy(
        logits[valid], target[valid], label_smoothing=smoothing, reduction="sum"
    )
    assert int(n_tokens) == 7
    assert torch.isclose(loss, expected, atol=1e-5)
    assert torch.isclose(nll, F.cross_entropy(logits[valid], target[valid], reduction="sum"))


def test_padding_positions_never_contribute_even_when_their_id_is_real():
    logits = torch.randn(1, 4, 6)
    target = torch.tensor([[1, 2, 3, 4]])
    loss, _, _ = label_smoothed_nll(logits, target, torch.tensor([2]), 0.1)
    changed = logits.clone()
    changed[0, 2:] = 100.0  # garbage past the valid length
    loss_changed, _, _ = label_smoothed_nll(changed, target, torch.tensor([2]), 0.1)
    assert torch.isclose(loss, loss_changed)


def test_warmup_rises_linearly_then_decays_as_inverse_sqrt():
    factor = warmup_then_decay(100, "inverse_sqrt")
    assert factor(0) == pytest.approx(0.01)
    assert factor(49) == pytest.approx(0.5)
    assert factor(99) == pytest.approx(1.0)
    assert factor(399) == pytest.approx(math.sqrt(100 / 400))
    constant = warmup_then_decay(10, "constant")
    assert constant(1000) == 1.0
