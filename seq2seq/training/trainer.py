"""Lightning's Trainer, with ``precision: auto``: the precision the machine computes
natively (``seq2seq.common.precision``), resolved when the Trainer is made, so that a run
resumed on another kind of machine resolves it again."""

from __future__ import annotations

import logging
from typing import Any, Literal

import pytorch_lightning as pl
from lightning_fabric.plugins.precision.precision import _PRECISION_INPUT

from seq2seq.common.precision import Machine, Precision, training_precision

log = logging.getLogger("seq2seq")


class AutoPrecisionTrainer(pl.Trainer):
    """``pytorch_lightning.Trainer`` whose ``precision`` also takes ``auto``. What it chose
    and why is ``precision_choice``; a bf16 request the device can only emulate is
    honoured, with one warning line."""

    def __init__(
        self, *, precision: _PRECISION_INPUT | Literal["auto"] | None = None, **kwargs: Any
    ) -> None:
        self.precision_choice: Precision = training_precision(
            precision, kwargs.get("accelerator", "auto"), Machine.this()
        )
        if self.precision_choice.warning:
            log.warning(self.precision_choice.warning)
        super().__init__(precision=self.precision_choice.precision, **kwargs)  # type: ignore[arg-type]
