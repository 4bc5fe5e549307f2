"""A bounded wait for every collective of a multi-process run.

When one process of a DDP run fails, is stopped or waits in another collective, the
others would wait for it in their next collective (a gradient all-reduce, a metric's
sync) for as long as the process group allows. Lightning builds its strategies from a
name (``--trainer.strategy ddp``, or ``auto`` with several devices) through its
``StrategyRegistry``; ``bound_collective_waits`` registers those names again with
``COLLECTIVE_TIMEOUT``, so a run with a lost process ends with an error after that time.

The time must exceed the longest wait of a healthy run: a process saving a checkpoint
while the others wait, or decoding a longer share of the validation set. Data
preparation (``prepare_data``) does not count: Lightning waits for it without a limit.
A longer or shorter limit: give the strategy as an object, e.g.
``--trainer.strategy DDPStrategy --trainer.strategy.timeout 0:30:00``.
"""

from __future__ import annotations

import inspect
from datetime import timedelta

from pytorch_lightning.strategies import StrategyRegistry

COLLECTIVE_TIMEOUT = timedelta(minutes=10)


def bound_collective_waits(timeout: timedelta = COLLECTIVE_TIMEOUT) -> None:
    """Make every strategy name whose class takes a ``timeout`` (ddp, ddp_spawn, fsdp,
    deepspeed, ...) build its strategy with ``timeout``, keeping its other settings."""
    for name, entry in list(StrategyRegistry.items()):
        strategy = entry["strategy"]
        if "timeout" in inspect.signature(strategy).parameters:
            settings = {**entry["init_params"], "timeout": timeout}
            StrategyRegistry.register(
                name, strategy, entry["description"], override=True, **settings
            )
