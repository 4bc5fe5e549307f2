"""A callback for tests that stop a training run from outside at a chosen step."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pytorch_lightning import Callback, LightningModule, Trainer


class PauseAt(Callback):
    """At the end of training step ``step``, touch ``marker`` and wait (up to a minute) until
    the test, having signalled the process, removes it; with ``sleep``, every step also
    takes at least that many seconds (for a time limit to fall mid-run)."""

    def __init__(self, step: int = -1, marker: str = "", sleep: float = 0.0) -> None:
        self.step, self.marker, self.sleep = step, marker, sleep

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        time.sleep(self.sleep)
        if trainer.global_step == self.step:
            marker = Path(self.marker)
            marker.touch()
            for _ in range(600):
                time.sleep(0.1)  # a signal interrupts the sleep and its handler runs first
                if not marker.exists():
                    break
