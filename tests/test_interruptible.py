"""Long calls on a worker thread, whose wait a signal handler ends at once."""

from __future__ import annotations

import io
import os
import signal
import threading
import time

import pytest
import sentencepiece as spm

from seq2seq.common.interruptible import call_interruptibly, unfinished_calls, wait_for_unfinished


def refuse(reason: str) -> None:
    raise RuntimeError(reason)


def test_the_result_and_the_exception_come_back() -> None:
    assert call_interruptibly(pow, 2, 10) == 1024
    with pytest.raises(RuntimeError, match="^no vocabulary for you$"):
        call_interruptibly(refuse, "no vocabulary for you")


def long_text() -> list[str]:
    """Text that SentencePiece takes a second or more to train a vocabulary on."""
    words = [f"w{i}x{i * 7 % 13}" for i in range(20_000)]
    return [
        " ".join(words[(i * 31 + j * 17) % len(words)] for j in range(20)) for i in range(40_000)
    ]


def train(text: list[str]) -> None:
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(text), model_writer=io.BytesIO(), vocab_size=1300,
        num_threads=1, minloglevel=2, input_sentence_size=0,
    )  # fmt: skip


def test_a_signal_ends_the_wait_while_the_cpp_code_runs() -> None:
    """A handler that raises (as fit's does while it prepares the data) stops the wait at
    once, while SentencePiece still runs; the test then waits for the C++ training to end,
    which nothing can stop, so that no thread of it outlives the test."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    def signal_soon() -> None:
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGUSR1)

    text = long_text()
    previous = signal.signal(signal.SIGUSR1, interrupt)
    sender = threading.Thread(target=signal_soon, daemon=True)
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            call_interruptibly(train, text)
        assert unfinished_calls() == ["seq2seq-train"]  # the wait ended before the training
    finally:
        signal.signal(signal.SIGUSR1, previous)
        sender.join()
        assert wait_for_unfinished(timeout=120)
    assert unfinished_calls() == []
