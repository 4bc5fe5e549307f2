"""Greedy and beam search, written once against the model contract."""

import pytest
import torch
from host_reads import HostReads

from seq2seq.common.errors import Seq2SeqError
from seq2seq.inference.search import (
    BLOCK,
    SearchSettings,
    _beam,
    best_continuations,
    length_penalty,
    max_output_lengths,
    row_selection,
    translate_batch,
)
from seq2seq.model import VocabSpec
from seq2seq.rnn import RNNSeq2Seq

# Every test here runs on --device: the CPU by default, a GPU with `pytest --device cuda`.
pytestmark = pytest.mark.usefixtures("on_device")

VOCAB = VocabSpec(src_size=30, tgt_size=12, pad_id=0, bos_id=2, eos_id=3, joint=False)


def setup_model():
    torch.manual_seed(1)
    model = RNNSeq2Seq(VOCAB, embed_size=8, hidden_size=12, dropout=0.0).eval()
    src = torch.randint(4, VOCAB.src_size, (6, 7))
    src_lens = torch.tensor([7, 4, 1, 5, 6, 7])
    return model, src, src_lens


def test_beam_of_one_equals_greedy():
    model, src, src_lens = setup_model()
    greedy = translate_batch(model, src, src_lens, SearchSettings(beam=1), need_weights=True)
    with torch.no_grad():
        state = model.start(model.encode(src, src_lens))
        limits = max_output_lengths(src_lens, 1.5, 10)
        beam = _beam(model, state, row_selection(src.device), src_lens, limits, 1, 1.0, 1, True)
    for (g,), (b,) in zip(greedy, beam, strict=True):
        assert g.tokens == b.tokens
        assert abs(g.score - b.score) < 1e-4
        assert torch.allclose(g.attention, b.attention)


def test_greedy_picks_the_argmax_at_every_step():
    model, src, src_lens = setup_model()
    (hyp,) = translate_batch(model, src[:1], src_lens[:1], SearchSettings(beam=1))[0]
    assert hyp.tokens  # steps to check
    state = model.start(model.encode(src[:1], src_lens[:1]))
    prev = torch.tensor([VOCAB.bos_id])
    for token in hyp.tokens:
        logprobs, state, _ = model.step(prev, state)
        assert int(logprobs.argmax()) == token
        prev = torch.tensor([token])


def test_beam_returns_sorted_nbest_within_max_length():
    model, src, src_lens = setup_model()
    results = translate_batch(
        model,
        src,
        src_lens,
        SearchSettings(beam=4, n_best=3, max_len_ratio=1.0, max_len_offset=2),
    )
    limits = max_output_lengths(src_lens, 1.0, 2)
    for nbest, limit in zip(results, limits.tolist(), strict=True):
        assert len(nbest) == 3
        assert [h.score for h in nbest] == sorted((h.score for h in nbest), reverse=True)
        for h in nbest:
            assert len(h.tokens) <= limit
            assert VOCAB.eos_id not in h.tokens
            expected = h.logprob / length_penalty(len(h.tokens) + 1, 1.0)
            assert abs(h.score - expected) < 1e-4


def test_beam_scores_are_the_model_log_probabilities():
    model, src, src_lens = setup_model()
    nbest = translate_batch(model, src[:2], src_lens[:2], SearchSettings(beam=3, n_best=3))
    for i, hyps in enumerate(nbest):
        for h in hyps:
            state = model.start(model.encode(src[i : i + 1], src_lens[i : i + 1]))
            total, prev = 0.0, VOCAB.bos_id
            for token in [*h.tokens, VOCAB.eos_id]:
                with torch.no_grad():
                    logprobs, state, _ = model.step(torch.tensor([prev]), state)
                total += float(logprobs[0, token])
                prev = token
            assert abs(total - h.logprob) < 1e-3


def test_batched_beam_equals_one_sentence_at_a_time():
    model, src, src_lens = setup_model()
    together = translate_batch(model, src, src_lens, SearchSettings(beam=3))
    for i in range(src.size(0)):
        length = int(src_lens[i])
        alone = translate_batch(
            model, src[i : i + 1, :length], src_lens[i : i + 1], SearchSettings(beam=3)
        )
        assert alone[0][0].tokens == together[i][0].tokens


def test_attention_rows_match_the_output():
    model, src, src_lens = setup_model()
    for nbest in translate_batch(model, src, src_lens, SearchSettings(beam=3), need_weights=True):
        h = nbest[0]
        assert h.attention.shape[0] == len(h.tokens) + 1  # one row per token and EOS
    for i, (h,) in enumerate(
        translate_batch(model, src, src_lens, SearchSettings(beam=1), need_weights=True)
    ):
        assert h.attention.shape == (len(h.tokens) + 1, int(src_lens[i]))
        assert torch.allclose(h.attention.sum(-1), torch.ones(len(h.tokens) + 1))


def small_transformer():
    from seq2seq.transformer import Transformer

    torch.manual_seed(2)
    settings = dict(model_size=16, num_heads=2, ff_size=32, encoder_layers=1, decoder_layers=2)
    return Transformer(VOCAB, **settings, dropout=0.0).eval()


@pytest.mark.parametrize("family", ["rnn", "transformer"])
@pytest.mark.parametrize("beam", [1, 3])
def test_each_hypothesis_carries_the_attention_of_its_own_tokens(family, beam):
    """Search follows each hypothesis back through the rows it was reordered from: its
    attention is what teacher forcing on its own tokens gives."""
    model, src, src_lens = setup_model()
    if family == "transformer":
        model = small_transformer()
    results = translate_batch(
        model,
        src,
        src_lens,
        SearchSettings(beam=beam, n_best=beam),
        need_weights=True,
    )
    for i, nbest in enumerate(results):
        length = int(src_lens[i])
        for h in nbest:
            tgt_in = torch.tensor([[VOCAB.bos_id, *h.tokens]])
            with torch.no_grad():
                _, forced = model(src[i : i + 1, :length], src_lens[i : i + 1], tgt_in)
            expected = forced[0].movedim(-2, 0)  # [T, *heads, S_i]
            assert h.attention.shape == expected.shape
            assert torch.allclose(h.attention, expected, atol=1e-5)


@pytest.mark.parametrize("family", ["rnn", "transformer"])
def test_a_step_without_weights_gives_the_same_log_probabilities(family):
    model, src, src_lens = setup_model()
    if family == "transformer":
        model = small_transformer()
    with torch.no_grad():
        state = model.start(model.encode(src, src_lens))
        prev = torch.full((src.size(0),), VOCAB.bos_id)
        with_maps, _, maps = model.step(prev, state)
        without, _, none = model.step(prev, state, need_weights=False)
    assert maps is not None and none is None
    assert torch.equal(with_maps, without)


@pytest.mark.parametrize("family", ["rnn", "transformer"])
def test_bf16_autocast_log_probabilities_are_close_to_fp32(family, device):
    """What `--bf16` changes: the model runs under bfloat16 autocast, and its log-probabilities
    (teacher forced and step by step) stay within bfloat16's precision of fp32's."""
    model, src, src_lens = setup_model()
    if family == "transformer":
        model = small_transformer()
    tgt_in = torch.randint(
        4,
        VOCAB.tgt_size,
        (src.size(0), 5),
        generator=torch.Generator().manual_seed(3),
        device="cpu",
    ).to(device)
    prev = torch.full((src.size(0),), VOCAB.bos_id)
    with torch.no_grad():
        fp32_logits, _ = model(src, src_lens, tgt_in)
        fp32_step, _, _ = model.step(prev, model.start(model.encode(src, src_lens)))
        with torch.autocast(device.type, dtype=torch.bfloat16):
            bf16_logits, _ = model(src, src_lens, tgt_in)
            bf16_step, _, _ = model.step(prev, model.start(model.encode(src, src_lens)))
    assert bf16_logits.dtype == torch.bfloat16  # autocast really ran the model in bf16
    forced_gap = (bf16_logits.float().log_softmax(-1) - fp32_logits.log_softmax(-1)).abs().max()
    assert forced_gap < 0.05
    assert (bf16_step.float() - fp32_step).abs().max() < 0.05


@pytest.mark.parametrize("family", ["rnn", "transformer"])
def test_forward_hooks_on_the_attention_see_every_decoder_step(family):
    """Decoders call their attention as a module, so a hook (what inspection uses) fires
    once per step of the search, and once per teacher-forced position for the RNN."""
    model, src, src_lens = setup_model()
    if family == "transformer":
        model = small_transformer()
        attention = model.decoder[-1].cross_attn
    else:
        attention = model.decoder.attention
    calls = []
    handle = attention.register_forward_hook(lambda module, args, output: calls.append(1))
    try:
        (hyp,) = translate_batch(model, src[:1], src_lens[:1], SearchSettings(beam=1))[0]
    finally:
        handle.remove()
    assert len(calls) == len(hyp.tokens) + 1  # every output token and EOS


def reference_beam(model, src, src_len, K, alpha, limit):
    """Beam search for one sentence spelled out hypothesis by hypothesis: every step scores
    all continuations of the live beams, EOS among the K best finishes a hypothesis, the K
    best others live on, and the search ends with K finished or at ``limit`` (where only
    EOS may follow). Returns (tokens, score) of every finished hypothesis, best first."""
    state = model.start(model.encode(src, torch.tensor([src_len])))
    beams = [([], 0.0, state)]  # (tokens, log-probability, state before the next token)
    finished = []
    for t in range(limit + 1):
        candidates = []
        for tokens, total, beam_state in beams:
            prev = torch.tensor([tokens[-1] if tokens else VOCAB.bos_id])
            logprobs, next_state, _ = model.step(prev, beam_state)
            allowed = [VOCAB.eos_id] if t >= limit else range(VOCAB.tgt_size)
            for token in allowed:
                candidates.append((total + float(logprobs[0, token]), tokens, token, next_state))
        candidates.sort(key=lambda candidate: -candidate[0])
        for total, tokens, token, _ in candidates[:K]:
            if token == VOCAB.eos_id:
                finished.append((tokens, total / length_penalty(t + 1, alpha)))
        if len(finished) >= K or t >= limit:
            break
        living = [c for c in candidates[: 2 * K] if c[2] != VOCAB.eos_id][:K]
        beams = [(tokens + [token], total, state) for total, tokens, token, state in living]
    return sorted(finished, key=lambda hypothesis: -hypothesis[1])


@pytest.mark.parametrize("family", ["rnn", "transformer"])
@pytest.mark.parametrize("beam", [3, 7])  # 2K > V: a first step with fewer than 2K candidates
def test_beam_finds_what_the_beam_search_spelled_out_finds(family, beam):
    model, src, src_lens = setup_model()
    if family == "transformer":
        model = small_transformer()
    search = SearchSettings(beam=beam, n_best=beam, length_penalty=0.8)
    limits = max_output_lengths(src_lens, search.max_len_ratio, search.max_len_offset)
    results = translate_batch(model, src, src_lens, search)
    with torch.no_grad():
        for i, nbest in enumerate(results):
            length = int(src_lens[i])
            expected = reference_beam(
                model, src[i : i + 1, :length], length, beam, 0.8, int(limits[i])
            )
            assert [h.tokens for h in nbest] == [tokens for tokens, _ in expected][:beam]
            for h, (_, score) in zip(nbest, expected, strict=False):
                assert abs(h.score - score) < 1e-4


@pytest.mark.parametrize("vocab", [3 * BLOCK, 3 * BLOCK + 5, 12, BLOCK - 1])
@pytest.mark.parametrize("beams", [1, 4])
def test_best_continuations_are_the_top_k_of_every_sum(vocab, beams, device):
    """Searching only the blocks of largest maxima finds what a top-k over all the sums
    finds, whole blocks or a shorter last one, and rows forced to EOS (-inf elsewhere)."""
    generator = torch.Generator().manual_seed(vocab + beams)
    A, count = 6, min(8, beams * vocab)
    logprobs = torch.randn(A * beams, vocab, generator=generator, device="cpu")
    logprobs = logprobs.to(device).log_softmax(-1)
    logprobs[1, :-1] = float("-inf")  # a row at its length limit: EOS (the last id) alone
    scores = torch.randn(A, beams, generator=generator, device="cpu").to(device)
    expected = (logprobs + scores.view(-1, 1)).view(A, beams * vocab).topk(count, dim=1)
    values, ids = best_continuations(logprobs, scores, count)
    assert torch.equal(values, expected.values)
    finite = values.isfinite()
    assert torch.equal(ids[finite], expected.indices[finite])


@pytest.mark.parametrize("beam", [1, 5])
def test_a_search_step_waits_for_the_device_at_most_twice(beam):
    """On a GPU each value read back makes the host wait for the device: a step of the
    search reads which rows ended (``nonzero``) and, when some did, their rows, scores and
    tokens in one read; per batch, two more: the length limits and the source lengths.
    (The shared-source trick reads once per reordering of the state: its own tests.)"""
    model = small_transformer()
    src = torch.randint(4, VOCAB.src_size, (16, 9))
    src_lens = torch.randint(1, 10, (16,))
    steps = 0
    step = model.step

    def counted_step(*args, **kwargs):
        nonlocal steps
        steps += 1
        return step(*args, **kwargs)

    model.step = counted_step
    with HostReads() as reads:
        translate_batch(model, src, src_lens, SearchSettings(beam=beam))
    search = "_greedy" if beam == 1 else "_beam"
    in_search = {site: n for site, n in reads.sites.items() if "inference/search.py" in site}
    assert in_search.pop(f"nonzero at inference/search.py:{search}") == steps
    assert in_search.pop(f"tolist at inference/search.py:{search}") == 2
    assert 0 < in_search.pop("tolist at inference/search.py:_read_ended") <= steps
    assert not in_search


@pytest.mark.parametrize(
    ("search", "message"),
    [(SearchSettings(beam=2, n_best=3), "n_best must be in [1, beam 2], got 3"),
     (SearchSettings(beam=0), "beam must be at least 1, got 0")],
)  # fmt: skip
def test_a_search_no_model_can_run_is_one_error_wherever_it_is_asked(search, message):
    """The search checks its settings once (check_search): the same error from the batch
    function as from the Python API, which calls it before any work."""
    model, src, src_lens = setup_model()
    with pytest.raises(Seq2SeqError) as raised:
        translate_batch(model, src, src_lens, search)
    assert str(raised.value) == message
