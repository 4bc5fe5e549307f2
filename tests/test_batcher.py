"""The dynamic batcher of `seq2seq serve` on its own, with a stand-in for the model: how it
gathers requests into batches, and that each request gets exactly its own answers.

The stand-in sleeps a little, as a search does; the limits below are generous, so a loaded
machine cannot fail these tests, which count batches and their sizes, never time them."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Hashable

from seq2seq.serve.batcher import Batcher

TIMEOUT_S = 60  # a test still running by then has hung: every one ends far sooner


class SlowModel:
    """Stands in for the model: each call takes ``seconds`` on the worker thread, answers
    each item with ``(key, item)``, and records how many items it was given."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.sizes: list[int] = []

    def __call__(self, key: Hashable, items: list) -> list:
        time.sleep(self.seconds)
        self.sizes.append(len(items))
        return [(key, item) for item in items]


async def closed_loop_client(
    batcher: Batcher, name: int, rounds: int, transit_s: float, rng: random.Random
) -> None:
    """Sends one item, waits for its answer (checking it is this item's), and sends the next
    a little later, as an HTTP client does (the answer travels back, the request in)."""
    for round_ in range(rounds):
        item = (name, round_)
        assert await batcher.submit("k", [item], size=1) == [("k", item)]
        await asyncio.sleep(rng.uniform(0, transit_s))


def run_clients(model: SlowModel, wait_s: float, *phases: tuple[int, int, float]) -> None:
    """Runs ``phases`` in turn on one batcher, each ``(clients, rounds, stagger_s)``: that
    many closed-loop clients, the n-th starting ``n * stagger_s`` after the first."""
    rng = random.Random(0)

    async def staggered(batcher: Batcher, name: int, rounds: int, stagger_s: float) -> None:
        await asyncio.sleep(name * stagger_s)
        await closed_loop_client(batcher, name, rounds, 0.005, rng)

    async def main() -> None:
        batcher = Batcher(model, max_tokens=1000, wait_s=wait_s)
        batcher.start()
        try:
            for clients, rounds, stagger_s in phases:
                await asyncio.gather(
                    *(staggered(batcher, n, rounds, stagger_s) for n in range(clients))
                )
        finally:
            await batcher.stop()

    asyncio.run(asyncio.wait_for(main(), TIMEOUT_S))


def test_clients_waiting_for_their_answers_are_gathered_into_one_batch():
    """8 clients, each sending again once answered, start a few ms apart. Taking only what
    is waiting when a search ends would keep them in cohorts that alternate (one searched
    while the other queues); the batcher waits for the clients it has seen in flight, so
    after the first few batches each holds about all 8."""
    model = SlowModel(0.02)
    run_clients(model, 1.0, (8, 30, 0.003))
    later = model.sizes[5:]
    assert sum(later) / len(later) >= 6, model.sizes


def test_a_lone_client_is_served_without_waiting():
    """The wait is 10 minutes, yet a client alone is answered at once, ten times running:
    with nobody else in flight there is nobody to wait for."""
    model = SlowModel(0.0)
    run_clients(model, 600.0, (1, 10, 0.0))
    assert model.sizes == [1] * 10


def test_when_clients_leave_the_batcher_stops_waiting_for_them():
    """4 clients, then one alone: its first batch may wait for the others (1 s), but the
    expectation falls to one client, so its 100 requests are not each kept 1 s (which would
    outlast the test's time limit)."""
    model = SlowModel(0.0)
    run_clients(model, 1.0, (4, 10, 0.0), (1, 100, 0.0))
    assert model.sizes[-100:] == [1] * 100


def test_batcher_gathers_requests_and_groups_them_by_search():
    """Three requests arrive together: one batch (the token budget is reached, so no
    waiting), two searches (keys a and b), each request its own outputs, in order."""
    calls = []

    def run(key, items):
        calls.append((key, list(items)))
        return [f"{key}:{item}" for item in items]

    async def main():
        batcher = Batcher(run, max_tokens=6, wait_s=600)
        batcher.start()
        try:
            return await asyncio.gather(
                batcher.submit("a", [1, 2], size=2),
                batcher.submit("b", [3], size=2),
                batcher.submit("a", [4], size=2),
            ), (batcher.batches, batcher.sentences)
        finally:
            await batcher.stop()

    outputs, (batches, sentences) = asyncio.run(asyncio.wait_for(main(), TIMEOUT_S))
    assert outputs == [["a:1", "a:2"], ["b:3"], ["a:4"]]
    assert calls == [("a", [1, 2, 4]), ("b", [3])]
    assert (batches, sentences) == (1, 4)


def test_a_failing_search_fails_its_requests_only():
    def run(key, items):
        if key == "bad":
            raise RuntimeError("out of memory")
        return items

    async def main():
        batcher = Batcher(run, max_tokens=4, wait_s=600)
        batcher.start()
        try:
            first = await asyncio.gather(
                batcher.submit("bad", ["x"], size=2),
                batcher.submit("good", ["y"], size=2),
                return_exceptions=True,
            )
            later = await batcher.submit("good", ["z"], size=4)  # the batcher goes on
            return first, later
        finally:
            await batcher.stop()

    (failed, answered), later = asyncio.run(asyncio.wait_for(main(), TIMEOUT_S))
    assert isinstance(failed, RuntimeError) and answered == ["y"]
    assert later == ["z"]
