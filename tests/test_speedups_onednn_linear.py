"""Linear layers computed in oneDNN at inference (seq2seq/speedups/onednn_linear.py) give
what their plain product gives, only where no autograd or autocast is in play, and leave
the model as it was."""

import pytest
import torch
from torch import nn

from seq2seq.inference.search import SearchSettings, translate_batch
from seq2seq.model import VocabSpec
from seq2seq.speedups import onednn_linear
from seq2seq.speedups.onednn_linear import linear, onednn_linears
from seq2seq.speedups.switch import VARIABLE
from seq2seq.transformer import Transformer

pytestmark = pytest.mark.skipif(not onednn_linear.available(), reason="PyTorch without oneDNN")

VOCAB = VocabSpec(src_size=40, tgt_size=40, pad_id=0, bos_id=2, eos_id=3, joint=True)


def routed_through_onednn(layer: nn.Linear) -> bool:
    return layer in onednn_linear._packed


@pytest.mark.parametrize("shape", [(7, 16), (3, 5, 16), (1, 16)], ids=["rows", "batch", "one"])
@pytest.mark.parametrize("bias", [True, False])
def test_product_equals_the_plain_one(shape, bias):
    torch.manual_seed(0)
    layer = nn.Linear(16, 24, bias=bias)
    x = torch.randn(shape)
    with torch.inference_mode():
        out = linear(layer, x)
        assert routed_through_onednn(layer)
        assert out.shape == (*shape[:-1], 24)
        assert torch.allclose(out, layer(x), atol=1e-5)


def test_non_contiguous_input():
    torch.manual_seed(0)
    layer = nn.Linear(16, 8)
    x = torch.randn(16, 6).t()  # [6, 16], strided
    with torch.inference_mode():
        assert torch.allclose(linear(layer, x), layer(x), atol=1e-5)


def test_a_changed_weight_is_reordered_again():
    torch.manual_seed(0)
    layer = nn.Linear(16, 8)
    x = torch.randn(4, 16)
    with torch.no_grad():
        before = linear(layer, x)
        layer.weight.mul_(2)  # as an optimizer step does: in place, version bumped
        after = linear(layer, x)
        assert torch.allclose(after, layer(x), atol=1e-5)
        assert not torch.allclose(after, before)


def test_autograd_and_autocast_take_the_plain_product():
    layer = nn.Linear(16, 8)
    x = torch.randn(4, 16)
    out = linear(layer, x)
    out.sum().backward()  # autograd works: the product was PyTorch's own
    assert layer.weight.grad is not None
    assert not routed_through_onednn(layer)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert linear(layer, x).dtype == torch.bfloat16
    assert not routed_through_onednn(layer)


def tiny_transformer() -> Transformer:
    torch.manual_seed(0)
    return Transformer(VOCAB, model_size=32, num_heads=4, ff_size=64, encoder_layers=2).eval()


def search(model: Transformer, beam: int) -> list:
    torch.manual_seed(1)
    src = torch.randint(4, VOCAB.src_size, (4, 9))
    with torch.inference_mode():
        nbests = translate_batch(model, src, torch.tensor([9, 6, 3, 1]), SearchSettings(beam))
    return [[(h.tokens, round(h.score, 4)) for h in hyps] for hyps in nbests]


@pytest.mark.parametrize("beam", [1, 5], ids=["greedy", "beam5"])
def test_search_inside_the_block_equals_the_plain_search(beam):
    model = tiny_transformer()
    plain = search(model, beam)
    with onednn_linears(model):
        fast = search(model, beam)
        assert all(map(routed_through_onednn, (model.output, model.decoder[0].feed_forward[0])))
    assert fast == plain


def test_the_block_leaves_the_model_as_it_was():
    model = tiny_transformer()
    layers = [m for m in model.modules() if isinstance(m, nn.Linear)]
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with onednn_linears(model):
        assert all("forward" in vars(layer) for layer in layers)
    assert not any("forward" in vars(layer) for layer in layers)
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())


def test_switched_off_the_layers_are_untouched(monkeypatch):
    monkeypatch.setenv(VARIABLE, "onednn_linear")
    model = tiny_transformer()
    with onednn_linears(model):
        assert not any("forward" in vars(m) for m in model.modules())
        search(model, 5)
    assert not routed_through_onednn(model.output)


def test_overlapping_blocks_switch_back_when_the_last_closes():
    model = tiny_transformer()
    first, second = onednn_linears(model), onednn_linears(model)
    first.__enter__()
    second.__enter__()  # as a second server thread would, while the first still searches
    first.__exit__(None, None, None)
    assert "forward" in vars(model.output)  # the second block still runs through oneDNN
    second.__exit__(None, None, None)
    assert not any("forward" in vars(m) for m in model.modules())
