"""A callback for tests that stop a training run from outside at a chosen step."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from pytorch_lightning import Callback, LightningModule, Trainer


class PauseAt(Callback):
    """At the end of training step ``step``, touch ``marker`` and wait (up to a minute) until
    the test, having signalled the process, removes it; or, with ``signal``, send that
    signal to this process (a fit in the test's own process, stopped as Ctrl-C stops one).
    With ``sleep``, every step also takes at least that many seconds (for a time limit to
    fall mid-run)."""

    def __init__(self, step: int = -1, marker: str = "", sleep: float = 0.0, signal: int = 0):
        self.step, self.marker, self.sleep, self.signal = step, marker, sleep, signal

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        time.sleep(self.sleep)
        if trainer.global_step == self.step and self.signal:
            os.kill(os.getpid(), self.signal)  # its handler runs before the next line
        elif trainer.global_step == self.step:
            marker = Path(self.marker)
            marker.touch()
            for _ in range(600):
                time.sleep(0.1)  # a signal interrupts the sleep and its handler runs first
                if not marker.exists():
                    break
