"""Lines of UTF-8 text files, read strictly: every problem is a DataError naming the file
(and the line, where there is one).

Lines are split on ``\\n`` only (a trailing ``\\r`` is removed), so a sentence containing
another Unicode line separator stays one sentence; a byte-order mark at the start of a file
is dropped. Files whose names end in ``.gz`` are read through gzip.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from seq2seq.common.errors import DataError


def iter_lines(path: str | Path) -> Iterator[str]:
    """The lines of a UTF-8 text file (gzipped if its name ends in ``.gz``), streamed."""
    path = Path(path)
    opener: Callable[..., Any] = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as file:
            for number, raw in enumerate(file, 1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise DataError(
                        f"{path}: line {number} is not valid UTF-8 ({error.reason})"
                    ) from None
                if number == 1:
                    line = line.removeprefix("\ufeff")
                yield line.removesuffix("\n").removesuffix("\r")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        raise DataError(f"{path}: not a readable gzip file ({error})") from error
    except OSError as error:
        raise DataError(f"cannot read {path}: {error.strerror or error}") from error


def read_lines(path: str | Path) -> list[str]:
    """All lines of a (small) UTF-8 text file, gzipped if its name ends in ``.gz``."""
    return list(iter_lines(path))


class TextLines:
    """The lines of a UTF-8 text file (gzipped if its name ends in ``.gz``), read from the
    start each time they are iterated, never held in memory."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __iter__(self) -> Iterator[str]:
        return iter_lines(self.path)
