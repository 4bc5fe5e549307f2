"""Word alignments from attention: hard links, symmetrization of two directions, and their
alignment error rate against gold alignments (plain Pharaoh files: ``text.pharaoh``).

A link ``(i, j)`` joins source word ``i`` and target word ``j`` (0-indexed, source first,
as in Pharaoh/Moses/fast_align files: ``0-0 1-2 2-1``). Attention maps here are word
level, ``[Tw, Sw]`` (target rows, source columns: see ``text.words.merge_to_words``).

With a second model trained in the reverse direction (target -> source), its attention
gives links the other way; ``symmetrize`` combines the two as Koehn et al. (2003) do:
``intersection`` (precise), ``union`` (complete), ``grow-diag`` (the intersection grown
into neighboring, diagonal included, union links that align a still unaligned word) and
``grow-diag-final`` (then any union link that aligns a still unaligned word).

Scoring: the alignment error rate, precision and recall against gold alignments (Och &
Ney, 2003).

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
from collections.abc import Iterable, Sequence
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from torch import Tensor

from seq2seq.common.errors import DataError
from seq2seq.text.lines import read_lines
from seq2seq.text.pharaoh import Link, format_pharaoh

Method = Literal["argmax", "mutual-argmax", "threshold"]
Symmetrization = Literal["intersection", "union", "grow-diag", "grow-diag-final"]

_GOLD_LINK = re.compile(r"(\d+)([-pP?])(\d+)(?:-?([sSpP]))?")
_NEIGHBORS = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]


def argmax_links(weights: Tensor) -> set[Link]:
    """One link per target word, to the source word it attends to most.

    weights: [Tw, Sw]. A row without attention mass (all zeros, or no source word at all)
    gives no link.
    """
    if weights.size(-1) == 0:
        return set()
    best = weights.argmax(dim=-1).tolist()
    has_mass = (weights.sum(dim=-1) > 0).tolist()
    return {(i, j) for j, (i, mass) in enumerate(zip(best, has_mass, strict=True)) if mass}


def mutual_argmax_links(weights: Tensor) -> set[Link]:
    """The links where each word is the other's argmax: the target word attends to the
    source word most, and of all target words the source word is attended by it most
    (SimAlign's ArgMax, Jalili Sabet et al. 2020). Fewer links than ``argmax_links``, but
    more precise: a word that is nobody's best match stays unaligned.

    weights: [Tw, Sw]. A row without attention mass gives no link.
    """
    if weights.size(0) == 0:
        return set()
    best_target = weights.argmax(dim=0).tolist()  # [Sw]
    return {(i, j) for i, j in argmax_links(weights) if best_target[i] == j}


def threshold_links(weights: Tensor, threshold: float) -> set[Link]:
    """Every (source, target) pair whose weight is at least ``threshold`` (> 0). [Tw, Sw]."""
    if not 0 < threshold <= 1:
        raise ValueError(f"an alignment threshold must be in (0, 1], got {threshold}")
    return {(i, j) for j, i in (weights >= threshold).nonzero().tolist()}


def extract_links(weights: Tensor, method: Method, threshold: float = 0.3) -> set[Link]:
    """Links of a word-level map [Tw, Sw] by ``argmax``, ``mutual-argmax`` or ``threshold``."""
    if method == "argmax":
        return argmax_links(weights)
    if method == "mutual-argmax":
        return mutual_argmax_links(weights)
    if method == "threshold":
        return threshold_links(weights, threshold)
    raise ValueError(
        f"unknown alignment method {method!r}: choose argmax, mutual-argmax or threshold"
    )


def transpose(links: Iterable[Link]) -> set[Link]:
    """Links of the reverse direction's model, (its source, its target), as (ours, ours)."""
    return {(j, i) for i, j in links}


def grow_diag(forward: set[Link], backward: set[Link], final: bool = False) -> set[Link]:
    """Koehn's grow-diag(-final) of two directions' links (both as (source, target))."""
    union = forward | backward
    links = forward & backward
    src_done = {i for i, _ in links}
    tgt_done = {j for _, j in links}

    def add(i: int, j: int) -> None:
        links.add((i, j))
        src_done.add(i)
        tgt_done.add(j)

    grown = True
    while grown:
        grown = False
        for i, j in sorted(links):
            for di, dj in _NEIGHBORS:
                a, b = i + di, j + dj
                unaligned = a not in src_done or b not in tgt_done
                if unaligned and (a, b) in union and (a, b) not in links:
                    add(a, b)
                    grown = True
    if final:
        for direction in (forward, backward):
            for i, j in sorted(direction):
                if (i not in src_done or j not in tgt_done) and (i, j) not in links:
                    add(i, j)
    return links


def symmetrize(forward: set[Link], backward: set[Link], method: Symmetrization) -> set[Link]:
    """Combine the links of the two directions (both given as (source, target))."""
    if method == "intersection":
        return forward & backward
    if method == "union":
        return forward | backward
    if method == "grow-diag":
        return grow_diag(forward, backward)
    if method == "grow-diag-final":
        return grow_diag(forward, backward, final=True)
    raise ValueError(f"unknown symmetrization {method!r}")


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


def read_gold(path: str | Path, one_indexed: bool = False) -> list[GoldAlignment]:
    """One GoldAlignment per line of ``path``."""
    return [
        parse_gold_line(line, one_indexed, f"{path}:{n}")
        for n, line in enumerate(read_lines(path), start=1)
    ]


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


def sentence_scores(
    gold: Sequence[GoldAlignment], hyp: Sequence[set[Link]]
) -> list[AlignmentScore]:
    """Each sentence's counts |A|, |S|, |A & S|, |A & P| (one entry per gold line)."""
    if len(gold) != len(hyp):
        raise DataError(f"{len(gold)} gold alignment lines but {len(hyp)} hypothesis lines")
    return [
        AlignmentScore(len(h), len(g.sure), len(h & g.sure), len(h & (g.possible | g.sure)))
        for g, h in zip(gold, hyp, strict=True)
    ]


def corpus_score(sentences: Sequence[AlignmentScore]) -> AlignmentScore:
    """The corpus counts: each sentence's summed (the scores divide the sums)."""
    sums = np.array([astuple(s) for s in sentences], dtype=np.int64).reshape(-1, 4).sum(axis=0)
    return AlignmentScore(*(int(n) for n in sums))


def score_alignments(gold: Sequence[GoldAlignment], hyp: Sequence[set[Link]]) -> AlignmentScore:
    """AER, precision and recall of ``hyp`` against ``gold`` (one entry per sentence)."""
    return corpus_score(sentence_scores(gold, hyp))


def _aer_of_sums(counts: np.ndarray) -> np.ndarray:
    """AER of count rows ``[..., 4]`` (|A|, |S|, |A & S|, |A & P|); nan where undefined."""
    total = counts[..., 0] + counts[..., 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        return 1.0 - (counts[..., 2] + counts[..., 3]) / total


def aer_interval(
    sentences: Sequence[AlignmentScore],
    baseline: Sequence[AlignmentScore] | None = None,
    samples: int = 1000,
    level: float = 0.95,
    seed: int = 1,
) -> tuple[float, float]:
    """A bootstrap interval over sentences (Koehn 2004's resampling, percentile interval):
    of the corpus AER, or with ``baseline`` (the same sentences aligned by another system)
    of the difference AER - baseline AER, each resample drawing the same sentences for both.
    An interval of a difference that holds 0 says the two cannot be told apart."""
    counts = np.array([astuple(s) for s in sentences], dtype=np.int64)  # [N, 4]
    if baseline is not None and len(baseline) != len(sentences):
        raise DataError(f"{len(sentences)} sentences but {len(baseline)} in the baseline")
    if not len(counts):
        raise DataError("no sentences to resample")
    draws = np.random.default_rng(seed).integers(0, len(counts), (samples, len(counts)))
    values = _aer_of_sums(counts[draws].sum(axis=1))  # [samples]
    if baseline is not None:
        base = np.array([astuple(s) for s in baseline], dtype=np.int64)
        values = values - _aer_of_sums(base[draws].sum(axis=1))
    tail = (1.0 - level) / 2 * 100
    low, high = np.nanpercentile(values, [tail, 100 - tail])
    return float(low), float(high)


def _inside(links: frozenset[Link], source: int, target: int) -> frozenset[Link]:
    return frozenset((i, j) for i, j in links if i < source and j < target)


def drop_outside(
    gold: Sequence[GoldAlignment], lengths: Sequence[tuple[int, int]]
) -> tuple[list[GoldAlignment], list[str]]:
    """``gold`` without the links that point past their sentence (``lengths``: source and
    target words per line), and one message per line that lost any."""
    kept, dropped = [], []
    for n, (g, (source, target)) in enumerate(zip(gold, lengths, strict=True), start=1):
        clean = GoldAlignment(_inside(g.sure, source, target), _inside(g.possible, source, target))
        if clean != g:
            outside = sorted((g.possible | g.sure) - (clean.possible | clean.sure))
            dropped.append(
                f"line {n}: {format_pharaoh(outside)} outside its {source} x {target} words"
            )
        kept.append(clean)
    return kept, dropped
