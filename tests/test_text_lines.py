"""Reading text files line by line: split on newlines only, every bad file its DataError."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from seq2seq.common.errors import DataError
from seq2seq.text.lines import TextLines, read_lines


def write(path: Path, text: str) -> Path:
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def test_read_lines_splits_on_newlines_only(tmp_path: Path) -> None:
    raw = "\ufeffone\r\ntwo\u2028still two\x1cand\u0085this\n\nlast"
    assert read_lines(write(tmp_path / "a.txt", raw)) == [
        "one",
        "two\u2028still two\x1cand\u0085this",
        "",
        "last",
    ]
    assert read_lines(write(tmp_path / "b.txt.gz", "x\ny\n")) == ["x", "y"]
    assert read_lines(write(tmp_path / "empty.txt", "")) == []
    assert read_lines(write(tmp_path / "blank.txt", "\n")) == [""]


def test_read_lines_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.de"
    bad.write_bytes(b"fine\nstill fine\nbroken \xff here\n")
    with pytest.raises(DataError, match=rf"{bad}: line 3 is not valid UTF-8"):
        read_lines(bad)
    with pytest.raises(DataError, match=r"nope\.txt: no such file"):
        read_lines(tmp_path / "nope.txt")
    (tmp_path / "fake.gz").write_bytes(b"not gzip")
    with pytest.raises(DataError, match=r"fake\.gz: not a readable gzip file"):
        read_lines(tmp_path / "fake.gz")


def test_text_lines_start_again_at_every_iteration(tmp_path: Path) -> None:
    path = tmp_path / "text.de.gz"
    with gzip.open(path, "wt", encoding="utf-8") as file:
        file.write("eins\nzwei\n")
    lines = TextLines(path)
    assert list(lines) == list(lines) == ["eins", "zwei"]
