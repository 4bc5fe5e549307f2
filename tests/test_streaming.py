"""`seq2seq translate` streams: output before the input ends, input order kept, quiet end
when the reader of stdout goes away."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

from seq2seq.inference.checkpoint import load_trained
from seq2seq.inference.search import SearchSettings
from seq2seq.inference.translator import translate_lines, translate_stream

TIMEOUT = 120  # seconds; only so that a broken test fails instead of hanging


def translate_process(ckpt: Path, *args: str) -> subprocess.Popen:
    """`seq2seq translate` reading a pipe we write and writing a pipe we read."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "seq2seq", "translate", "--ckpt", str(ckpt), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def read_line(pipe) -> bytes:
    """One line from ``pipe``, failing the test if none comes within TIMEOUT."""
    ready, _, _ = select.select([pipe], [], [], TIMEOUT)
    assert ready, "no output line while the input was still open"
    return pipe.readline()


def test_first_translation_comes_before_the_input_ends(trained_run: dict) -> None:
    process = translate_process(trained_run["ckpt"], "--beam", "1")
    process.stdin.write(b"twenty-one\nfive hundred\n")
    process.stdin.flush()
    first = read_line(process.stdout)  # stdin is still open: more lines could come
    assert first.endswith(b"\n")
    process.stdin.write(b"three\n")
    process.stdin.close()
    rest = process.stdout.read()
    assert process.wait(TIMEOUT) == 0, process.stderr.read()
    assert len((first + rest).splitlines()) == 3


def test_a_closed_stdout_ends_quietly_with_the_sigpipe_status(trained_run: dict) -> None:
    """As `seq2seq translate ... | head -n 1`: the reader goes after one line."""
    process = translate_process(trained_run["ckpt"], "--beam", "1")
    process.stdin.write(b"twenty-one\n")
    process.stdin.flush()
    read_line(process.stdout)
    process.stdout.close()  # the reader has gone
    process.stdin.write(b"five hundred\n" * 50)
    process.stdin.close()
    assert process.wait(TIMEOUT) == 141
    assert process.stderr.read() == b""


def test_head_of_a_long_translation_exits_quietly(trained_run: dict, tmp_path: Path) -> None:
    """The shell pipeline itself; the status of `translate` is what `set -o pipefail` sees."""
    lines = (trained_run["corpus"] / "test.en").read_text().splitlines()
    source = tmp_path / "long.en"
    source.write_text("\n".join(lines * 200) + "\n")
    script = (
        f"{sys.executable} -m seq2seq translate --ckpt {trained_run['ckpt']} --beam 1 "
        f"--max-tokens 64 --input {source} | head -n 1; echo status ${{PIPESTATUS[0]}} >&2"
    )
    result = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=TIMEOUT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert len(result.stdout.splitlines()) == 1
    assert result.stderr.strip() in ("status 141", "status 0"), result.stderr  # 0: all fit
    assert "Traceback" not in result.stderr


def test_stream_keeps_the_input_order_across_chunks_and_pauses(trained_transformer: Path):
    trained = load_trained(trained_transformer)
    lines = ["twenty-one", "", "five hundred and three", "7", "nineteen ninety-nine"] * 6
    search = SearchSettings(beam=2)
    whole = [t.text for t in translate_lines(trained, lines, search)]
    with_pauses = [*lines[:4], None, None, *lines[4:17], None, *lines[17:]]
    streamed = translate_stream(trained, with_pauses, search, max_tokens=8)
    assert [t.source for t in streamed] == lines
    assert [t.text for t in translate_stream(trained, with_pauses, search, max_tokens=8)] == whole
