"""Declarative ranges of numeric settings: ``Annotated[int, Range(1)]`` on a parameter of a
command or a field of a settings dataclass (search, data, task) says which values it takes.
The command line checks them while it parses (``seq2seq.commands.options``); anything else
may ask ``contains`` and say ``words``."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    """The range of a numeric option, in ``Annotated[int, Range(1)]``: ``minimum`` ..
    ``maximum`` (either may be None; ``above``/``below`` exclude the bound itself)."""

    minimum: float | None = None
    maximum: float | None = None
    above: bool = False
    below: bool = False

    def words(self, kind: type) -> str:
        """The accepted values in words: 'an integer >= 1', 'a number in (0, 1]'."""
        noun = "an integer" if kind is int else "a number"
        low, high = self.minimum, self.maximum
        if low is not None and high is not None:
            opening, closing = "(" if self.above else "[", ")" if self.below else "]"
            return f"{noun} in {opening}{low:g}, {high:g}{closing}"
        if low is not None:
            return f"{noun} {'>' if self.above else '>='} {low:g}"
        if high is not None:
            return f"{noun} {'<' if self.below else '<='} {high:g}"
        return noun

    def contains(self, value: float) -> bool:
        low, high = self.minimum, self.maximum
        if low is not None and (value <= low if self.above else value < low):
            return False
        return high is None or (value < high if self.below else value <= high)

    def parser(self, kind: type[int] | type[float]) -> Callable[[str], int | float]:
        """What reads the option's text: a number of ``kind`` within the range, or an error
        that says the range."""

        def parse(text: str) -> int | float:
            try:
                value = kind(text)
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"must be {self.words(kind)}, got {text!r}"
                ) from None
            if not math.isfinite(value) or not self.contains(value):
                raise argparse.ArgumentTypeError(f"must be {self.words(kind)}, got {text}")
            return value

        return parse
