"""How word links are read from one sentence's attention: which map, which step, which rule.

``Extraction`` names the three choices the alignment literature varies:

- the map: the mean over every layer and head (``layer`` None), one layer's mean over its
  heads (``layer``), or one head of one layer (``layer`` and ``head``);
- the step: a target piece's own step, whose input is the piece before it (``shift``
  False), or the step that has the piece as its input (``shift`` True: Shift-Att, Chen et
  al. 2020, which reads the alignment of piece t after the decoder has seen t);
- the rule: the source word each target word attends to most (``argmax``), only those
  pairs that are each other's best match both ways (``mutual-argmax``: fewer links, more
  precise), or every pair whose weight reaches ``threshold``.

The map and step are ``maps.step_map``'s; pieces become words as ``collect.word_attention``
merges them. Shapes: Tw target words, Sw source words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torch import Tensor

from seq2seq.inspection.collect import SentenceAttention, word_attention
from seq2seq.inspection.word_alignments import Link, Method, extract_links


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
        """``mean``, ``layer 2``, ``layer 2 head 1``; ``+ shift``, then the rule unless it is
        argmax: ``, mutual-argmax`` or ``, threshold 0.3``."""
        where = "mean" if self.layer is None else f"layer {self.layer}"
        if self.head is not None:
            where += f" head {self.head}"
        rule = {"argmax": "", "mutual-argmax": ", mutual-argmax"}.get(
            self.method, f", threshold {self.threshold}"
        )
        return where + (" + shift" if self.shift else "") + rule


MEAN_ARGMAX = Extraction()  # what `attention`, `translate --alignment` and the server read


def extracted_word_map(sentence: SentenceAttention, extraction: Extraction) -> Tensor:
    """The word map [Tw, Sw] the links are drawn from (no EOS row or column)."""
    _, word_map, _ = word_attention(sentence, extraction.layer, extraction.head, extraction.shift)
    return word_map


def extracted_links(
    sentence: SentenceAttention, extraction: Extraction = MEAN_ARGMAX
) -> list[Link]:
    """The links (source word, target word) ``extraction`` reads, sorted."""
    return extracted_links_each(sentence, [extraction])[0]


def extracted_links_each(
    sentence: SentenceAttention, extractions: Sequence[Extraction]
) -> list[list[Link]]:
    """``extracted_links`` of each of ``extractions``, each word map built once: extractions
    that differ only in their rule (argmax, mutual argmax, threshold) read the same map."""
    word_maps: dict[tuple[int | None, int | None, bool], Tensor] = {}
    found = []
    for extraction in extractions:
        where = (extraction.layer, extraction.head, extraction.shift)
        if where not in word_maps:
            word_maps[where] = extracted_word_map(sentence, extraction)
        links = extract_links(word_maps[where], extraction.method, extraction.threshold)
        found.append(sorted(links))
    return found
