"""One sentence's attention as the Python API gives it (``TranslationModel.attention``):
the maps as arrays, the pieces and words along their axes, the word alignment read off them,
and ``plot()``. matplotlib is imported by ``plot`` alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from seq2seq.inspection.collect import SentenceAttention, word_attention
from seq2seq.inspection.maps import summary_map
from seq2seq.inspection.word_alignments import Link, Method, extract_links

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class AttentionMaps:
    """One sentence's attention, as ``seq2seq attention`` computes it.

    Attributes:
        source, target: the texts (the target: the reference, or the model's translation)
        src_pieces, tgt_pieces: the pieces along each axis, both ending with ``</s>``
        weights: [T, *heads, S] float32: every map the model has (``heads`` is ``()`` for
            one RNN attention, ``(H,)`` for multi-head RNN attention, ``(L, H)`` for the
            Transformer); rows sum to 1 over the valid source positions
        summary: [T, S]: the mean over heads (and, for the Transformer, over ``layer`` or
            every layer), the map alignments are read from
        src_words, tgt_words: the words the pieces make up (without ``</s>``)
        word_weights: [Tw, Sw]: ``summary`` without the ``</s>`` row and column, rows
            rescaled to sum to 1, pieces merged into words
        alignment: (source word, target word) links read off ``word_weights`` (Pharaoh's
            order, 0-based), as ``alignments.txt`` of ``seq2seq attention`` has them
        centers, windows: local attention's window centers [T] and first/last positions
            [T, 2] (None for other attention)
    """

    source: str
    target: str
    src_pieces: list[str]
    tgt_pieces: list[str]
    weights: np.ndarray
    summary: np.ndarray
    src_words: list[str]
    tgt_words: list[str]
    word_weights: np.ndarray
    alignment: list[Link]
    centers: np.ndarray | None = None
    windows: np.ndarray | None = None
    layer: int | None = None

    @property
    def pharaoh(self) -> str:
        """The alignment as a Pharaoh line (``0-0 1-2 ...``)."""
        return " ".join(f"{s}-{t}" for s, t in self.alignment)

    def plot(self, layer: int | None = None) -> Figure:
        """The heatmap: one map for single-head attention, else the summary on top and
        every layer (rows) x head (columns) below; ``layer`` picks the layer summarized on
        top (default: the one given to ``attention``, else the last)."""
        import torch

        from seq2seq.inspection.heatmap import sentence_figure

        sentence = SentenceAttention(
            index=0,
            source=self.source,
            target=self.target,
            src_pieces=self.src_pieces,
            tgt_pieces=self.tgt_pieces,
            weights=torch.from_numpy(self.weights),
            centers=None if self.centers is None else torch.from_numpy(self.centers),
            windows=None if self.windows is None else torch.from_numpy(self.windows),
        )
        chosen = layer if layer is not None else self.layer
        return sentence_figure(sentence, chosen if chosen is not None else -1)


def attention_of(sentence: SentenceAttention, layer: int | None, method: Method) -> AttentionMaps:
    """The ``AttentionMaps`` of one collected sentence (the pipeline's own word maps and links)."""
    summary = summary_map(sentence.weights, layer)
    _, word_map, src_words = word_attention(sentence, layer)
    from seq2seq.text.words import words

    return AttentionMaps(
        source=sentence.source,
        target=sentence.target,
        src_pieces=sentence.src_pieces,
        tgt_pieces=sentence.tgt_pieces,
        weights=sentence.weights.numpy(),
        summary=summary.float().numpy(),
        src_words=src_words,
        tgt_words=words(sentence.tgt_pieces[:-1]),
        word_weights=word_map.float().numpy(),
        alignment=sorted(extract_links(word_map, method)),
        centers=None if sentence.centers is None else sentence.centers.numpy(),
        windows=None if sentence.windows is None else sentence.windows.numpy(),
        layer=layer,
    )
