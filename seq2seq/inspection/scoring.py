"""Alignment error rate, precision and recall against gold alignments (Och & Ney, 2003).

With A the hypothesis links, S the gold sure links and P the gold possible links
(P includes S), over the whole corpus:

    precision = |A & P| / |A|      recall = |A & S| / |S|
    AER = 1 - (|A & S| + |A & P|) / (|A| + |S|)

Counts are summed over sentences before dividing (as the standard scripts do). A ratio
whose denominator is 0 is undefined and given as None: precision without any hypothesis
link, recall without any sure link, AER with neither.

Gold files have one line per sentence, links separated by spaces, source index first.
A link is sure or possible by any of the usual notations:

- ``3-4`` sure (Pharaoh, fast_align, the WPT shared tasks' sure-only files);
- ``3p4`` (or ``3P4``) possible: the German-English gold of Vilar et al. (2006) used by
  Zenkel et al. and awesome-align; ``3?4`` possible as well;
- a mark after the pair: ``3-4p``, ``3-4-P`` possible; ``3-4s``, ``3-4-S`` sure.

Gold indices are 0-based unless ``one_indexed``. Hypothesis files are plain Pharaoh
``i-j``, 0-based, as ``seq2seq attention`` writes them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from seq2seq.alignment.links import Link
from seq2seq.errors import DataError
from seq2seq.text_lines import read_lines

_GOLD_LINK = re.compile(r"(\d+)([-pP?])(\d+)(?:-?([sSpP]))?")
_PLAIN_LINK = re.compile(r"(\d+)-(\d+)")


@dataclass(frozen=True)
class GoldAlignment:
    """One sentence's gold links: ``sure`` S and ``possible`` P (P includes S)."""

    sure: frozenset[Link]
    possible: frozenset[Link]


def _index(text: str, one_indexed: bool, where: str) -> int:
    value = int(text)
    if one_indexed:
        if value == 0:
            raise DataError(f"{where}: index 0 in a file read as 1-indexed (drop --one-indexed?)")
        return value - 1
    return value


def parse_gold_line(line: str, one_indexed: bool = False, where: str = "gold") -> GoldAlignment:
    """``'0-0 1p2 2-3-P'`` -> sure {(0, 0)}, possible {(0, 0), (1, 2), (2, 3)}."""
    sure: set[Link] = set()
    possible: set[Link] = set()
    for token in line.split():
        match = _GOLD_LINK.fullmatch(token)
        if match is None:
            raise DataError(f"{where}: {token!r} is not an alignment link like 3-4, 3p4 or 3-4-P")
        src, separator, tgt, mark = match.groups()
        marked_possible = mark is not None and mark in "pP"
        if separator != "-" and mark is not None and mark in "sS":
            raise DataError(f"{where}: {token!r} is marked both possible and sure")
        link = (_index(src, one_indexed, where), _index(tgt, one_indexed, where))
        possible.add(link)
        if separator == "-" and not marked_possible:
            sure.add(link)
    return GoldAlignment(frozenset(sure), frozenset(possible))


def parse_links(line: str, where: str = "hypothesis") -> set[Link]:
    """A plain 0-indexed Pharaoh line ``'0-0 1-2'`` -> {(0, 0), (1, 2)}."""
    links: set[Link] = set()
    for token in line.split():
        match = _PLAIN_LINK.fullmatch(token)
        if match is None:
            raise DataError(f"{where}: {token!r} is not a plain i-j alignment link")
        links.add((int(match.group(1)), int(match.group(2))))
    return links


def read_gold(path: str | Path, one_indexed: bool = False) -> list[GoldAlignment]:
    """One GoldAlignment per line of ``path``."""
    return [
        parse_gold_line(line, one_indexed, f"{path}:{n}")
        for n, line in enumerate(read_lines(path), start=1)
    ]


def read_links(path: str | Path) -> list[set[Link]]:
    """One set of links per line of a 0-indexed Pharaoh file."""
    return [parse_links(line, f"{path}:{n}") for n, line in enumerate(read_lines(path), start=1)]


@dataclass(frozen=True)
class AlignmentScore:
    """Corpus counts |A|, |S|, |A & S|, |A & P| and the scores computed from them."""

    hyp: int
    sure: int
    hyp_sure: int
    hyp_possible: int

    @property
    def precision(self) -> float | None:
        """|A & P| / |A|; None without hypothesis links."""
        return self.hyp_possible / self.hyp if self.hyp else None

    @property
    def recall(self) -> float | None:
        """|A & S| / |S|; None without sure links."""
        return self.hyp_sure / self.sure if self.sure else None

    @property
    def aer(self) -> float | None:
        """1 - (|A & S| + |A & P|) / (|A| + |S|); None when both are empty."""
        total = self.hyp + self.sure
        return 1.0 - (self.hyp_sure + self.hyp_possible) / total if total else None


def score_alignments(gold: Sequence[GoldAlignment], hyp: Sequence[set[Link]]) -> AlignmentScore:
    """AER, precision and recall of ``hyp`` against ``gold`` (one entry per sentence)."""
    if len(gold) != len(hyp):
        raise DataError(f"{len(gold)} gold alignment lines but {len(hyp)} hypothesis lines")
    counts = [0, 0, 0, 0]
    for g, h in zip(gold, hyp, strict=True):
        possible = g.possible | g.sure
        for k, n in enumerate((len(h), len(g.sure), len(h & g.sure), len(h & possible))):
            counts[k] += n
    return AlignmentScore(*counts)
