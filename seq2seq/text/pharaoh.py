"""Word links in the Pharaoh format: ``0-0 1-2 2-1``, one line per sentence pair.

A link ``(i, j)`` joins source word ``i`` and target word ``j``, 0-indexed over the
whitespace-separated words of each side, source first, as Pharaoh, Moses, fast_align and
eflomal write them. Gold files with sure and possible links have notations of their own
(``inspection.word_alignments``); a plain file is read here, by the attention tools and by
guided alignment's training alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from seq2seq.common.errors import DataError
from seq2seq.text.lines import read_lines

Link = tuple[int, int]  # (source word, target word)

_PLAIN_LINK = re.compile(r"(\d+)-(\d+)")


def format_pharaoh(links: Iterable[Link]) -> str:
    """``{(1, 2), (0, 0)}`` -> ``'0-0 1-2'`` (sorted by source, then target)."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def parse_links(line: str, where: str = "hypothesis") -> set[Link]:
    """A plain 0-indexed Pharaoh line ``'0-0 1-2'`` -> {(0, 0), (1, 2)}."""
    links: set[Link] = set()
    for token in line.split():
        match = _PLAIN_LINK.fullmatch(token)
        if match is None:
            raise DataError(
                f"{where}: {line!r} is not Pharaoh links like 0-0 1-2 ({token!r} is not i-j)"
            )
        links.add((int(match.group(1)), int(match.group(2))))
    return links


def read_links(path: str | Path) -> list[set[Link]]:
    """One set of links per line of a 0-indexed Pharaoh file."""
    return [parse_links(line, f"{path}:{n}") for n, line in enumerate(read_lines(path), start=1)]
