"""Long C++ calls that Ctrl-C can still stop at once.

A signal reaches Python code only between bytecodes: while C++ code runs (SentencePiece
training a vocabulary, minutes on a large corpus), a handler waits until it returns.
``call_interruptibly`` runs such a call on a worker thread and has the main thread wait in
short slices, so a signal handler runs as soon as the signal arrives and whatever it raises
ends the wait. The worker is a daemon thread: left behind, it ends with the process.

(A forked child would do the same, but forking a process that already runs threads, as
PyTorch's do, can leave the child waiting forever on a lock one of them held: seen here.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

Result = TypeVar("Result")

WAIT_SLICE_SECONDS = 0.1  # how soon after a signal its handler runs


def call_interruptibly(function: Callable[..., Result], *args: Any) -> Result:
    """``function(*args)`` on a daemon thread, its result returned and its exception
    raised here; an exception a signal handler raises while it runs ends the wait at once.
    ``function`` must release the GIL while it works (SentencePiece's trainer does)."""
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, function(*args)))
        except BaseException as error:  # handed to the caller, which raises it
            outcome.append((False, error))

    worker = threading.Thread(target=run, name=f"seq2seq-{function.__name__}", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(WAIT_SLICE_SECONDS)
    succeeded, value = outcome[0]
    if not succeeded:
        raise value
    return value
