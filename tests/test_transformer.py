"""The Transformer: positional encoding, causality, caching, fast path, padding."""

import math

import pytest
import torch

from seq2seq.inference.search import SearchSettings, translate_batch
from seq2seq.model import VocabSpec
from seq2seq.transformer import PositionalEncoding, Transformer, sinusoidal_table

# Every test here runs on --device: the CPU by default, a GPU with `pytest --device cuda`.
pytestmark = pytest.mark.usefixtures("on_device")

VOCAB = VocabSpec(src_size=40, tgt_size=40, pad_id=0, bos_id=2, eos_id=3, joint=True)


def make_model(**overrides) -> Transformer:
    torch.manual_seed(0)
    settings = dict(model_size=32, num_heads=4, ff_size=64, encoder_layers=2, decoder_layers=2)
    settings.update(overrides)
    return Transformer(VOCAB, **settings).eval()


def batch():
    torch.manual_seed(1)
    src = torch.randint(4, VOCAB.src_size, (3, 7))
    src_lens = torch.tensor([7, 4, 1])
    tgt_in = torch.randint(4, VOCAB.tgt_size, (3, 6))
    return src, src_lens, tgt_in


def test_encoding_matches_the_formula():
    d = 16
    table = sinusoidal_table(50, d)
    for i in [0, 1, 7, 49]:
        for j in range(d // 2):
            angle = i / 10000 ** (2 * j / d)
            assert table[i, 2 * j].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[i, 2 * j + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_a_shift_is_the_same_rotation_at_every_position():
    d, delta = 16, 5
    table = sinusoidal_table(100, d).double()
    for j in range(d // 2):
        w = 1 / 10000 ** (2 * j / d)
        rotation = torch.tensor(
            [
                [math.cos(delta * w), math.sin(delta * w)],
                [-math.sin(delta * w), math.cos(delta * w)],
            ],
            dtype=torch.float64,
        )
        for i in [0, 3, 40, 90]:
            pair = table[i, 2 * j : 2 * j + 2]
            shifted = table[i + delta, 2 * j : 2 * j + 2]
            assert torch.allclose(rotation @ pair, shifted, atol=1e-5)


def test_encoding_extends_past_its_initial_length():
    encoding = PositionalEncoding(8, dropout=0.0, initial_length=4).eval()
    out = encoding(torch.zeros(1, 10, 8))
    assert torch.allclose(out[0], sinusoidal_table(10, 8))
    later = encoding(torch.zeros(1, 2, 8), offset=20)
    assert torch.allclose(later[0], sinusoidal_table(22, 8)[20:])


def test_embeddings_are_scaled_by_sqrt_d():
    encoding = PositionalEncoding(4, dropout=0.0).eval()
    x = torch.ones(1, 1, 4)
    assert torch.allclose(encoding(x)[0, 0], 2.0 + sinusoidal_table(1, 4)[0])


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_future_target_tokens_do_not_change_earlier_outputs(norm):
    model = make_model(norm=norm)
    src, src_lens, tgt_in = batch()
    logits, _ = model(src, src_lens, tgt_in)
    changed = tgt_in.clone()
    changed[:, 3:] = torch.randint(4, VOCAB.tgt_size, changed[:, 3:].shape)
    changed_logits, _ = model(src, src_lens, changed)
    assert torch.allclose(logits[:, :3], changed_logits[:, :3], atol=1e-5)
    assert not torch.allclose(logits[:, 3:], changed_logits[:, 3:])


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_cached_steps_equal_teacher_forcing(norm):
    model = make_model(norm=norm)
    src, src_lens, tgt_in = batch()
    logits, attn = model(src, src_lens, tgt_in)
    assert attn.shape == (3, 2, 4, 6, 7)  # [B, layers, heads, T, S]
    state = model.start(model.encode(src, src_lens))
    for t in range(tgt_in.size(1)):
        logprobs, state, step_attn = model.step(tgt_in[:, t], state)
        assert torch.allclose(logprobs, logits[:, t].log_softmax(-1), atol=1e-5)
        assert torch.allclose(step_attn, attn[:, :, :, t], atol=1e-6)


@pytest.mark.parametrize("sdpa", [False, True])
def test_fast_path_equals_explicit_path(sdpa):
    model = make_model(sdpa=sdpa)
    src, src_lens, tgt_in = batch()
    explicit, attn = model(src, src_lens, tgt_in, need_weights=True)
    fast, none = model(src, src_lens, tgt_in, need_weights=False)
    assert none is None and attn is not None
    assert torch.allclose(explicit, fast, atol=1e-5)
    reference = make_model(sdpa=not sdpa)
    other, _ = reference(src, src_lens, tgt_in, need_weights=False)
    assert torch.allclose(fast, other, atol=1e-5)


def test_cross_attention_ignores_source_padding():
    model = make_model()
    src, src_lens, tgt_in = batch()
    _, attn = model(src, src_lens, tgt_in)
    for b, length in enumerate(src_lens.tolist()):
        assert (attn[b, ..., length:] == 0).all()
        assert torch.allclose(attn[b].sum(-1), torch.ones(attn.shape[1:-1]))


def test_padding_a_batch_does_not_change_any_sentence():
    model = make_model()
    src, src_lens, tgt_in = batch()
    logits, _ = model(src, src_lens, tgt_in)
    for b in range(3):
        length = int(src_lens[b])
        alone, _ = model(src[b : b + 1, :length], src_lens[b : b + 1], tgt_in[b : b + 1, :4])
        assert torch.allclose(logits[b, :4], alone[0], atol=1e-5)
    padded_src = torch.cat([src, torch.zeros(3, 5, dtype=torch.long)], dim=1)
    padded, _ = model(padded_src, src_lens, tgt_in)
    assert torch.allclose(logits, padded, atol=1e-5)


def test_joint_vocabulary_ties_all_embeddings():
    model = make_model()
    assert model.src_embed is model.tgt_embed
    assert model.output.weight is model.tgt_embed.weight
    separate = Transformer(
        VocabSpec(30, 40, 0, 2, 3, joint=False), model_size=16, num_heads=2, ff_size=32
    )
    assert separate.src_embed is not separate.tgt_embed
    assert separate.output.weight is separate.tgt_embed.weight


def test_beam_search_runs_on_the_transformer_with_attention():
    model = make_model()
    src, src_lens, _ = batch()
    results = translate_batch(
        model, src, src_lens, SearchSettings(beam=3, n_best=2), need_weights=True
    )
    for i, nbest in enumerate(results):
        best = nbest[0]
        assert best.attention.shape == (len(best.tokens) + 1, 2, 4, int(src_lens[i]))
    greedy = translate_batch(model, src, src_lens, SearchSettings(beam=1))
    assert len(greedy) == 3


def test_gradients_reach_every_parameter():
    model = make_model().train()
    src, src_lens, tgt_in = batch()
    logits, _ = model(src, src_lens, tgt_in, need_weights=False)
    logits.sum().backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_the_same_seed_builds_the_same_weights_with_separate_vocabularies():
    """Initialization follows the seed alone (it once iterated a set of embeddings, whose
    order follows memory addresses)."""
    separate = VocabSpec(src_size=40, tgt_size=30, pad_id=0, bos_id=2, eos_id=3, joint=False)
    built = []
    for _ in range(4):
        torch.manual_seed(0)
        built.append(Transformer(separate, model_size=16, num_heads=2, ff_size=32).state_dict())
    for other in built[1:]:
        assert all(torch.equal(built[0][k], other[k]) for k in built[0])


@pytest.mark.parametrize("init, gain", [("xavier", 1.0), ("fairseq", 2**-0.5)])
def test_the_initialization_scales_query_key_value_projections(init, gain):
    """fairseq starts q/k/v with Glorot uniform at gain 1/sqrt(2) (the bound of the three
    stacked into one [3d, d] matrix); every other linear layer is Glorot uniform at gain 1."""
    torch.manual_seed(0)
    model = make_model(model_size=64, init=init)
    d = 64
    glorot = math.sqrt(6 / (d + d))  # the bound of U(-a, a) for a [d, d] matrix
    attentions = [layer.self_attn for layer in [*model.encoder, *model.decoder]]
    attentions += [layer.cross_attn for layer in model.decoder]
    for attention in attentions:
        for projection in (attention.q_proj, attention.k_proj, attention.v_proj):
            bound = projection.weight.abs().max().item()
            assert gain * glorot * 0.95 < bound <= gain * glorot
        assert 0.95 * glorot < attention.out_proj.weight.abs().max().item() <= glorot
