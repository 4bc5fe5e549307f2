"""The names of the benchmark's rows, one spelling of each for its tables, record and
picture."""

from __future__ import annotations

import argparse

from scripts.bench.alignment.gold import GoldSet

SHOWN = ("grow-diag-final", "grow-diag")  # every pair of directions' rows; grow-diag-final first


def choice_row(label: str, chosen: str) -> str:
    """The row of model ``label`` read by the extraction the trial set chose (its name)."""
    return f"{label}, {chosen} (trial's choice)"


def twin_label(gold_set: GoldSet, args: argparse.Namespace, guided: bool) -> str:
    """A guided-alignment twin's name in the tables: the released model and its updates."""
    return f"{gold_set.model} + {args.guided_steps} {'guided ' if guided else ''}updates"


def reverse_label(gold_set: GoldSet, args: argparse.Namespace, guided: bool) -> str:
    """The model of the other direction's name in the tables, guided on the gold's pairs or
    not."""
    left, right = gold_set.langs
    label = f"{right}→{left} trained here"
    if not guided:
        return label
    return f"{label} + {args.gold_guided_steps} guided updates on the gold's pairs"


def guided_gold_label(gold_set: GoldSet, args: argparse.Namespace) -> str:
    return (
        f"{twin_label(gold_set, args, guided=True)} "
        f"+ {args.gold_guided_steps} guided updates on the gold's pairs"
    )


def joined(forward: str, backward: str) -> str:
    """Two models joined: the key of their trial choice of symmetrization."""
    return f"{forward} ⇄ {backward}"


def joined_row(forward: str, backward: str, how: str) -> str:
    """The row of two models' trial choices symmetrized by ``how`` (one not ``SHOWN``: the
    trial set's choice)."""
    return f"{joined(forward, backward)}, {how} of the trial's choices" + trial_mark(how)


def aligner_row(system: str, how: str) -> str:
    """The row of an aligner's two directions symmetrized by ``how``."""
    return f"{system}, {how}" + trial_mark(how)


def trial_mark(how: str) -> str:
    """What a row's name adds when its symmetrization is the trial set's choice."""
    return "" if how in SHOWN else " (trial's choice)"
