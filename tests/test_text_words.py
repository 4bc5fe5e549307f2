"""Subword pieces merged back into words, and word-level attention maps."""

from __future__ import annotations

import pytest
import torch

from seq2seq.text.words import merge_to_words, word_spans, words


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        ([], []),
        (["▁a", "▁b"], [["▁a"], ["▁b"]]),
        # one word in many pieces, at the end of the sentence
        (["▁am", "▁sieb", "en", "hundert", "acht", "zehn"],
         [["▁am"], ["▁sieb", "en", "hundert", "acht", "zehn"]]),
        # a bare ▁ joins the word it starts (digits split off by SentencePiece)
        (["▁Montag", ",", "▁", "2", "3", "."], [["▁Montag", ","], ["▁", "2", "3", "."]]),
        (["▁", "three", "▁", "hundred"], [["▁", "three"], ["▁", "hundred"]]),
        # a bare ▁ that ends the sentence stays with the word before
        (["▁Juli", "▁"], [["▁Juli", "▁"]]),
        # bare ▁ alone is an empty text: no words
        (["▁"], []),
        (["▁", "▁"], []),
        # a text that starts mid-word: the pieces before the first ▁ are a word
        (["lo", "▁world"], [["lo"], ["▁world"]]),
        # punctuation pieces at the end belong to the last word (whitespace words)
        (["▁Juli", "▁19", "5", "4", "."], [["▁Juli"], ["▁19", "5", "4", "."]]),
    ],
)  # fmt: skip
def test_word_spans_group_pieces_at_word_starts(pieces, expected):
    spans = word_spans(pieces)
    assert [[pieces[k] for k in span] for span in spans] == expected
    covered = [k for span in spans for k in span]  # a partition, unless the text is empty
    assert covered == (list(range(len(pieces))) if expected else [])


def test_words_join_pieces_and_decode_byte_fallback():
    pieces = ["▁sieb", "en", "hundert", "▁", "<0xC3>", "<0xA9>", "t", "é", "▁", "4", "2"]
    assert words(pieces) == ["siebenhundert", "été", "42"]


def test_merge_to_words_sums_source_pieces_and_averages_target_pieces():
    # target pieces ▁a b ▁c (words: ab, c); source pieces ▁x ▁y z (words: x, yz)
    weights = torch.tensor(
        [
            [0.5, 0.25, 0.25],
            [0.1, 0.6, 0.3],
            [1.0, 0.0, 0.0],
        ]
    )
    merged = merge_to_words(weights, word_spans(["▁a", "b", "▁c"]), word_spans(["▁x", "▁y", "z"]))
    expected = torch.tensor([[(0.5 + 0.1) / 2, (0.5 + 0.9) / 2], [1.0, 0.0]])
    torch.testing.assert_close(merged, expected)
    torch.testing.assert_close(merged.sum(dim=-1), torch.ones(2))  # still distributions


def test_merge_to_words_keeps_head_axes_between_rows_and_columns():
    weights = torch.softmax(torch.randn(5, 2, 3, 4), dim=-1)  # [T, L, H, S]
    tgt, src = word_spans(["▁a", "b", "c", "▁d", "e"]), word_spans(["▁x", "y", "▁z", "w"])
    merged = merge_to_words(weights, tgt, src)
    assert merged.shape == (2, 2, 3, 2)
    torch.testing.assert_close(merged[1, 1, 2, 0], weights[3:, 1, 2, :2].sum(dim=-1).mean())


def test_merge_to_words_of_an_empty_side_is_empty():
    assert merge_to_words(torch.zeros(0, 3), [], word_spans(["▁x", "y", "▁z"])).shape == (0, 2)
    assert merge_to_words(torch.zeros(2, 0), word_spans(["▁a", "▁b"]), []).shape == (2, 0)
