"""Corpus statistics of attention on hand-made maps."""

from __future__ import annotations

import math

import pytest
import torch

from seq2seq.inspection.stats import CorpusStats, is_punctuation, kendall_tau, sentence_stats
from seq2seq.text.words import merge_to_words, word_spans, words

SRC = ["▁a", "▁b", "▁,", "▁c"]  # + EOS as the last column of piece maps


def stats_of(rows: list[list[float]], tgt: list[str], src: list[str] = SRC, index: int = 0):
    """Statistics of piece rows [T, S + 1] (the last column: source EOS)."""
    pieces_map = torch.tensor(rows).reshape(len(rows), len(src) + 1)
    word_map = merge_to_words(pieces_map[:, :-1], word_spans(tgt), word_spans(src))
    return sentence_stats(index, pieces_map, word_map, [*src, "</s>"], words(src))


def test_a_hard_monotone_alignment():
    rows = [[1.0, 0, 0, 0, 0], [0, 1.0, 0, 0, 0], [0, 0, 1.0, 0, 0], [0, 0, 0, 1.0, 0]]
    stats = stats_of(rows, ["▁A", "▁B", "▁,", "▁C"])
    assert stats.entropy == 0.0
    assert stats.eos_share == 0.0
    assert stats.punctuation_share == pytest.approx(0.25)  # one row of four on ","
    assert stats.monotonic_steps == 1.0
    assert stats.kendall_tau == pytest.approx(1.0)
    assert [c for _, c in stats.coverage] == [1.0, 1.0, 1.0, 1.0]


def test_a_reversed_alignment_and_uniform_rows():
    reversed_rows = [[0, 0, 0, 1.0, 0], [0, 1.0, 0, 0, 0], [1.0, 0, 0, 0, 0]]
    stats = stats_of(reversed_rows, ["▁C", "▁B", "▁A"])
    assert stats.monotonic_steps == 0.0
    assert stats.kendall_tau == pytest.approx(-1.0)
    assert dict(stats.coverage) == {"a": 1.0, "b": 1.0, ",": 0.0, "c": 1.0}

    uniform = stats_of([[0.2] * 5, [0.2] * 5], ["▁X", "▁Y"])
    assert uniform.entropy == pytest.approx(math.log(5))
    assert uniform.eos_share == pytest.approx(0.2)
    # both target words attend most to the first source word: steps stay, tau undefined
    assert uniform.monotonic_steps == 1.0 and uniform.kendall_tau is None


def test_coverage_counts_target_words_not_pieces():
    # "b" is translated once by a target word of three pieces, "c" twice
    rows = [[0, 1.0, 0, 0, 0]] * 3 + [[0, 0, 0, 1.0, 0]] * 2
    stats = stats_of(rows, ["▁B", "b", "b", "▁C", "▁C"])
    assert dict(stats.coverage) == {"a": 0.0, "b": 1.0, ",": 0.0, "c": 2.0}


def test_no_target_piece_leaves_the_per_piece_figures_undefined():
    stats = stats_of([], [])
    assert (stats.entropy, stats.eos_share, stats.monotonic_steps) == (None, None, None)
    assert [c for _, c in stats.coverage] == [0.0, 0.0, 0.0, 0.0]


def test_corpus_summary_weighs_sentences_by_target_pieces():
    corpus = CorpusStats()
    corpus.add(stats_of([[1.0, 0, 0, 0, 0]] * 3, ["▁A", "▁B", "▁C"]))  # entropy 0, 3 pieces
    corpus.add(stats_of([[0.2] * 5], ["▁X"], index=1))  # entropy log 5, 1 piece
    summary = corpus.summary()
    assert summary["sentences"] == 2 and summary["target_pieces"] == 4
    assert summary["mean_entropy"] == pytest.approx(math.log(5) / 4)
    assert summary["source_words"] == 8
    # coverage: [3, 0, 0, 0] and [0.2, 0.2, 0.2, 0.2]
    assert summary["mean_coverage"] == pytest.approx((3 + 0.8) / 8)
    assert summary["over_covered"] == pytest.approx(1 / 8)
    assert summary["under_covered"] == pytest.approx(7 / 8)
    assert [s["index"] for s in corpus.as_json()["sentences"]] == [0, 1]


def test_punctuation_and_kendall_tau_helpers():
    assert is_punctuation("▁,") and is_punctuation("«") and is_punctuation("...")
    assert not is_punctuation("▁") and not is_punctuation("3,5") and not is_punctuation("a.")
    assert kendall_tau([0, 1, 2, 3], [0, 2, 1, 3]) == pytest.approx(4 / 6)
    assert kendall_tau([0, 1], [5, 5]) is None
