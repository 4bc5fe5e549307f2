"""The lines ``fit`` starts and ends with: the model's size and the precision it trains in
(and why); then the best checkpoint and its validation BLEU, the last checkpoint, the wall
time, and where in its schedule a run ended that its own budget or early stopping cut
short."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Callback, EarlyStopping, ModelCheckpoint, Timer
from pytorch_lightning.utilities.model_summary import get_human_readable_count

from seq2seq.training.stopping import GracefulStop, ResumableCheckpoint

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
    callbacks = [c for c in trainer.checkpoint_callbacks if isinstance(c, ModelCheckpoint)]
    chooser = next(c for c in callbacks if isinstance(c, ResumableCheckpoint))
    last = next((c.last_model_path for c in callbacks if c.last_model_path), "")
    if chooser.best_model_path:
        score = chooser.best_model_score  # None: a config that monitors nothing
        scored = "no score" if score is None else f"{chooser.monitor} {float(score):.2f}"
        parts = [f"best checkpoint {chooser.best_model_path} ({scored})"]
    elif trainer.fast_dev_run:  # type: ignore[attr-defined]  # set by Lightning, undeclared
        parts = ["no best checkpoint (fast_dev_run)"]
    else:
        parts = [f"no best checkpoint (no {chooser.monitor} logged)"]
    if last:
        parts.append(f"last checkpoint {last}")
    line = f"fit finished in {wall_time(seconds)}: " + ", ".join(parts)
    return f"{line}; {cut}" if (cut := cut_short(trainer)) else line


def schedule_done(trainer: pl.Trainer) -> bool:
    """Whether the run reached its ``max_steps`` or ``max_epochs`` (a run with neither: yes)."""
    max_steps = trainer.max_steps
    max_epochs = -1 if trainer.max_epochs is None else trainer.max_epochs  # -1: no limit
    has_steps, has_epochs = max_steps not in (None, -1), max_epochs != -1
    if not (has_steps or has_epochs):
        return True
    return (has_steps and trainer.global_step >= max_steps) or (
        has_epochs and trainer.current_epoch >= max_epochs
    )


def schedule_position(trainer: pl.Trainer) -> str:
    """``after 9 of 24 epochs (step 1650)`` or ``at step 1650 of 3600 (epoch 9)``: the
    schedule's own unit first."""
    epochs, step = trainer.current_epoch, trainer.global_step
    if trainer.max_steps not in (None, -1):
        return f"at step {step} of {trainer.max_steps} (after {epochs} epochs)"
    return f"after {epochs} of {trainer.max_epochs} epochs (step {step})"


def cut_short(trainer: pl.Trainer) -> str | None:
    """What ended a run before the end of its schedule, and where (None: it ran to the
    end, was a smoke run, or a signal stopped it, which ``GracefulStop`` reports)."""
    # Lightning sets trainer.callbacks and trainer.fast_dev_run without declaring them
    callbacks: list[Callback] = trainer.callbacks  # type: ignore[attr-defined]
    stopped = any(c.stopped_by for c in callbacks if isinstance(c, GracefulStop))
    if trainer.fast_dev_run or stopped or schedule_done(trainer):  # type: ignore[attr-defined]
        return None
    position = schedule_position(trainer)
    timer = next((c for c in callbacks if isinstance(c, Timer)), None)
    if timer is not None and (remaining := timer.time_remaining()) is not None and remaining <= 0:
        budget = wall_time(timer._duration or 0)  # Timer keeps max_time only privately
        return (
            f"stopped by max_time ({budget}) {position}, before the end of its schedule, "
            "which a recipe's published figures assume (--trainer.max_time null trains to "
            "the end)"
        )
    early = next((c for c in callbacks if isinstance(c, EarlyStopping)), None)
    if early is not None and early.stopped_epoch:
        return (
            f"stopped early {position}: {early.monitor} did not improve in "
            f"{early.patience} validations"
        )
    return f"stopped {position}"


def precision_words(trainer: pl.Trainer) -> str:
    """``32-true (auto: this CPU ... would only emulate bf16)``: the precision the run trains
    in and, from seq2seq's Trainer, why."""
    choice = getattr(trainer, "precision_choice", None)
    return f"{trainer.precision} ({choice.reason})" if choice else str(trainer.precision)


def trainable_words(pl_module: Any, count: int) -> str:
    """``, 1.2 M trainable: encoder frozen`` when parts of the model are kept fixed."""
    frozen = getattr(pl_module, "frozen", None)
    if not frozen:
        return ""
    trainable = sum(p.numel() for p in pl_module.parameters() if p.requires_grad)
    return f", {get_human_readable_count(trainable)} trainable: {' and '.join(frozen)} frozen"


def start_words(pl_module: Any) -> str:
    """`` from multi30k-en-de (released, sha256 ...)``: what a run started from."""
    started_from = getattr(pl_module, "started_from", None)
    return f", starting from {started_from}" if started_from else ""


class FitSummary(pl.Callback):
    """Logs the model's size and precision when ``fit`` starts and ``summary_line`` when it
    ends, on the ``seq2seq`` logger, from process 0 only."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.start = time.monotonic()
        if trainer.is_global_zero:
            count = sum(p.numel() for p in pl_module.parameters())
            name = type(getattr(pl_module, "model", pl_module)).__name__
            size = get_human_readable_count(count)
            log.info(
                f"training {name} ({size} parameters{trainable_words(pl_module, count)}) "
                f"in {precision_words(trainer)}{start_words(pl_module)}"
            )

    def on_fit_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if trainer.is_global_zero:
            log.info(summary_line(trainer, time.monotonic() - self.start))
