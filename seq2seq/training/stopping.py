"""Stopping a run so that it can be resumed exactly.

``GracefulStop``: SIGINT (Ctrl-C) or SIGTERM (what schedulers send) finishes the current
optimizer step, then every process stops together, without the validation Lightning runs
when a run stops early (a scheduler's grace period is short, and the epoch is unfinished);
``fit`` then reports the step and the last checkpoint and exits with ``128 + signal`` (130,
143). A second signal ends the process at once without saving.

``ResumableCheckpoint``: Lightning's ModelCheckpoint, whose ``last.ckpt`` also holds the
final step of a run that stops mid-epoch (``max_steps``, ``max_time``, a signal) and the
state after every validation, so that ``--ckpt_path last`` continues from the next batch.

``PreparationStop``: before that, while the data are prepared (the corpus read into Arrow,
the vocabulary trained, the splits tokenized: minutes on a large corpus), SIGINT or SIGTERM
ends the command at once, in one line, with ``128 + signal``. The signal is raised as an
exception, so every cache write on the way out removes its partial files (each cache is
written under temporary names and renamed when whole), and the next run reuses what was
finished.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType
from typing import Any

import torch
from pytorch_lightning import Callback, LightningModule, Trainer
from pytorch_lightning.callbacks import ModelCheckpoint

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StoppedPreparing(BaseException):
    """A signal arrived while the data were prepared. Not an Exception, so that no
    ``except Exception`` on the way (in datasets, in the toolkit) takes it for an error."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class PreparationStop(Callback):
    """``with PreparationStop():`` around a Lightning command: until the data module is set
    up (the callbacks' ``setup`` hook comes right after it), SIGINT and SIGTERM raise
    StoppedPreparing, which ends the command with one line and ``128 + signal``. Then the
    earlier handlers are back, for Lightning's and GracefulStop's."""

    def __init__(self) -> None:
        self._previous: dict[int, Any] = {}

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        raise StoppedPreparing(signum)

    def _restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def __enter__(self) -> PreparationStop:
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self._restore()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: Any
    ) -> None:
        self._restore()
        if isinstance(error, StoppedPreparing):
            print(
                f"seq2seq: stopped by {error} while preparing the data; nothing half-written "
                "is kept, and the next run reuses what was finished",
                file=sys.stderr,
            )
            sys.exit(128 + error.signum)


def run_stops_after_this_batch(trainer: Trainer) -> bool:
    """True at the last training batch of the run: a callback asked to stop (the time limit,
    a signal) or the step limit is reached."""
    step_limit = trainer.max_steps is not None and trainer.max_steps >= 0
    return trainer.should_stop or (step_limit and trainer.global_step >= trainer.max_steps)


class GracefulStop(Callback):
    """Turns SIGINT/SIGTERM into ``trainer.should_stop`` at the end of the current step,
    agreed by every process, and remembers the signal for the exit status."""

    def __init__(self) -> None:
        self.requested = 0  # the signal received by this process, 0: none
        self.stopped_by = 0  # the signal the run stopped on (the largest over processes)
        self._previous: dict[int, Any] = {}

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.requested:
            print(f"seq2seq: {name} again: stopping at once, without saving", file=sys.stderr)
            os._exit(128 + signum)
        self.requested = signum
        print(
            f"seq2seq: {name}: stopping after this step and saving last.ckpt "
            f"({name} again stops at once)",
            file=sys.stderr,
        )

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # Installed here, after Lightning's own SIGTERM handler (set when fit starts), so
        # that this one replaces it; Lightning restores the previous handlers at teardown.
        if trainer.received_sigterm:  # a SIGTERM while the data were set up
            self.requested = signal.SIGTERM
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._on_signal)

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if (batch_idx + 1) % trainer.accumulate_grad_batches:
            return  # only after an optimizer step: a resume cannot rebuild half an accumulation
        stopped_by = self.requested
        if trainer.world_size > 1:
            # One collective on every process at every step: the stop is agreed by all of
            # them. (Alone, a process need not wait for its GPU to read the answer back.)
            wanted = torch.tensor(self.requested, device=trainer.strategy.root_device)
            stopped_by = int(trainer.strategy.reduce(wanted, reduce_op="max"))
        if stopped_by:
            self.stopped_by = stopped_by
            trainer.should_stop = True
            trainer.limit_val_batches = 0  # no validation (nor checkpoints) of a partial epoch

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def exit_if_stopped(self, trainer: Trainer) -> None:
        """After ``fit``: if a signal stopped the run, say where its last checkpoint is and
        exit with ``128 + signal``."""
        if not self.stopped_by:
            return
        if trainer.is_global_zero:
            paths = (getattr(c, "last_model_path", "") for c in trainer.checkpoint_callbacks)
            where = next((path for path in paths if path), "no last checkpoint was written")
            name = signal.Signals(self.stopped_by).name
            print(
                f"seq2seq: stopped by {name} at step {trainer.global_step}: {where} "
                "(continue with --ckpt_path last)",
                file=sys.stderr,
            )
        sys.exit(128 + self.stopped_by)


class ResumableCheckpoint(ModelCheckpoint):
    """ModelCheckpoint whose ``last.ckpt`` is always the newest resumable state.

    Lightning's ModelCheckpoint writes ``last.ckpt`` only at a step where it also writes a
    top-k checkpoint, and nothing at a ``max_steps`` stop or a stop between validations. This
    one also writes it after every validation and at the final step of a run that stops
    mid-epoch, from ``on_train_batch_end``: there the loops' progress says "this batch done",
    so a resume continues with the next batch. (With ``save_on_train_epoch_end``, which the
    CLI turns off, a save at the end of an epoch cut short would resume at the next epoch.)
    """

    # ModelCheckpoint has no public method to write last.ckpt on demand: these use its own
    # _save_last_checkpoint (file name, version counter, last_model_path) and its test for
    # "nothing to save now" (not fitting, a smoke run, or already saved at this step).
    def _write_last(self, trainer: Trainer) -> None:
        self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def _nothing_to_save(self, trainer: Trainer) -> bool:
        return not self.save_last or self._should_skip_saving_checkpoint(trainer)

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        if self._nothing_to_save(trainer) or not run_stops_after_this_batch(trainer):
            return
        saved_step = self._last_global_step_saved
        self._write_last(trainer)
        # a validation may still follow this batch: let it save its top-k checkpoint
        self._last_global_step_saved = saved_step

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        super().on_validation_end(trainer, pl_module)
        if not self._nothing_to_save(trainer):
            self._write_last(trainer)

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # Lightning's writes last.ckpt here even in a smoke run (fast_dev_run), which checkpoints
        # nothing else: it would pass for the run's newest state in a folder that holds one
        # (Lightning sets trainer.fast_dev_run at run time without declaring it)
        if not trainer.fast_dev_run:  # type: ignore[attr-defined]
            super().on_train_end(trainer, pl_module)
