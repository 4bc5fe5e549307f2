"""Reading source lines as they arrive, so that translation can start before the input ends.

A pipe or a terminal delivers lines whenever the writer sends them. ``arriving_lines``
yields each line as soon as it is complete and a ``None`` whenever no more input is ready:
a translator can then translate what it holds instead of waiting for lines that may come
much later (a person typing, a process answering only after it read a translation).
"""

from __future__ import annotations

import os
import select
from collections.abc import Iterator
from typing import BinaryIO

from seq2seq.common.errors import DataError

READ_SIZE = 1 << 16


def decode_line(raw: bytes, number: int, name: str) -> str:
    """Line ``number`` (1-based) of ``name`` without its line end; a BOM opening the first
    line is dropped; invalid UTF-8 is a DataError naming the line."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataError(f"{name}: line {number} is not valid UTF-8 ({error.reason})") from None
    if number == 1:
        line = line.removeprefix("\ufeff")
    return line.removesuffix("\n").removesuffix("\r")


def _ready(fd: int) -> bool:
    """Whether reading ``fd`` now would return without waiting."""
    readable, _, _ = select.select([fd], [], [], 0)
    return bool(readable)


def _chunks(stream: BinaryIO, name: str) -> Iterator[bytes | None]:
    """What ``stream`` delivers, as it comes; None when nothing more is ready yet."""
    try:
        fd = stream.fileno()
        select.select([fd], [], [], 0)
    except (OSError, ValueError, AttributeError):  # not a file descriptor select can watch
        yield from iter(lambda: stream.read(READ_SIZE), b"")
        return
    while True:
        if not _ready(fd):
            yield None
        try:
            data = os.read(fd, READ_SIZE)
        except OSError as error:
            raise DataError(f"cannot read {name}: {error.strerror or error}") from error
        if not data:
            return
        yield data


def arriving_lines(stream: BinaryIO, name: str = "<stdin>") -> Iterator[str | None]:
    """The lines of ``stream`` (bytes) as they arrive, with None whenever the input pauses."""
    pending = bytearray()
    number = 0
    for data in _chunks(stream, name):
        if data is None:
            yield None
            continue
        start = len(pending)
        pending += data
        end = pending.find(b"\n", start)
        begin = 0
        while end >= 0:
            number += 1
            yield decode_line(bytes(pending[begin:end]), number, name)
            begin = end + 1
            end = pending.find(b"\n", begin)
        del pending[:begin]
    if pending:
        yield decode_line(bytes(pending), number + 1, name)
