"""The CPU dropout: rate, expectation, gradient, determinism, and its edge cases; the same
rate and scale as the plain path, ``F.dropout``, which SEQ2SEQ_PLAIN=cpu_dropout runs."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from seq2seq.model import VocabSpec
from seq2seq.speedups.cpu_dropout import CPUDropout, cpu_dropouts, dropout, dropout_threshold
from seq2seq.speedups.switch import VARIABLE
from seq2seq.transformer import Transformer


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_drops_the_requested_share_and_keeps_the_expectation(p):
    torch.manual_seed(0)
    x = torch.ones(1000, 1000)
    y = dropout(x, p, training=True)
    dropped = (y == 0).float().mean().item()
    assert dropped == pytest.approx(p, abs=0.002)  # 1e6 draws: std of the share < 0.0005
    kept = y[y != 0]
    assert torch.all(kept == kept[0])  # one scale for every kept element
    assert y.mean().item() == pytest.approx(1.0, abs=0.003)


def test_scale_is_the_inverse_of_the_exact_keep_probability():
    p = 0.1
    keep = 1.0 - (dropout_threshold(p) + 2**15) / 2**16
    y = dropout(torch.ones(64, 64), p, training=True)
    assert y.max().item() == pytest.approx(1.0 / keep, rel=1e-6)


def test_mask_elements_are_independent_of_their_neighbors():
    """Each 64-bit draw feeds four elements: neighbors must still be uncorrelated."""
    torch.manual_seed(1)
    kept = (dropout(torch.ones(1_000_000), 0.5, training=True) != 0).float()
    for lag in (1, 2, 3, 4):
        both = (kept[:-lag] * kept[lag:]).mean().item()
        assert both == pytest.approx(0.25, abs=0.003)


def test_gradient_is_the_mask_times_the_scale():
    torch.manual_seed(2)
    x = torch.randn(50, 40, requires_grad=True)
    y = dropout(x, 0.3, training=True)
    y.sum().backward()
    scale = (y[y != 0] / x.detach()[y != 0]).mean()
    torch.testing.assert_close(x.grad, (y != 0).float() * scale)


def test_same_seed_same_mask_and_dtype_kept():
    x = torch.randn(7, 9, 11, dtype=torch.bfloat16)
    torch.manual_seed(3)
    first = dropout(x, 0.2, training=True)
    torch.manual_seed(3)
    second = dropout(x, 0.2, training=True)
    assert first.dtype == torch.bfloat16 and first.shape == x.shape
    assert torch.equal(first, second)


def test_identity_when_not_training_or_nothing_to_drop():
    x = torch.randn(5, 3)
    assert dropout(x, 0.5, training=False) is x
    assert dropout(x, 0.0, training=True) is x
    assert torch.equal(dropout(x, 1.0, training=True), torch.zeros_like(x))
    assert torch.equal(dropout(x, 1 - 1e-6, training=True), torch.zeros_like(x))  # rounds to 1


def test_module_follows_train_and_eval_and_rejects_bad_rates():
    module = CPUDropout(0.4)
    x = torch.ones(100, 100)
    assert (module(x) == 0).any()
    module.eval()
    assert module(x) is x
    with pytest.raises(ValueError, match="dropout probability"):
        CPUDropout(1.5)


def test_the_trick_is_applied_from_outside_to_every_dropout_of_a_model():
    vocab = VocabSpec(src_size=20, tgt_size=20, pad_id=0, bos_id=2, eos_id=3, joint=True)
    model = Transformer(vocab, model_size=16, num_heads=2, ff_size=32, dropout=0.2,
                        attention_dropout=0.1, activation_dropout=0.3)  # fmt: skip
    rates = [m.p for m in model.modules() if isinstance(m, nn.Dropout)]
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    assert not [m for m in model.modules() if isinstance(m, CPUDropout)]  # the core's own
    assert cpu_dropouts(model) is model
    swapped = [m for m in model.modules() if isinstance(m, nn.Dropout)]
    assert all(type(m) is CPUDropout for m in swapped)
    assert [m.p for m in swapped] == rates and len(rates) > 5
    assert model.state_dict().keys() == weights.keys()  # no weights: nothing else changed


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_drops_like_the_plain_path(p):
    """The same share dropped and the same scale on what is kept as ``F.dropout``."""
    x = torch.ones(1000, 1000)
    torch.manual_seed(4)
    ours, plain = dropout(x, p, training=True), F.dropout(x, p, training=True)
    assert (ours == 0).float().mean().item() == pytest.approx(
        (plain == 0).float().mean().item(), abs=0.003
    )
    assert ours.max().item() == pytest.approx(plain.max().item(), rel=1e-4)  # 1 / (1 - p)


@pytest.mark.parametrize("cut", ["cpu_dropout", "1"])
def test_switched_off_it_is_torch_dropout(monkeypatch, cut):
    monkeypatch.setenv(VARIABLE, cut)
    x = torch.randn(64, 80)
    module = CPUDropout(0.3)
    for drop in (lambda: dropout(x, 0.3, training=True), lambda: module(x)):
        torch.manual_seed(5)
        expected = F.dropout(x, 0.3, training=True)
        torch.manual_seed(5)
        assert torch.equal(drop(), expected)
