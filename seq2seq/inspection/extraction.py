"""How word links are read from one sentence's attention: which map, which step, which rule.

``Extraction`` names the three choices the alignment literature varies:

- the map: the mean over every layer and head (``layer`` None), one layer's mean over its
  heads (``layer``), or one head of one layer (``layer`` and ``head``);
- the step: a target piece's own step, whose input is the piece before it (``shift``
  False), or the step that has the piece as its input (``shift`` True: Shift-Att, Chen et
  al. 2020, which reads the alignment of piece t after the decoder has seen t);
- the rule: the source word each target word attends to most (``argmax``), or every pair
  whose weight reaches ``threshold``.

Pieces become words as ``text.words.merge_to_words`` merges them. Shapes: T target pieces, S
source pieces (each without EOS), Tw and Sw words.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from seq2seq.common.errors import Seq2SeqError
from seq2seq.inspection.collect import SentenceAttention
from seq2seq.inspection.maps import as_layers_heads, check_layer, normalize_rows, summary_map
from seq2seq.inspection.word_alignments import Link, Method, extract_links
from seq2seq.text.words import merge_to_words, word_spans


@dataclass(frozen=True)
class Extraction:
    """Which map, which step and which rule give the links (see the module's docstring)."""

    layer: int | None = None
    head: int | None = None
    shift: bool = False
    method: Method = "argmax"
    threshold: float = 0.3

    @property
    def name(self) -> str:
        """``mean``, ``layer 2``, ``layer 2 head 1``; ``+ shift``, ``threshold 0.3`` after."""
        where = "mean" if self.layer is None else f"layer {self.layer}"
        if self.head is not None:
            where += f" head {self.head}"
        rule = f", threshold {self.threshold}" if self.method == "threshold" else ""
        return where + (" + shift" if self.shift else "") + rule


MEAN_ARGMAX = Extraction()  # what `attention`, `translate --alignment` and the server read


def piece_map(weights: Tensor, extraction: Extraction) -> Tensor:
    """[T + 1, *heads, S + 1] (rows: each target piece's step, then EOS's) -> [T, S + 1]:
    the chosen map, one row per target piece (its own step, or with ``shift`` the next),
    each row a distribution."""
    if extraction.head is None:
        summary = summary_map(weights, extraction.layer)
    else:
        if extraction.layer is None:
            raise Seq2SeqError("a head is chosen within a layer: give the layer too")
        grid = as_layers_heads(weights).float()  # [T + 1, L, H, S + 1]
        layer = check_layer(extraction.layer, grid.size(1))
        if not -grid.size(2) <= extraction.head < grid.size(2):
            raise Seq2SeqError(f"head {extraction.head} does not exist: {grid.size(2)} heads")
        summary = grid[:, layer, extraction.head]
    rows = summary[1:] if extraction.shift else summary[:-1]
    return normalize_rows(rows)


def extracted_word_map(sentence: SentenceAttention, extraction: Extraction) -> Tensor:
    """The word map [Tw, Sw] the links are drawn from (no EOS row or column)."""
    rows = piece_map(sentence.weights, extraction)[:, :-1]  # the source EOS column dropped
    src, tgt = sentence.src_pieces[:-1], sentence.tgt_pieces[:-1]
    return merge_to_words(rows, word_spans(tgt), word_spans(src))


def extracted_links(
    sentence: SentenceAttention, extraction: Extraction = MEAN_ARGMAX
) -> list[Link]:
    """The links (source word, target word) ``extraction`` reads, sorted."""
    word_map = extracted_word_map(sentence, extraction)
    return sorted(extract_links(word_map, extraction.method, extraction.threshold))
