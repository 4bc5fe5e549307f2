"""Subword pieces merged back into words at SentencePiece's ``▁`` boundaries.

SentencePiece marks the start of every whitespace-separated word with ``▁`` (U+2581), so
the words here are the whitespace-separated tokens of the text, and alignment indices
count them. A word is a piece that starts with ``▁`` and the pieces after it that do not.
A bare ``▁`` piece (SentencePiece emits one before a word it spells from digits, bytes or
pieces that have no ``▁`` form) joins the word that follows it, or the word before it
when it ends the text. Pieces before the first ``▁`` (a text that starts mid-word) form
a word of their own. End-of-sentence is not a word: callers pass the pieces without it.

Shapes: T target pieces, S source pieces, Tw target words, Sw source words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise

import torch
from torch import Tensor

WORD_START = "\u2581"
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def word_spans(pieces: Sequence[str]) -> list[range]:
    """The piece positions of each word.

    ``['▁Hel', 'lo', '▁', '4', '2']`` -> ``[range(0, 2), range(2, 5)]``; no pieces, no words,
    and bare ``▁`` pieces alone (an empty text) none either.
    """
    if all(piece == WORD_START for piece in pieces):
        return []
    starts: list[int] = []
    for k, piece in enumerate(pieces):
        after_bare = k > 0 and pieces[k - 1] == WORD_START
        if not starts or (piece.startswith(WORD_START) and not after_bare):
            starts.append(k)
    if len(starts) > 1 and pieces[starts[-1] :] == [WORD_START]:
        starts.pop()  # a bare ▁ at the end starts nothing: it stays with the word before
    return [range(a, b) for a, b in pairwise([*starts, len(pieces)])]


def join_pieces(pieces: Sequence[str]) -> str:
    """The text of consecutive pieces, with byte-fallback pieces (``<0xC3>``) decoded."""
    raw = bytearray()
    for piece in pieces:
        byte = _BYTE_PIECE.fullmatch(piece)
        raw += bytes([int(byte.group(1), 16)]) if byte else piece.encode("utf-8")
    return raw.decode("utf-8", errors="replace").replace(WORD_START, " ").strip()


def words(pieces: Sequence[str]) -> list[str]:
    """The words of a piece sequence (without EOS): ``['▁Hel', 'lo']`` -> ``['Hello']``."""
    return [join_pieces([pieces[k] for k in span]) for span in word_spans(pieces)]


def membership(spans: Sequence[range], num_pieces: int) -> Tensor:
    """[len(spans), num_pieces] float: 1 where a piece belongs to a word."""
    matrix = torch.zeros(len(spans), num_pieces)
    for w, span in enumerate(spans):
        matrix[w, span.start : span.stop] = 1.0
    return matrix


def merge_to_words(
    weights: Tensor, tgt_spans: Sequence[range], src_spans: Sequence[range]
) -> Tensor:
    """Piece attention -> word attention: weights [T, *heads, S] -> [Tw, *heads, Sw].

    A source word receives the sum of its pieces' weights (the attention mass it got); a
    target word's row is the mean of its pieces' rows, so a row that was a distribution
    over source pieces stays one over source words. ``weights`` holds no EOS row or column.
    """
    T, S = weights.size(0), weights.size(-1)
    to_tgt = membership(tgt_spans, T)
    to_tgt = to_tgt / to_tgt.sum(dim=1, keepdim=True).clamp(min=1.0)
    to_src = membership(src_spans, S)
    return torch.einsum("wt,t...s,vs->w...v", to_tgt, weights.float(), to_src)
