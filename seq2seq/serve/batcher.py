"""Dynamic batching: requests that arrive together are translated together.

Each request is submitted as a piece of ``Work`` (its items, their size in source pieces,
and a key naming the search it needs). One asyncio task takes the first waiting work and
everything else waiting, up to ``max_tokens`` source pieces; then, if fewer requests than
are expected have come, it waits for the rest, at most ``wait_s``. It groups the batch by
key (a beam of 5 and a greedy search cannot share one search), and hands each group to
``run`` on a single worker thread that owns the model, so the event loop keeps accepting
requests meanwhile. Every request gets exactly its own items' outputs, or the exception
its group raised; a failing group never stops the loop.

How many requests to expect is the most that were in flight (submitted, not yet answered)
at once since the previous batch was gathered: the clients active lately. A lone client
is then served at once, without waiting; and clients that each wait for their answer
before sending again, whose requests come back a few milliseconds after their batch ends,
are gathered into one batch instead of splitting into cohorts that alternate (one being
searched while the other queues, and taken alone as soon as the search ends). When
clients leave, one batch waits ``wait_s`` in vain, and the expectation falls to the load
that is left.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

KeyT = TypeVar("KeyT", bound=Hashable)  # what names a search: work with one key runs together
Run = Callable[[KeyT, list[Any]], Sequence[Any]]  # (key, items) -> one output per item


@dataclass
class Work(Generic[KeyT]):
    """One request's items, their cost in source pieces, and where its outputs go."""

    key: KeyT
    items: list[Any]
    size: int
    future: asyncio.Future


class Batcher(Generic[KeyT]):
    """Gathers submitted work into batches and runs them one at a time on one thread.

    Args:
        run: translates one group's items (all with the same key), on the worker thread.
        max_tokens: stop gathering once a batch holds this many source pieces (a request
            larger than that is a batch alone; ``run`` splits it further).
        wait_s: the longest a batch waits for the requests it expects.
    """

    def __init__(self, run: Run[KeyT], max_tokens: int, wait_s: float):
        self._run = run
        self._max_tokens = max_tokens
        self._wait_s = wait_s
        self._queue: asyncio.Queue[Work[KeyT]] = asyncio.Queue()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="seq2seq-model")
        self._task: asyncio.Task | None = None
        self._in_flight = 0  # requests submitted and not yet answered
        self._peak = 0  # the most in flight at once since the last batch was gathered
        self.batches = 0  # batches run so far (for /health, tests and logs)
        self.sentences = 0  # items in those batches

    def start(self) -> None:
        """Start gathering (inside the running event loop)."""
        self._task = asyncio.get_running_loop().create_task(self._gather_forever())

    async def stop(self) -> None:
        """Stop gathering once the work in hand is done, and end the worker thread."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._executor.shutdown(wait=True)

    async def submit(self, key: KeyT, items: list[Any], size: int) -> list[Any]:
        """The outputs of ``items`` (one each, in order), once a batch has run them."""
        future = asyncio.get_running_loop().create_future()
        self._in_flight += 1
        self._peak = max(self._peak, self._in_flight)
        self._queue.put_nowait(Work(key, items, size, future))
        return await future

    async def _gather_forever(self) -> None:
        while True:
            batch = await self._gather()
            self.batches += 1
            self.sentences += sum(len(work.items) for work in batch)
            for key, group in _by_key(batch).items():
                await self._run_group(key, group)

    async def _gather(self) -> list[Work[KeyT]]:
        """The next batch: the first work to come, all that waits with it, and what follows
        within the wait until as many requests as were lately in flight at once are in."""
        batch = [await self._queue.get()]
        expected = self._peak
        self._peak = self._in_flight  # the next batch expects what comes from now on
        tokens = batch[0].size
        deadline = asyncio.get_running_loop().time() + self._wait_s
        while tokens < self._max_tokens:
            if self._queue.empty():
                if len(batch) >= expected:
                    break
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    break
                try:
                    work = await asyncio.wait_for(self._queue.get(), remaining)
                except asyncio.TimeoutError:
                    break
            else:
                work = self._queue.get_nowait()
            batch.append(work)
            tokens += work.size
        return batch

    async def _run_group(self, key: KeyT, group: list[Work[KeyT]]) -> None:
        """Run one key's work as one call of ``run`` and hand each its outputs."""
        items = [item for work in group for item in work.items]
        loop = asyncio.get_running_loop()
        try:
            outputs = await loop.run_in_executor(self._executor, self._run, key, items)
        except Exception as error:  # the requests fail, the server goes on
            for work in group:
                if not work.future.done():
                    work.future.set_exception(error)
            return
        finally:
            self._in_flight -= len(group)
        start = 0
        for work in group:
            end = start + len(work.items)
            if not work.future.done():  # a client that went away has cancelled its future
                work.future.set_result(list(outputs[start:end]))
            start = end


def _by_key(batch: list[Work[KeyT]]) -> dict[KeyT, list[Work[KeyT]]]:
    """The batch's work grouped by key, each group in arrival order."""
    groups: dict[KeyT, list[Work[KeyT]]] = {}
    for work in batch:
        groups.setdefault(work.key, []).append(work)
    return groups
