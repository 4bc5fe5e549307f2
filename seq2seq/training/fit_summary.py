"""The one line ``fit`` ends with: the best checkpoint and its validation BLEU, the last
checkpoint, and the wall time."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.utilities.model_summary import get_human_readable_count

from seq2seq.training.stopping import ResumableCheckpoint

log = logging.getLogger("seq2seq")


def wall_time(seconds: float) -> str:
    """``h:mm:ss``."""
    minutes, seconds = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}"


def summary_line(trainer: pl.Trainer, seconds: float) -> str:
    """Where ``fit`` left its checkpoints, read from the CLI's ``checkpoint`` callback (the
    best checkpoint by its ``monitor``: val_bleu, or what a config names, such as
    val_bleu_literature) and from whichever ModelCheckpoint wrote ``last.ckpt``."""
    callbacks = trainer.checkpoint_callbacks
    chooser = next(c for c in callbacks if isinstance(c, ResumableCheckpoint))
    last = next((c.last_model_path for c in callbacks if c.last_model_path), "")
    if chooser.best_model_path:
        score = float(chooser.best_model_score)
        parts = [f"best checkpoint {chooser.best_model_path} ({chooser.monitor} {score:.2f})"]
    elif trainer.fast_dev_run:
        parts = ["no best checkpoint (fast_dev_run)"]
    else:
        parts = [f"no best checkpoint (no {chooser.monitor} logged)"]
    if last:
        parts.append(f"last checkpoint {last}")
    return f"fit finished in {wall_time(seconds)}: " + ", ".join(parts)


class FitSummary(pl.Callback):
    """Logs the model's size when ``fit`` starts and ``summary_line`` when it ends, on the
    ``seq2seq`` logger, from process 0 only."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.start = time.monotonic()
        if trainer.is_global_zero:
            count = sum(p.numel() for p in pl_module.parameters())
            name = type(getattr(pl_module, "model", pl_module)).__name__
            log.info(f"training {name} ({get_human_readable_count(count)} parameters)")

    def on_fit_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if trainer.is_global_zero:
            log.info(summary_line(trainer, time.monotonic() - self.start))
