"""Encoding batches of sentence pairs with the vocabulary's two sides, on worker processes.

Workers are forked (spawned where fork does not exist): a spawned worker would import the
caller's main module again, which breaks scripts without a ``__main__`` guard. They
receive the two sides once (a side pickles as its SentencePiece model's bytes) and run
nothing but their ``encode_batch`` and NumPy; they ignore
Ctrl-C, which the parent takes, and end on the SIGTERM it sends.
Batches go out and come back in order, at most ``2 * processes`` in flight, so memory is
bounded by the batch size, not the corpus. A batch comes back as flat int32 arrays:

    src_lens [B], src_ids [sum(src_lens)], tgt_lens [B], tgt_ids [sum(tgt_lens)]
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import multiprocessing.pool
import signal
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from types import TracebackType
from typing import Protocol

import numpy as np

Encoded = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
Pairs = tuple[list[str], list[str]]


class Encoder(Protocol):
    """One side of a vocabulary, as the pool uses it (``Tokenizer``, ``MarianSide``)."""

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]: ...


_worker_sides: tuple[Encoder, Encoder] | None = None


def _flat(ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Id lists -> (lengths [B], all ids [sum(lengths)]), int32."""
    lengths = np.fromiter(map(len, ids), dtype=np.int32, count=len(ids))
    flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int32, count=int(lengths.sum()))
    return lengths, flat


def encode_pairs(pairs: Pairs, src: Encoder, tgt: Encoder) -> Encoded:
    """One batch of (source sentences, target sentences) -> ``Encoded``."""
    return (*_flat(src.encode_batch(pairs[0])), *_flat(tgt.encode_batch(pairs[1])))


def leave_signals_to_the_parent() -> None:
    """In a worker: ignore SIGINT (a terminal sends Ctrl-C to every process of the group;
    the parent takes it and ends the workers), and let SIGTERM end it (the default)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _start_worker(src: Encoder, tgt: Encoder) -> None:
    global _worker_sides
    leave_signals_to_the_parent()  # Ctrl-C stops the parent, which ends the workers
    _worker_sides = (src, tgt)


def _encode_in_worker(pairs: Pairs) -> Encoded:
    assert _worker_sides is not None, "the worker was not started with its vocabulary"
    return encode_pairs(pairs, *_worker_sides)


@contextlib.contextmanager
def _ctrl_c_ignored_while_forking() -> Iterator[None]:
    """Ctrl-C ignored in the parent while it starts the workers, so that a forked worker
    ignores it from its first instruction, not only once its initializer has run (a Ctrl-C
    in between killed it); the parent's own handler is back before the block ends. Signal
    handlers belong to the main thread: elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class EncodePool:
    """``with EncodePool(vocab.src, vocab.tgt, processes) as pool: pool.encode(batches)``.

    ``processes`` 1 encodes in the calling process (no worker is started)."""

    def __init__(self, src: Encoder, tgt: Encoder, processes: int) -> None:
        self.sides = (src, tgt)
        self.processes = processes
        self._pool: multiprocessing.pool.Pool | None = None

    def __enter__(self) -> EncodePool:
        if self.processes > 1:
            methods = multiprocessing.get_all_start_methods()
            context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
            with _ctrl_c_ignored_while_forking():
                self._pool = context.Pool(self.processes, _start_worker, self.sides)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType
    ) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()

    def encode(self, batches: Iterable[Pairs]) -> Iterator[Encoded]:
        """The batches encoded, in order."""
        if self._pool is None:
            yield from (encode_pairs(pairs, *self.sides) for pairs in batches)
            return
        pending: deque[multiprocessing.pool.AsyncResult] = deque()
        for pairs in batches:
            pending.append(self._pool.apply_async(_encode_in_worker, (pairs,)))
            if len(pending) > 2 * self.processes:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()
