"""Hard word alignments from attention maps, symmetrisation and the Pharaoh format."""

from __future__ import annotations

import pytest
import torch

from seq2seq.alignment.links import (
    argmax_links,
    extract_links,
    format_pharaoh,
    grow_diag,
    symmetrize,
    threshold_links,
    transpose,
)
from seq2seq.alignment.words import merge_to_words, word_spans

# target words (rows) x source words (columns): "b a c" attending to "a b c" crosswise
CROSSED = torch.tensor(
    [
        [0.1, 0.8, 0.1],
        [0.6, 0.35, 0.05],
        [0.0, 0.3, 0.7],
    ]
)


def test_argmax_links_are_source_first_one_per_target_word():
    assert argmax_links(CROSSED) == {(1, 0), (0, 1), (2, 2)}
    assert format_pharaoh(argmax_links(CROSSED)) == "0-1 1-0 2-2"


def test_a_target_row_without_attention_gets_no_link():
    weights = torch.tensor([[0.0, 0.0], [0.2, 0.8]])
    assert argmax_links(weights) == {(1, 1)}
    assert argmax_links(torch.zeros(2, 0)) == set()  # no source word at all
    assert argmax_links(torch.zeros(0, 3)) == set()


def test_threshold_links_keep_every_weight_at_least_the_threshold():
    assert threshold_links(CROSSED, 0.3) == {(1, 0), (0, 1), (1, 1), (1, 2), (2, 2)}
    assert threshold_links(CROSSED, 0.75) == {(1, 0)}
    with pytest.raises(ValueError):
        threshold_links(CROSSED, 0.0)


def test_extract_links_from_a_piece_level_map():
    # "forty two" -> "zwei und vierzig": German says the units first, so the word-level
    # alignment crosses once the pieces of "for ty" and "vier zig" are merged.
    src, tgt = ["▁for", "ty", "▁two"], ["▁zwei", "▁und", "▁vier", "zig"]
    weights = torch.tensor(
        [
            [0.1, 0.1, 0.8],  # zwei -> two
            [0.3, 0.3, 0.4],  # und: best piece "two", best word "forty" (0.3 + 0.3)
            [0.7, 0.2, 0.1],  # vier -> for
            [0.2, 0.7, 0.1],  # zig -> ty
        ]
    )
    words_map = merge_to_words(weights, word_spans(tgt), word_spans(src))
    assert words_map.shape == (3, 2)
    # the argmax is taken per word, not per piece: und -> forty
    assert format_pharaoh(extract_links(words_map, "argmax")) == "0-1 0-2 1-0"
    assert format_pharaoh(extract_links(words_map, "threshold", 0.5)) == "0-1 0-2 1-0"


def test_transpose_turns_reverse_model_links_around():
    assert transpose({(0, 2), (1, 0)}) == {(2, 0), (0, 1)}


def test_symmetrization_by_hand():
    forward = {(0, 0), (1, 1), (2, 1)}  # source 2 also aligned to target 1
    backward = {(0, 0), (1, 1), (2, 2), (3, 3)}
    assert symmetrize(forward, backward, "intersection") == {(0, 0), (1, 1)}
    assert symmetrize(forward, backward, "union") == forward | backward
    # grow-diag from the intersection: (2, 1) and (2, 2) neighbour (1, 1) and align a new
    # source word (2) or target word (2); (3, 3) neighbours (2, 2) once that is in.
    assert symmetrize(forward, backward, "grow-diag") == {
        (0, 0), (1, 1), (2, 1), (2, 2), (3, 3),
    }  # fmt: skip


def test_grow_diag_does_not_add_links_between_already_aligned_words():
    forward = {(0, 0), (1, 1), (0, 1)}
    backward = {(0, 0), (1, 1), (1, 0)}
    assert grow_diag(forward, backward) == {(0, 0), (1, 1)}


def test_grow_diag_final_adds_union_links_of_unaligned_words():
    forward = {(0, 0), (3, 3)}
    backward = {(0, 0), (5, 5)}
    assert grow_diag(forward, backward) == {(0, 0)}  # (3, 3) and (5, 5) are no neighbours
    assert grow_diag(forward, backward, final=True) == {(0, 0), (3, 3), (5, 5)}


def test_pharaoh_is_sorted_source_first_and_empty_for_no_links():
    assert format_pharaoh({(2, 0), (0, 3), (0, 1)}) == "0-1 0-3 2-0"
    assert format_pharaoh(set()) == ""
