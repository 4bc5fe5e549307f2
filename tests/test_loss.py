"""The label-smoothed training loss."""

import pytest
import torch
import torch.nn.functional as F

from seq2seq.training.loss import label_smoothed_nll

# Every test here runs on --device: the CPU by default, a GPU with `pytest --device cuda`.
pytestmark = pytest.mark.usefixtures("on_device")


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


def test_loss_gradient_equals_autograd_of_the_composite_formula():
    torch.manual_seed(2)
    logits = torch.randn(2, 4, 9, requires_grad=True)
    target = torch.randint(0, 9, (2, 4))
    lengths = torch.tensor([4, 3])
    loss, _, _ = label_smoothed_nll(logits, target, lengths, 0.2)
    loss.backward()
    fused_grad = logits.grad.clone()
    logits.grad = None
    valid = torch.arange(4) < lengths.unsqueeze(1)
    reference = F.cross_entropy(logits[valid], target[valid], label_smoothing=0.2, reduction="sum")
    reference.backward()
    assert torch.allclose(fused_grad, logits.grad, atol=1e-6)


def test_loss_accepts_bf16_logits():
    logits = torch.randn(2, 3, 7).bfloat16().requires_grad_()
    target = torch.randint(0, 7, (2, 3))
    loss, nll, n = label_smoothed_nll(logits, target, torch.tensor([3, 1]), 0.1)
    loss.backward()
    assert logits.grad.dtype == torch.bfloat16 and int(n) == 4 and loss.dtype == torch.float32
