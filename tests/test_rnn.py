"""The RNN encoder-decoders against the model contract."""

import pytest
import torch

from seq2seq.attention import AdditiveAttention
from seq2seq.model import VocabSpec
from seq2seq.rnn import RNNSeq2Seq

# Every test here runs on --device: the CPU by default, a GPU with `pytest --device cuda`.
pytestmark = pytest.mark.usefixtures("on_device")

VOCAB = VocabSpec(src_size=40, tgt_size=30, pad_id=0, bos_id=2, eos_id=3, joint=False)


def make_model(**overrides) -> RNNSeq2Seq:
    torch.manual_seed(0)
    settings = dict(embed_size=12, hidden_size=16, dropout=0.0)
    settings.update(overrides)
    return RNNSeq2Seq(VOCAB, **settings).eval()


def batch():
    src = torch.randint(4, VOCAB.src_size, (3, 7))
    src_lens = torch.tensor([7, 4, 1])
    tgt_in = torch.randint(4, VOCAB.tgt_size, (3, 5))
    return src, src_lens, tgt_in


VARIANTS = [
    dict(style="bahdanau", cell="gru"),
    dict(style="bahdanau", cell="lstm", decoder_layers=2, encoder_layers=2),
    dict(style="luong", cell="gru"),
    dict(style="luong", cell="lstm", input_feeding=False),
    dict(style="luong", cell="gru", bidirectional=False, decoder_layers=2),
    dict(style="luong", cell="lstm", encoder_output="sum", encoder_layers=2),
]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(map(str, v.values())))
def test_teacher_forcing_equals_step_by_step(variant):
    model = make_model(**variant)
    src, src_lens, tgt_in = batch()
    logits, attn = model(src, src_lens, tgt_in)
    assert logits.shape == (3, 5, VOCAB.tgt_size)
    assert attn.shape == (3, 5, 7)
    state = model.start(model.encode(src, src_lens))
    for t in range(tgt_in.size(1)):
        logprobs, state, step_attn = model.step(tgt_in[:, t], state)
        assert torch.allclose(logprobs, logits[:, t].log_softmax(-1), atol=1e-5)
        assert torch.allclose(step_attn, attn[:, t], atol=1e-6)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(map(str, v.values())))
def test_attention_ignores_padding(variant):
    model = make_model(**variant)
    src, src_lens, tgt_in = batch()
    _, attn = model(src, src_lens, tgt_in)
    for b, length in enumerate(src_lens.tolist()):
        assert (attn[b, :, length:] == 0).all()
        assert torch.allclose(attn[b].sum(-1), torch.ones(5))


def test_padding_does_not_change_a_sentence():
    model = make_model()
    src, src_lens, tgt_in = batch()
    logits, _ = model(src, src_lens, tgt_in)
    alone, _ = model(src[1:2, :4], src_lens[1:2], tgt_in[1:2])
    assert torch.allclose(logits[1], alone[0], atol=1e-5)


def test_state_select_reorders_every_tensor():
    model = make_model(cell="lstm", style="luong")
    src, src_lens, _ = batch()
    state = model.start(model.encode(src, src_lens))
    picked = state.select(torch.tensor([2, 2, 0]))
    assert torch.equal(picked.keys[0], state.keys[2])
    assert torch.equal(picked.hidden[1][2], state.hidden[1][0])
    assert picked.src_lens.tolist() == [1, 1, 7]
    assert picked.position == state.position


def test_gradients_reach_every_parameter():
    model = make_model(style="luong").train()
    src, src_lens, tgt_in = batch()
    logits, _ = model(src, src_lens, tgt_in)
    logits.sum().backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_attention_is_pluggable_with_its_own_settings():
    def attention(query_size: int, key_size: int) -> AdditiveAttention:
        return AdditiveAttention(query_size, key_size, hidden_size=5)

    model = make_model(attention=attention)
    assert model.decoder.attention.score.energy.in_features == 5
    assert model.decoder.attention.score.key_proj.in_features == 32  # bidirectional encoder
