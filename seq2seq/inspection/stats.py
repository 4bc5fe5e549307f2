"""Corpus statistics of attention: entropy, attention on EOS and punctuation, monotonicity,
coverage.

Per sentence, from its summary map ``[T, S]`` (target pieces + EOS by source pieces +
EOS; ``maps.summary_map``), with the target EOS row left out (it decides to stop, it
translates nothing) and every row rescaled to sum to 1 (local-p rows sum to less):

- entropy: ``-sum_s a_ts log a_ts`` in nats, averaged over target pieces. 0 is a hard
  one-position alignment; ``log S`` is uniform attention.
- EOS share / punctuation share: the attention mass on the source EOS, and on source
  pieces made only of Unicode punctuation, averaged over target pieces.

From the word-level map ``[Tw, Sw]`` (``text.words.merge_to_words`` of those rows):

- monotonicity, two ways, of the argmax alignment ``a_j`` (the source word target word
  ``j`` attends to most): the share of steps ``j -> j+1`` with ``a_{j+1} >= a_j``, and
  Kendall's tau-b between ``j`` and ``a_j`` (1: a monotone diagonal, -1: reversed).
  Undefined (None) for fewer than two target words, tau also when every ``a_j`` is equal.
- coverage of a source word: the attention mass it received over all target words. About
  1 for a word translated once; near 0 for a word the decoder skipped (under-translation),
  well above 1 for one it attended again and again (over-translation).

Corpus figures average over target pieces (entropy, shares), over sentences
(monotonicity) and over source words (coverage).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
from torch import Tensor

from seq2seq.inspection.word_alignments import argmax_links

UNDER_COVERED = 0.5  # a source word with less coverage counts as under-translated
OVER_COVERED = 2.0  # and with more, as over-translated


def is_punctuation(piece: str) -> bool:
    """A piece of punctuation only (``'▁,'``, ``'.'``), not one with letters or digits."""
    text = piece.replace("\u2581", "")
    return bool(text) and all(unicodedata.category(c).startswith("P") for c in text)


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b of two equally long sequences; None where it is undefined."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    upper = np.triu_indices(len(a), k=1)
    dx = np.sign(a[:, None] - a[None, :])[upper]
    dy = np.sign(b[:, None] - b[None, :])[upper]
    denominator = math.sqrt(np.count_nonzero(dx) * np.count_nonzero(dy))
    return float((dx * dy).sum() / denominator) if denominator else None


@dataclass
class SentenceStats:
    """The statistics of one sentence (see the module docstring); None where undefined."""

    index: int
    target_pieces: int
    entropy: float | None
    eos_share: float | None
    punctuation_share: float | None
    monotonic_steps: float | None
    kendall_tau: float | None
    coverage: list[tuple[str, float]]  # (source word, attention mass it received)


def sentence_stats(
    index: int,
    pieces_map: Tensor,
    word_map: Tensor,
    src_pieces: Sequence[str],
    src_words: Sequence[str],
) -> SentenceStats:
    """The statistics of one sentence.

    pieces_map: [T, S] normalized rows without the target EOS row (T may be 0), the last
    column being the source EOS, labeled by ``src_pieces``; word_map: [Tw, Sw] the same
    rows merged into words, the columns labeled by ``src_words``.
    """
    rows = pieces_map.double()
    T = rows.size(0)
    entropy = -(rows * rows.clamp(min=1e-30).log()).sum(dim=-1)
    punctuation = [k for k, piece in enumerate(src_pieces[:-1]) if is_punctuation(piece)]
    punct_mass = rows[:, punctuation].sum(dim=-1)
    links = sorted(argmax_links(word_map), key=lambda link: link[1])
    sources, targets = [i for i, _ in links], [j for _, j in links]
    steps = [b >= a for a, b in zip(sources, sources[1:], strict=False)]
    return SentenceStats(
        index=index,
        target_pieces=T,
        entropy=float(entropy.mean()) if T else None,
        eos_share=float(rows[:, -1].mean()) if T else None,
        punctuation_share=float(punct_mass.mean()) if T else None,
        monotonic_steps=sum(steps) / len(steps) if steps else None,
        kendall_tau=kendall_tau(targets, sources) if len(links) > 1 else None,
        coverage=list(zip(src_words, word_map.sum(dim=0).tolist(), strict=True)),
    )


def _record(stats: SentenceStats) -> dict[str, object]:
    """One sentence's statistics as JSON-ready data."""
    record = asdict(stats)
    record["coverage"] = [{"word": w, "coverage": c} for w, c in stats.coverage]
    return record


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass
class CorpusStats:
    """Sentence statistics gathered one by one, summarized for the whole corpus."""

    sentences: list[SentenceStats] = field(default_factory=list)

    def add(self, stats: SentenceStats) -> None:
        self.sentences.append(stats)

    def summary(self) -> dict[str, float | int | None]:
        pieces = sum(s.target_pieces for s in self.sentences)
        coverage = [c for s in self.sentences for _, c in s.coverage]

        def per_piece(name: str) -> float | None:
            """A mean over every target piece of the corpus (sentences weighed by length)."""
            total = sum(
                getattr(s, name) * s.target_pieces for s in self.sentences if s.target_pieces
            )
            return total / pieces if pieces else None

        return {
            "sentences": len(self.sentences),
            "target_pieces": pieces,
            "mean_entropy": per_piece("entropy"),
            "eos_share": per_piece("eos_share"),
            "punctuation_share": per_piece("punctuation_share"),
            "monotonic_steps": _mean(
                [s.monotonic_steps for s in self.sentences if s.monotonic_steps is not None]
            ),
            "kendall_tau": _mean(
                [s.kendall_tau for s in self.sentences if s.kendall_tau is not None]
            ),
            "source_words": len(coverage),
            "mean_coverage": _mean(coverage),
            "under_covered": _mean([float(c < UNDER_COVERED) for c in coverage]),
            "over_covered": _mean([float(c > OVER_COVERED) for c in coverage]),
        }

    def as_json(self) -> dict[str, object]:
        """``{"summary": {...}, "sentences": [...]}`` in input order."""
        ordered = sorted(self.sentences, key=lambda s: s.index)
        return {"summary": self.summary(), "sentences": [_record(s) for s in ordered]}


def format_summary(summary: dict[str, float | int | None]) -> str:
    """The summary as aligned ``name  value`` lines, for printing."""
    lines = []
    for name, value in summary.items():
        shown = "n/a" if value is None else f"{value:.4f}" if isinstance(value, float) else value
        lines.append(f"{name:18s} {shown}")
    return "\n".join(lines)
