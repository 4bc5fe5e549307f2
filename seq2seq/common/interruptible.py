"""Long C++ calls that Ctrl-C can still stop at once.

A signal reaches Python code only between bytecodes: while C++ code runs (SentencePiece
training a vocabulary, minutes on a large corpus), a handler waits until it returns.
``call_interruptibly`` runs such a call on a worker thread and has the main thread wait in
short slices, so a signal handler runs as soon as the signal arrives and whatever it raises
ends the wait. The worker is a daemon thread: left behind, it ends with the process.
``unfinished_calls`` names the workers whose call has not returned, and
``wait_for_unfinished`` waits for them (``Thread.is_alive`` cannot be trusted for this: on
Python 3.11 a ``join`` interrupted by a signal marks the thread stopped while it still runs).

(A forked child would do the same, but forking a process that already runs threads, as
PyTorch's do, can leave the child waiting forever on a lock one of them held: seen here.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

Result = TypeVar("Result")

WAIT_SLICE_SECONDS = 0.1  # how soon after a signal its handler runs

_unfinished: dict[threading.Thread, threading.Event] = {}  # a worker -> set when it returns
_lock = threading.Lock()


def unfinished_calls() -> list[str]:
    """The names of the worker threads whose call has not returned yet (calls whose wait
    a signal ended)."""
    with _lock:
        return sorted(worker.name for worker, done in _unfinished.items() if not done.is_set())


def wait_for_unfinished(timeout: float | None = None) -> bool:
    """Wait until every worker's call has returned (at most ``timeout`` seconds in all);
    whether they all have."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with _lock:
        events = list(_unfinished.values())
    for done in events:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not done.wait(left):
            return False
    return True


def call_interruptibly(function: Callable[..., Result], *args: Any) -> Result:
    """``function(*args)`` on a daemon thread, its result returned and its exception
    raised here; an exception a signal handler raises while it runs ends the wait at once.
    ``function`` must release the GIL while it works (SentencePiece's trainer does)."""
    outcome: list[tuple[bool, Any]] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, function(*args)))
        except BaseException as error:  # handed to the caller, which raises it
            outcome.append((False, error))
        finally:
            done.set()
            with _lock:
                _unfinished.pop(worker, None)

    worker = threading.Thread(target=run, name=f"seq2seq-{function.__name__}", daemon=True)
    with _lock:
        _unfinished[worker] = done
    worker.start()
    while worker.is_alive():
        worker.join(WAIT_SLICE_SECONDS)
    succeeded, value = outcome[0]
    if not succeeded:
        raise value
    return value
