"""The human word-alignment gold sets the benchmark reads, and how their files are read."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from seq2seq.inspection.word_alignments import GoldAlignment, drop_outside, read_gold

Pair = tuple[list[str], list[str]]  # the words of the left and of the right side


@dataclass(frozen=True)
class GoldSet:
    """A gold set: its sentence and link files (under ``--gold``), its languages (left,
    right), its trial files if any, and the released model that translates between them
    (``model_left_to_right`` False: it translates right to left)."""

    name: str
    text: str
    links: str
    langs: tuple[str, str]
    model: str
    model_left_to_right: bool = True
    trial_text: str | None = None
    trial_links: str | None = None
    reverse_recipe: tuple[str, ...] = ()  # the model's recipe, which trains the other way


SETS = [
    GoldSet(
        "En-Fr Hansards",
        "en-fr.hansards-wpt03/enfr.src-tgt",
        "en-fr.hansards-wpt03/enfr.gold",
        ("en", "fr"),
        "multi30k-en-fr",
        trial_text="en-fr.hansards-wpt03/trial/enfr.trial.src-tgt",
        trial_links="en-fr.hansards-wpt03/trial/enfr.trial.gold",
        reverse_recipe=(
            "configs/multi30k/base/transformer.yaml",
            "configs/multi30k/en-fr/transformer.yaml",
        ),
    ),
    GoldSet(
        "De-En Europarl",
        "de-en.europarl-bicici-100/de-en.src-tgt",
        "de-en.europarl-bicici-100/de-en.talp",
        ("de", "en"),
        "multi30k-en-de",
        model_left_to_right=False,
    ),
]


def read_pairs(path: Path) -> list[Pair]:
    """The words of each ``left ||| right`` line."""
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        left, _, right = line.partition(" ||| ")
        pairs.append((left.split(), right.split()))
    return pairs


def read_set(root: Path, text: str, links: str) -> tuple[list[Pair], list[GoldAlignment]]:
    """A set's pairs and gold links (1-indexed in the files), without any link that points
    past its sentence (each said)."""
    pairs = read_pairs(root / text)
    gold, dropped = drop_outside(
        read_gold(root / links, one_indexed=True), [(len(a), len(b)) for a, b in pairs]
    )
    for message in dropped:
        print(f"{links} {message}: dropped", file=sys.stderr)
    return pairs, gold
