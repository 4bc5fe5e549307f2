"""Every attention variant against the shared contract, plus each family's own properties."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
import torch
from torch import Tensor, nn

from seq2seq.attention import (
    AdditiveAttention,
    Attention,
    DistanceAttention,
    LuongGlobalAttention,
    LuongLocalAttention,
    LuongLocationAttention,
    MultiHeadAttention,
    ScaledDotProductAttention,
    luong,
)
from seq2seq.common.errors import Seq2SeqError
from seq2seq.masking import masked_softmax, sequence_mask
from seq2seq.model import VocabSpec
from seq2seq.rnn import RNNSeq2Seq

B, TQ, S, D = 3, 4, 9, 8  # batch, queries, keys, query/key/value size
LENS = torch.tensor([9, 5, 1])
LENS_2D = torch.tensor([[9, 7, 2, 9], [5, 1, 3, 5], [1, 1, 1, 1]])  # [B, Tq]
QUERY_POS = torch.tensor([[0, 3, 7, 12]] * B)  # target positions, some past the sources
WINDOW = 2  # local half-width: 5 of the 9 positions


@dataclass
class Variant:
    name: str
    build: Callable[[int, int], Attention]
    same_size: bool = False  # parameter-free score: keys must have the query's size
    local_p: bool = False  # weights are softmax x Gaussian, not renormalized


def local(score: str, predictive: bool, window: int = WINDOW) -> Callable[[int, int], Attention]:
    def build(query_size: int, key_size: int) -> LuongLocalAttention:
        return LuongLocalAttention(
            query_size, key_size, score, window=window, predictive=predictive
        )

    return build


VARIANTS = [
    Variant("additive", lambda q, k: AdditiveAttention(q, k, hidden_size=6)),
    Variant("luong-dot", lambda q, k: LuongGlobalAttention(q, k, "dot"), same_size=True),
    Variant("luong-general", lambda q, k: LuongGlobalAttention(q, k, "general")),
    Variant("luong-concat", lambda q, k: LuongGlobalAttention(q, k, "concat", hidden_size=6)),
    Variant("location", lambda q, k: LuongLocationAttention(q, k, max_positions=16)),
    *[
        Variant(f"local-{kind}-{score}", local(score, kind == "p"), score == "dot", kind == "p")
        for kind in "mp"
        for score in ("dot", "general", "concat")
    ],
    Variant("scaled-dot", ScaledDotProductAttention, same_size=True),
    Variant("multihead", lambda q, k: MultiHeadAttention(q, k, num_heads=2)),
    Variant(
        "multihead-bias",
        lambda q, k: MultiHeadAttention(q, k, num_heads=2, position_bias=True, max_positions=16),
    ),
    Variant("distance", DistanceAttention, same_size=True),
]
BY_NAME = {v.name: v for v in VARIANTS}
every_variant = pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)

# Every test here runs on --device: the CPU by default, a GPU with `pytest --device cuda`.
pytestmark = pytest.mark.usefixtures("on_device")


@pytest.fixture(autouse=True)
def constants_on_device(device: torch.device, monkeypatch: pytest.MonkeyPatch) -> None:
    """The module's length and position tensors, on the test's device."""
    for name in ("LENS", "LENS_2D", "QUERY_POS"):
        monkeypatch.setattr(sys.modules[__name__], name, globals()[name].to(device))


@pytest.fixture(params=["lens-1d", "lens-2d"])
def lens(request: pytest.FixtureRequest, device: torch.device) -> Tensor:
    """One valid length per sentence [B] or one per query [B, Tq], on the test's device."""
    return {"lens-1d": LENS, "lens-2d": LENS_2D}[request.param].to(device)


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Iterator[None]:
    """Tensors this small gain nothing from threads, and lose much on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def inputs(seed: int = 0) -> tuple[Tensor, Tensor, Tensor]:
    """Queries [B, Tq, D], keys [B, S, D], values [B, S, D]."""
    g, device = torch.Generator().manual_seed(seed), torch.get_default_device()
    return tuple(torch.randn(B, n, D, generator=g, device="cpu").to(device) for n in (TQ, S, S))  # type: ignore[return-value]


def make(variant: Variant, seed: int = 0) -> Attention:
    torch.manual_seed(seed)
    module = variant.build(D, D)
    if isinstance(module, MultiHeadAttention) and module.position_bias is not None:
        nn.init.normal_(module.position_bias)  # zeros would hide it
    return module.eval()


def as_heads(weights: Tensor) -> Tensor:
    """Weights [B, Tq, S] or [B, H, Tq, S] -> [B, H, Tq, S]."""
    return weights if weights.dim() == 4 else weights.unsqueeze(1)


def expand_lens(lens: Tensor) -> Tensor:
    """[B] or [B, Tq] -> [B, 1, Tq, 1], to compare with [B, H, Tq, S] weights."""
    return (lens.unsqueeze(1) if lens.dim() == 1 else lens).expand(B, TQ)[:, None, :, None]


@every_variant
def test_shapes_and_weights(variant: Variant, lens: Tensor) -> None:
    module = make(variant)
    q, k, v = inputs()
    context, weights = module(q, k, v, lens, QUERY_POS)
    assert context.shape == (B, TQ, module.context_size(D))
    heads = module.num_heads if isinstance(module, MultiHeadAttention) else None
    assert weights.shape == ((B, heads, TQ, S) if heads else (B, TQ, S))
    w = as_heads(weights)
    assert (w >= 0).all()
    past = torch.arange(S) >= expand_lens(lens)  # [B, 1, Tq, S]
    assert (w.masked_select(past) == 0).all()
    totals = w.sum(-1)
    if variant.local_p:
        assert (totals <= 1 + 1e-6).all() and (totals > 0).all()
    else:
        assert torch.allclose(totals, torch.ones_like(totals), atol=1e-6)


@every_variant
def test_prepare_then_attend_equals_forward(variant: Variant) -> None:
    module = make(variant)
    q, k, v = inputs()
    direct = module(q, k, v, LENS, QUERY_POS)
    prepared_keys, prepared_values = module.prepare(k, v)
    stepwise = module.attend(q, prepared_keys, prepared_values, LENS, QUERY_POS)
    for a, b in zip(direct, stepwise, strict=True):
        assert torch.allclose(a, b, atol=1e-6)


@every_variant
def test_gradients_reach_every_parameter(variant: Variant) -> None:
    module = make(variant).train()
    q, k, v = (x.requires_grad_() for x in inputs())
    context, _ = module(q, k, v, LENS, QUERY_POS)
    (context * torch.randn_like(context)).sum().backward()
    for name, parameter in [*module.named_parameters(), ("queries", q), ("keys", k)]:
        if isinstance(module, LuongLocationAttention) and name == "keys":
            continue  # location attention never reads the keys, by definition
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def vocab() -> VocabSpec:
    return VocabSpec(src_size=30, tgt_size=25, pad_id=0, bos_id=2, eos_id=3, joint=False)


@every_variant
@pytest.mark.parametrize("style", ["bahdanau", "luong"])
def test_teacher_forcing_equals_step_by_step(variant: Variant, style: str) -> None:
    torch.manual_seed(0)
    model = RNNSeq2Seq(
        vocab(),
        embed_size=6,
        hidden_size=D,
        style=style,
        attention=variant.build,
        encoder_output="sum" if variant.same_size else "concat",
        dropout=0.0,
    ).eval()
    src = torch.randint(4, 30, (B, S))
    tgt_in = torch.randint(4, 25, (B, 6))
    logits, attn = model(src, LENS, tgt_in)
    state = model.start(model.encode(src, LENS))
    for t in range(tgt_in.size(1)):
        logprobs, state, step_attn = model.step(tgt_in[:, t], state)
        assert torch.allclose(logprobs, logits[:, t].log_softmax(-1), atol=1e-5)
        assert torch.allclose(step_attn, attn[..., t, :], atol=1e-6)


# -- Luong: global, location, local ---------------------------------------------------------


def test_dot_score_needs_keys_of_the_query_size() -> None:
    with pytest.raises(ValueError, match="encoder_output='sum'"):
        LuongGlobalAttention(8, 16, "dot")


def test_location_refuses_sources_longer_than_its_positions() -> None:
    module = LuongLocationAttention(D, D, max_positions=S - 1)
    with pytest.raises(Seq2SeqError, match="max_positions"):
        module(*inputs(), LENS)


def test_local_window_must_be_positive() -> None:
    with pytest.raises(Seq2SeqError, match="D >= 1"):
        LuongLocalAttention(D, D, window=0)


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
def test_local_m_with_a_wide_window_equals_global(score: str, lens: Tensor) -> None:
    torch.manual_seed(0)
    wide = LuongLocalAttention(D, D, score, window=S, predictive=False)
    globally = LuongGlobalAttention(D, D, score, hidden_size=D)
    globally.score.load_state_dict(wide.score.state_dict())
    q, k, v = inputs()
    for a, b in zip(wide(q, k, v, lens, QUERY_POS), globally(q, k, v, lens), strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def window_mask(positions: Tensor, inside: Tensor) -> Tensor:
    """[B, Tq, S]: True at the keys inside each query's window."""
    return ((positions.unsqueeze(-1) == torch.arange(S)) & inside.unsqueeze(-1)).any(-2)


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
def test_local_p_is_softmax_in_the_window_times_a_gaussian(score: str) -> None:
    torch.manual_seed(0)
    module = LuongLocalAttention(D, D, score, window=WINDOW, predictive=True)
    q, k, v = inputs()
    _, weights = module(q, k, v, LENS)
    p = module.centers(q, LENS)  # [B, Tq]
    positions, inside = module.window_positions(p, LENS)
    in_window = window_mask(positions, inside)
    scores = module.score(q, module.score.prepare(k)).masked_fill(~in_window, -math.inf)
    s = torch.arange(S, dtype=torch.float)
    gaussian = torch.exp(-((s - p.unsqueeze(-1)) ** 2) / (2 * (WINDOW / 2) ** 2))
    expected = torch.softmax(scores, dim=-1).nan_to_num(0.0) * gaussian
    assert torch.allclose(weights, expected, atol=1e-6)


@pytest.mark.parametrize("scale", [0.1, 30.0], ids=["mild", "saturated"])
def test_local_p_center_and_window_stay_in_the_sentence(lens: Tensor, scale: float) -> None:
    torch.manual_seed(0)
    module = LuongLocalAttention(D, D, "general", window=WINDOW, predictive=True)
    q, k, v = inputs()
    q = q * scale  # large queries push sigmoid to 0 or 1: p_t at the sentence's very ends
    per_query = (lens.unsqueeze(1) if lens.dim() == 1 else lens).expand(B, TQ)
    p = module.centers(q, lens)
    assert p.shape == (B, TQ)
    assert (p >= 0).all() and (p <= per_query).all()
    positions, inside = module.window_positions(p, lens)
    assert positions.shape == (B, TQ, 2 * WINDOW + 1)
    assert (positions.diff(dim=-1) == 1).all()  # one contiguous window
    assert ((positions - p.unsqueeze(-1)).abs() <= WINDOW + 0.5).where(inside, True).all()
    assert (positions[inside] >= 0).all()
    assert (positions < per_query.unsqueeze(-1)).where(inside, True).all()
    assert inside.any(-1).all()  # never empty
    _, weights = module(q, k, v, lens)
    assert (weights.masked_select(~window_mask(positions, inside)) == 0).all()


def test_local_m_centers_on_the_target_position() -> None:
    module = LuongLocalAttention(D, D, "general", window=WINDOW, predictive=False)
    q, k, v = inputs()
    assert torch.equal(module.centers(q, LENS, QUERY_POS), QUERY_POS.float())
    _, weights = module(q, k, v, LENS, QUERY_POS)
    assert (weights[0, 0, WINDOW + 1 :] == 0).all()  # t = 0: keys 0..D only
    assert (weights[0, 0, : WINDOW + 1] > 0).all()
    # t = 12 is past sentence 1's 5 keys: its window moves back to the last key, not off it
    assert torch.allclose(weights[1, 3, 5 - WINDOW - 1 : 5].sum(), torch.tensor(1.0))


@pytest.mark.parametrize("predictive", [False, True], ids=["local-m", "local-p"])
def test_a_local_step_touches_only_its_window(predictive: bool, monkeypatch) -> None:
    long_source = 40
    module = LuongLocalAttention(D, D, "concat", window=WINDOW, predictive=predictive)
    q = torch.randn(B, 1, D)
    keys, values = module.prepare(torch.randn(B, long_source, D), torch.randn(B, long_source, 5))
    gathered: list[tuple[int, ...]] = []
    scored: list[tuple[int, ...]] = []
    real_gather, real_window = luong.gather_window, module.score.window

    def recording_gather(x: Tensor, index: Tensor) -> Tensor:
        out = real_gather(x, index)
        gathered.append(tuple(out.shape))
        return out

    def recording_window(queries: Tensor, window_keys: Tensor) -> Tensor:
        scored.append(tuple(window_keys.shape))
        return real_window(queries, window_keys)

    monkeypatch.setattr(luong, "gather_window", recording_gather)
    monkeypatch.setattr(module.score, "window", recording_window)
    context, weights = module.attend(
        q, keys, values, torch.tensor([40, 30, 3]), torch.tensor([[5]] * B)
    )
    width = 2 * WINDOW + 1
    assert scored == [(B, 1, width, D)]
    assert sorted(gathered) == sorted([(B, 1, width, D), (B, 1, width, 5)])
    assert context.shape == (B, 1, 5) and weights.shape == (B, 1, long_source)


# -- scaled dot-product, multi-head, distance ------------------------------------------------


def test_one_head_equals_scaled_dot_product_on_projected_inputs() -> None:
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, D, num_heads=1).eval()
    q, k, v = inputs()
    context, weights = mha(q, k, v, LENS)
    plain = ScaledDotProductAttention(D, D)
    expected_context, expected_weights = plain(mha.q_proj(q), mha.k_proj(k), mha.v_proj(v), LENS)
    assert torch.allclose(weights, expected_weights.unsqueeze(1), atol=1e-6)
    assert torch.allclose(context, mha.out_proj(expected_context), atol=1e-6)


@pytest.mark.parametrize("key_size", [D, 6], ids=["packed", "separate-kdim"])
def test_multihead_reproduces_torch_multihead_attention(key_size: int) -> None:
    torch.manual_seed(0)
    heads = 2
    ours = MultiHeadAttention(D, key_size, num_heads=heads).eval()
    theirs = nn.MultiheadAttention(D, heads, batch_first=True, kdim=key_size, vdim=key_size)
    with torch.no_grad():
        projections = (ours.q_proj, ours.k_proj, ours.v_proj)
        if key_size == D:
            theirs.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
        else:
            theirs.q_proj_weight.copy_(ours.q_proj.weight)
            theirs.k_proj_weight.copy_(ours.k_proj.weight)
            theirs.v_proj_weight.copy_(ours.v_proj.weight)
        theirs.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
        theirs.out_proj.weight.copy_(ours.out_proj.weight)
        theirs.out_proj.bias.copy_(ours.out_proj.bias)
    q = torch.randn(B, TQ, D)
    k, v = torch.randn(B, S, key_size), torch.randn(B, S, key_size)
    context, weights = ours(q, k, v, LENS)
    expected_context, expected_weights = theirs.eval()(
        q,
        k,
        v,
        key_padding_mask=~sequence_mask(LENS, S),
        need_weights=True,
        average_attn_weights=False,
    )
    assert torch.allclose(weights, expected_weights, atol=1e-6)
    assert torch.allclose(context, expected_context, atol=1e-5)


@pytest.mark.parametrize("variant", ["multihead", "multihead-bias"])
def test_multihead_fast_path_equals_explicit_path(variant: str, lens: Tensor, monkeypatch) -> None:
    module = make(BY_NAME[variant])
    module.sdpa = True
    q, k, v = inputs()
    keys, values = module.prepare(k, v)
    explicit, _ = module.attend(q, keys, values, lens)
    fused_calls = []
    fused = torch.nn.functional.scaled_dot_product_attention

    def counted(*args, **kwargs):
        # cuDNN's kernel plans per shape: with batches of varying lengths it made the step
        # 2.7-4.8x slower on an H100 (docs/benchmarks/gpu.md), so it must be off here
        fused_calls.append(torch.backends.cuda.cudnn_sdp_enabled())
        return fused(*args, **kwargs)

    monkeypatch.setattr("seq2seq.attention.dot_product.F.scaled_dot_product_attention", counted)
    fast, no_weights = module.attend(q, keys, values, lens, need_weights=False)
    assert fused_calls, "need_weights=False with sdpa on must take the fused kernel"
    assert not any(fused_calls), "SDPA may not choose cuDNN's kernel"
    assert torch.backends.cuda.cudnn_sdp_enabled()  # as it was, outside the call
    assert no_weights is None
    assert torch.allclose(fast, explicit, atol=1e-5)


def test_position_bias_makes_a_head_attend_to_a_fixed_position() -> None:
    torch.manual_seed(0)
    module = MultiHeadAttention(D, D, num_heads=2, position_bias=True, max_positions=16).eval()
    with torch.no_grad():
        module.position_bias[0, 3] = 50.0  # head 0: key 3, whatever the content
    q, k, v = inputs()
    _, weights = module(q, k, v, LENS)
    long_enough = LENS > 3  # sentences 0 and 1
    assert torch.allclose(weights[long_enough, 0, :, 3], torch.ones(2, TQ), atol=1e-6)
    assert (weights[long_enough, 1, :, 3] < 0.99).all()  # the other head is free
    assert (weights[~long_enough, 0, :, 3] == 0).all()  # the mask still wins


def test_distance_attention_equals_the_naive_formula() -> None:
    q, k, v = inputs()
    context, weights = DistanceAttention(D, D)(q, k, v, LENS_2D)
    naive_scores = -0.5 * (q.unsqueeze(2) - k.unsqueeze(1)).pow(2).sum(-1)  # [B, Tq, S]
    naive_weights = masked_softmax(naive_scores, LENS_2D)
    assert torch.allclose(weights, naive_weights, atol=1e-5)
    assert torch.allclose(context, naive_weights @ v, atol=1e-5)
