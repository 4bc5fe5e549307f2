"""Long calls on a worker thread, whose wait a signal handler ends at once."""

from __future__ import annotations

import io
import os
import signal
import threading
import time

import pytest
import sentencepiece as spm

from seq2seq.common.interruptible import call_interruptibly


def refuse(reason: str) -> None:
    raise RuntimeError(reason)


def test_the_result_and_the_exception_come_back() -> None:
    assert call_interruptibly(pow, 2, 10) == 1024
    with pytest.raises(RuntimeError, match="^no vocabulary for you$"):
        call_interruptibly(refuse, "no vocabulary for you")


def train_long() -> None:
    """SentencePiece trained on far more text than it finishes in a second."""
    words = [f"w{i}x{i * 7 % 13}" for i in range(20_000)]
    text = [
        " ".join(words[(i * 31 + j * 17) % len(words)] for j in range(20)) for i in range(200_000)
    ]
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(text), model_writer=io.BytesIO(), vocab_size=8000,
        num_threads=1, minloglevel=2, input_sentence_size=0,
    )  # fmt: skip


def test_a_signal_ends_the_wait_while_the_cpp_code_runs() -> None:
    """A handler that raises (as fit's does while it prepares the data) stops the call
    within a moment of the signal, not when SentencePiece returns."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    def signal_soon() -> None:
        time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, interrupt)
    threading.Thread(target=signal_soon, daemon=True).start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            call_interruptibly(train_long)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert time.monotonic() - started < 3.0
