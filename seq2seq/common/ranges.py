"""Declarative ranges of numeric settings: ``Annotated[int, Range(1)]`` on a parameter of a
command, a field of a settings dataclass (search) or an argument of the data module or the
task says which values it takes. One policy checks them all: the command line while it
parses (``seq2seq.commands.options``, through ``Range.parser``), the data module and the
task when they are built from a config (``check_arguments``)."""

from __future__ import annotations

import argparse
import math
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints


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

    def __repr__(self) -> str:  # how jsonargparse's help shows the type: Range(>= 1)
        return f"Range({self.words(float).removeprefix('a number ')})"

    def contains(self, value: float) -> bool:
        """Whether a finite ``value`` is in the range (NaN and infinities never are)."""
        if not math.isfinite(value):
            return False
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
            if not self.contains(value):
                raise argparse.ArgumentTypeError(f"must be {self.words(kind)}, got {text}")
            return value

        return parse


def range_of(hint: Any) -> tuple[Any, Range | None]:
    """The type under ``X | None`` and ``Annotated[X, Range(...)]``, and the range (None: the
    hint declares none)."""
    if get_origin(hint) in (Union, types.UnionType):  # Optional[X], X | None
        hint = next(arg for arg in get_args(hint) if arg is not type(None))
    if get_origin(hint) is Annotated:
        base, *metadata = get_args(hint)
        return base, next((m for m in metadata if isinstance(m, Range)), None)
    return hint, None


def declared_ranges(function: Callable[..., Any]) -> dict[str, tuple[Any, Range]]:
    """Each parameter of ``function`` whose annotation declares a Range: its type and range."""
    hints = get_type_hints(function, include_extras=True)
    found = {name: range_of(hint) for name, hint in hints.items()}
    return {name: (kind, bounds) for name, (kind, bounds) in found.items() if bounds}


def check_arguments(
    function: Callable[..., Any], arguments: Mapping[str, Any], prefix: str,
    error: type[Exception],
) -> None:  # fmt: skip
    """Every argument of ``function`` whose annotation declares a Range, checked against it
    (None, where the annotation allows it, is not checked): ``error`` says the first one
    outside, as ``{prefix}{name} must be an integer >= 1, got 0``."""
    for name, (kind, bounds) in declared_ranges(function).items():
        if (value := arguments.get(name)) is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise error(f"{prefix}{name} must be {bounds.words(kind)}, got {value!r}")
        if not bounds.contains(value):
            raise error(f"{prefix}{name} must be {bounds.words(kind)}, got {value}")
