"""Collecting attention from a model: forced decoding, the model's own translation, local
attention's windows, and the heatmaps drawn from it."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
import torch
from matplotlib.figure import Figure

from seq2seq.attention import LuongLocalAttention, MultiHeadAttention
from seq2seq.common.errors import DataError
from seq2seq.inference.checkpoint import Trained, load_trained
from seq2seq.inference.search import SearchSettings
from seq2seq.inference.translator import translate_lines
from seq2seq.inspection.collect import (
    EOS_LABEL,
    LocalWindowProbe,
    forced_attention,
    head_axes,
    reference_attention,
    translation_attention,
)
from seq2seq.inspection.heatmap import draw_sentence, draw_windows, sentence_figure
from seq2seq.rnn import RNNSeq2Seq
from seq2seq.text.words import words

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def trained(trained_run) -> Trained:
    return load_trained(trained_run["ckpt"])


@pytest.fixture(scope="module")
def test_pairs(trained_run) -> tuple[list[str], list[str]]:
    corpus = trained_run["corpus"]
    return (
        (corpus / "test.en").read_text().splitlines()[:8],
        (corpus / "test.de").read_text().splitlines()[:8],
    )


def untrained(trained: Trained, **rnn_args) -> Trained:
    """A fresh RNN over the trained run's vocabulary: no training needed to test shapes."""
    torch.manual_seed(0)
    model = RNNSeq2Seq(trained.vocab.spec, embed_size=8, hidden_size=8, dropout=0.0, **rnn_args)
    return Trained(model.eval(), trained.vocab, {})


def test_forced_decoding_gives_one_attention_row_per_reference_piece(trained, test_pairs):
    sources, references = test_pairs
    sentences = sorted(reference_attention(trained, sources, references), key=lambda s: s.index)
    assert [s.index for s in sentences] == list(range(len(sources)))
    for sentence, source, reference in zip(sentences, sources, references, strict=True):
        assert sentence.tgt_pieces == [*trained.vocab.tgt.pieces(reference), EOS_LABEL]
        assert sentence.src_pieces == [*trained.vocab.src.pieces(source), EOS_LABEL]
        T, S = len(sentence.tgt_pieces), len(sentence.src_pieces)
        assert sentence.weights.shape == (T, S)  # Bahdanau: a single head
        torch.testing.assert_close(sentence.weights.sum(dim=-1), torch.ones(T))
        assert (sentence.source, sentence.target) == (source, reference)


def test_forced_decoding_of_a_different_number_of_lines_is_an_error(trained, test_pairs):
    sources, references = test_pairs
    with pytest.raises(DataError, match="8 source lines but 7 reference lines"):
        reference_attention(trained, sources, references[:-1])


def writing_until_the_limit(path: Path) -> Trained:
    """The checkpoint's model with its end-of-sentence logit lowered: it writes pieces up to
    the length limit (the tiny RNN, trained for seconds, ends every output at once)."""
    trained = load_trained(path)
    with torch.no_grad():
        trained.model.decoder.output.bias[trained.vocab.spec.eos_id] -= 5.0
    return trained


@pytest.mark.parametrize("family", ["rnn", "transformer"])
def test_own_translation_attention_is_the_search_attention(
    trained_run, test_pairs, request, family
):
    """Teacher forcing the search's output reproduces the attention of its steps."""
    if family == "rnn":
        trained = writing_until_the_limit(trained_run["ckpt"])
    else:
        trained = load_trained(request.getfixturevalue("trained_transformer"))
    sources = test_pairs[0]
    search = SearchSettings(beam=3)
    searched = translate_lines(trained, sources, search, need_weights=True)
    assert all(len(t.hypotheses[0].tokens) > 2 for t in searched)  # rows worth comparing
    forced = {s.index: s for s in translation_attention(trained, sources, search)}
    for i, translation in enumerate(searched):
        hyp = translation.hypotheses[0]
        assert forced[i].target == translation.text
        assert forced[i].tgt_pieces == [*trained.vocab.tgt.id_to_piece(hyp.tokens), EOS_LABEL]
        torch.testing.assert_close(forced[i].weights, hyp.attention.float(), atol=1e-5, rtol=0)


def test_words_of_the_pieces_are_the_whitespace_words_of_the_line(trained, test_pairs):
    for line in [*test_pairs[0], *test_pairs[1]]:
        assert words(trained.vocab.src.pieces(line)) == line.split()


@pytest.mark.parametrize("predictive", [True, False], ids=["local-p", "local-m"])
def test_local_attention_windows_are_recorded_where_the_weights_are(trained, predictive):
    window = 2
    model = untrained(
        trained,
        style="luong",
        attention=partial(LuongLocalAttention, window=window, predictive=predictive),
    )
    sources = ["on the first of September", "forty-seven", "seven hundred and eighteen"]
    src_ids = trained.vocab.src.encode_batch(sources)
    tgt_ids = trained.vocab.tgt.encode_batch(["am ersten September", "x", "siebenhundert"])
    texts = [(s, "") for s in sources]
    attention = model.model.decoder.attention
    for sentence in forced_attention(model, src_ids, tgt_ids, texts):
        T, S = sentence.weights.shape
        assert sentence.centers.shape == (T,) and sentence.windows.shape == (T, 2)
        first, last = sentence.windows.unbind(dim=-1)
        assert bool(((first >= 0) & (first <= last) & (last < S)).all())
        assert bool((last - first <= 2 * window).all())
        columns = torch.arange(S)
        outside = (columns < first[:, None]) | (columns > last[:, None])
        assert bool((sentence.weights[outside] == 0).all())
        assert bool((sentence.weights.sum(dim=-1) > 0).all())
        if predictive:
            assert bool(((sentence.centers >= 0) & (sentence.centers <= S)).all())
        else:
            torch.testing.assert_close(sentence.centers, torch.arange(T).float())
    # the probe's hook is gone once it is left: a later call records nothing
    spec = model.vocab.spec
    one = (torch.tensor([[spec.eos_id]]), torch.tensor([1]), torch.tensor([[spec.bos_id]]))
    with LocalWindowProbe(attention) as probe:
        model.model(*one)
    model.model(*one)
    assert probe.result()[0].shape == (1, 1)


def test_other_attention_records_no_window(trained, test_pairs):
    sentence = next(iter(reference_attention(trained, *test_pairs)))
    assert sentence.centers is None and sentence.windows is None


def test_local_p_window_is_drawn_over_its_heatmap(trained, tmp_path):
    model = untrained(
        trained, style="luong", attention=partial(LuongLocalAttention, window=2, predictive=True)
    )
    sentence = next(iter(reference_attention(model, ["forty-seven"], ["siebenundvierzig"])))
    T = sentence.weights.size(0)
    ax = Figure().subplots()
    draw_windows(ax, sentence.centers, sentence.windows)
    assert len(ax.patches) == T  # one window box per target row
    torch.testing.assert_close(
        torch.tensor(ax.lines[0].get_xdata(), dtype=torch.float32), sentence.centers
    )
    assert draw_sentence(sentence, tmp_path / "local.png").read_bytes()[:8] == PNG


def test_multi_head_attention_is_drawn_as_a_grid(trained, tmp_path):
    model = untrained(trained, attention=partial(MultiHeadAttention, num_heads=2))
    assert head_axes(model) == (2,)
    assert head_axes(trained) == ()
    sentence = next(iter(reference_attention(model, ["forty-seven"], ["siebenundvierzig"])))
    assert sentence.weights.shape[1] == 2
    assert draw_sentence(sentence, tmp_path / "grid.png").read_bytes()[:8] == PNG
    grid = sentence_figure(sentence)  # the two summaries' row, then one axis per head
    assert len(grid.axes) == 1 + 2
