"""A search that keeps the source side once per sentence
(seq2seq/speedups/beam_shared_source.py, applied from outside the models) gives what the
plain path, the contract's ``state.select`` with a copy per row, gives."""

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from test_attention import VARIANTS, Variant

from seq2seq.attention.base import ungrouped_weights
from seq2seq.inference.ensemble import Ensemble, EnsembleState
from seq2seq.inference.search import SearchSettings, translate_batch
from seq2seq.model import EncoderDecoder, VocabSpec
from seq2seq.rnn import RNNSeq2Seq
from seq2seq.speedups.beam_shared_source import follow_sentences, select_sharing_source
from seq2seq.speedups.switch import VARIABLE
from seq2seq.transformer import Transformer

VOCAB = VocabSpec(src_size=40, tgt_size=40, pad_id=0, bos_id=2, eos_id=3, joint=True)
# (rows picked at each step, the group size after the last): beam search's pattern of
# expanding, reordering within sentences and dropping finished ones, and rows from anywhere.
REORDERS = {
    "beams": ([[0, 0, 1, 1, 2, 2], [1, 0, 2, 2, 5, 4], [2, 3, 4, 5]], 2),
    "anywhere": ([[2, 0, 0, 1], [3, 3, 0, 1], [1, 2]], 1),
}
every_reorder = pytest.mark.parametrize("reorder", REORDERS.values(), ids=REORDERS.keys())


@contextmanager
def plain_path() -> Iterator[None]:
    """The trick switched off (``SEQ2SEQ_PLAIN=beam_shared_source``) inside the block."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(VARIABLE, "beam_shared_source")
        yield


def source_rows(state) -> int:
    """How many rows the state's source side has (its ``src_lens``, or its first member's)."""
    return (state.members[0] if isinstance(state, EnsembleState) else state).src_lens.size(0)


def check_steps_after_selects(model: EncoderDecoder, reorder: tuple[list, int]) -> None:
    rows, final_group = reorder
    torch.manual_seed(1)
    src = torch.randint(4, VOCAB.src_size, (3, 7))
    shared = plain = model.start(model.encode(src, torch.tensor([7, 4, 1])))
    now = 3  # the state's rows
    for indices in map(torch.tensor, rows):
        tokens = torch.randint(4, VOCAB.tgt_size, (len(indices),))
        shared = select_sharing_source(shared, indices, now)
        plain = plain.select(indices)
        now = len(indices)
        shared_out, shared, shared_attn = model.step(tokens, shared)
        plain_out, plain, plain_attn = model.step(tokens, plain)
        assert torch.allclose(shared_out, plain_out, atol=1e-5)
        assert torch.allclose(shared_attn, plain_attn, atol=1e-6)
    assert source_rows(shared) == now // final_group
    assert source_rows(plain) == now  # the plain path copied the source side to every row


@every_reorder
def test_transformer_steps_equal_a_state_copied_row_by_row(reorder):
    torch.manual_seed(0)
    model = Transformer(VOCAB, model_size=32, num_heads=4, ff_size=64, encoder_layers=2)
    check_steps_after_selects(model.eval(), reorder)


@every_reorder
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_rnn_steps_equal_a_state_copied_row_by_row(variant: Variant, reorder):
    torch.manual_seed(0)
    model = RNNSeq2Seq(
        VOCAB, embed_size=12, hidden_size=16, style="luong", attention=variant.build,
        bidirectional=not variant.same_size, dropout=0.0,
    )  # fmt: skip
    check_steps_after_selects(model.eval(), reorder)


@every_reorder
def test_an_ensembles_members_keep_their_source_once_too(reorder):
    torch.manual_seed(0)
    members = [
        Transformer(VOCAB, model_size=32, num_heads=4, ff_size=64, encoder_layers=1),
        RNNSeq2Seq(VOCAB, embed_size=12, hidden_size=16, style="luong", dropout=0.0),
    ]
    check_steps_after_selects(Ensemble([m.eval() for m in members]), reorder)


def test_bahdanau_style_steps_equal_a_state_copied_row_by_row():
    torch.manual_seed(0)
    model = RNNSeq2Seq(VOCAB, embed_size=12, hidden_size=16, style="bahdanau", dropout=0.0)
    check_steps_after_selects(model.eval(), REORDERS["beams"])


@pytest.mark.parametrize(
    ("indices", "group", "followed", "new_group"),
    [
        ([0, 0, 1, 1, 2, 2], 1, None, 2),  # beam expansion: sentences unchanged
        ([1, 0, 3, 3, 5, 4], 2, None, 2),  # reordering within sentences
        ([0, 1, 4, 5], 2, [0, 2], 2),  # sentence 1 finished
        ([2, 0, 0, 1], 1, [2, 0, 0, 1], 1),  # uneven runs: one source row per row
        ([], 2, [], 1),
    ],
)
def test_follow_sentences(indices, group, followed, new_group):
    got, got_group = follow_sentences(torch.tensor(indices, dtype=torch.long), group, 3)
    assert got_group == new_group
    assert (got is None) if followed is None else got.tolist() == followed


def test_ungroup_weights_gives_each_row_its_own_queries():
    G, H, group, T, S = 2, 3, 4, 2, 5
    weights = torch.randn(G, H, group * T, S)
    rows = ungrouped_weights(weights, group)
    assert rows.shape == (G * group, H, T, S)
    for i in range(G):
        for j in range(group):
            assert torch.equal(rows[i * group + j], weights[i, :, j * T : (j + 1) * T])


@pytest.mark.parametrize("family", ["transformer", "rnn"])
def test_beam_search_translates_the_same_with_the_trick_switched_off(family):
    """The off switch: beam search over the plain path gives the same translations."""
    torch.manual_seed(0)
    model = (
        Transformer(VOCAB, model_size=32, num_heads=4, ff_size=64, encoder_layers=2)
        if family == "transformer"
        else RNNSeq2Seq(VOCAB, embed_size=12, hidden_size=16, style="luong", dropout=0.0)
    ).eval()
    src = torch.randint(4, VOCAB.src_size, (4, 9))
    src_lens = torch.tensor([9, 6, 3, 1])
    search = SearchSettings(beam=4, n_best=2, max_len_offset=5)
    with torch.inference_mode():
        shared = translate_batch(model, src, src_lens, search, need_weights=True)
        with plain_path():
            plain = translate_batch(model, src, src_lens, search, need_weights=True)
    for shared_nbest, plain_nbest in zip(shared, plain, strict=True):
        for a, b in zip(shared_nbest, plain_nbest, strict=True):
            assert a.tokens == b.tokens
            assert a.score == pytest.approx(b.score, abs=1e-5)
            assert torch.allclose(a.attention, b.attention, atol=1e-6)


@pytest.mark.parametrize("switched_off", [False, True])
def test_the_search_applies_the_trick_unless_it_is_switched_off(monkeypatch, switched_off):
    """Beam search reorders through ``select_sharing_source`` on the CPU, so that the source
    side stays one row per sentence; ``SEQ2SEQ_PLAIN=beam_shared_source`` takes
    ``state.select`` instead."""
    seen: list[int] = []

    def counting(state, indices, rows):
        seen.append(source_rows(state))
        return select_sharing_source(state, indices, rows)

    monkeypatch.setattr("seq2seq.inference.search.select_sharing_source", counting)
    if switched_off:
        monkeypatch.setenv(VARIABLE, "beam_shared_source")
    torch.manual_seed(0)
    model = RNNSeq2Seq(VOCAB, embed_size=12, hidden_size=16, dropout=0.0).eval()
    src = torch.randint(4, VOCAB.src_size, (3, 6))
    with torch.inference_mode():
        translate_batch(model, src, torch.tensor([6, 4, 2]), SearchSettings(beam=3))
    if switched_off:
        assert seen == []
    else:
        assert len(seen) > 2 and max(seen) <= 3  # one source row per sentence, every step
