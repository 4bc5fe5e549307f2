"""The ``seq2seq`` command.

``seq2seq fit|validate|test --config C`` is Lightning's CLI over ``TranslationTask`` and
``TranslationDataModule``; the other commands (``translate``, ``evaluate``,
``attention``, ``corpus``) take a checkpoint or write data and live in ``commands.py``.
A mistake in the user's input ends with one line on stderr and exit status 1, not a
traceback.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path
from typing import Any, NoReturn

from pytorch_lightning import LightningModule, Trainer
from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint, ThroughputMonitor
from pytorch_lightning.cli import LightningArgumentParser, LightningCLI, SaveConfigCallback
from pytorch_lightning.loggers import CSVLogger, Logger, TensorBoardLogger

from seq2seq.allocator import keep_freed_memory
from seq2seq.checkpoint import read_checkpoint
from seq2seq.commands import COMMANDS, run_command
from seq2seq.data import TranslationDataModule
from seq2seq.distributed import bound_collective_waits
from seq2seq.errors import Seq2SeqError
from seq2seq.fit_summary import FitSummary
from seq2seq.quiet import quiet_lightning
from seq2seq.task import TranslationTask, batch_sentences, batch_target_tokens

DESCRIPTION = (
    "Neural machine translation with pluggable, inspectable attention. Training runs through "
    "Lightning's CLI (fit, validate, test); translate, evaluate, attention and corpus take "
    "their own options (`seq2seq translate --help`)."
)


class ConfigIntoCheckpoint(SaveConfigCallback):
    """Besides writing config.yaml to the log folder, hand the config to the task so that
    every checkpoint carries it (a checkpoint alone must be enough to translate)."""

    def save_config(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        pl_module.run_config = self.parser.dump(self.config, skip_none=False)


def default_loggers(root: str, tensorboard: bool) -> list[Logger]:
    """CSV logs always, TensorBoard logs beside them when tensorboard is installed."""
    csv = CSVLogger(save_dir=root, name="logs")
    if not tensorboard:
        return [csv]
    return [csv, TensorBoardLogger(save_dir=root, name="logs", version=csv.version)]


class OneLineErrorParser(LightningArgumentParser):
    """Reports a config or command-line mistake in one line, not after a screen of usage."""

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:
        if not self.exit_on_error:  # a parser used internally: jsonargparse handles the error
            super().error(message, ex)
        parser = getattr(ex, "subcommand_parser", None) or self
        command = parser.prog.replace(" [options]", "")
        one_line = " ".join(message.split())
        print(f"seq2seq: error: {one_line} (see {command} --help)", file=sys.stderr)
        self.exit(2)


class Seq2SeqCLI(LightningCLI):
    """LightningCLI with the vocabulary linked from the data into the model, and best-k
    checkpointing and early stopping on validation BLEU."""

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.link_arguments("data.vocab", "model.vocab", apply_on="instantiate")
        parser.add_lightning_class_args(ModelCheckpoint, "checkpoint")
        parser.add_lightning_class_args(EarlyStopping, "early_stopping")
        parser.set_defaults(
            {
                "checkpoint.monitor": "val_bleu",
                "checkpoint.mode": "max",
                "checkpoint.save_top_k": 3,
                "checkpoint.save_last": True,
                "checkpoint.filename": "epoch{epoch:02d}-bleu{val_bleu:.2f}",
                "checkpoint.auto_insert_metric_name": False,
                "early_stopping.monitor": "val_bleu",
                "early_stopping.mode": "max",
                "early_stopping.patience": 5,
                # val BLEU exists only after a validation: check there, not at the end of
                # a training epoch, which max_steps or max_time can cut short of one
                "early_stopping.check_on_train_epoch_end": False,
            }
        )

    def _parse_ckpt_path(self) -> None:
        """Lightning reads ``--ckpt_path`` here with a bare torch.load; read it through
        ``read_checkpoint`` first so that a bad file is a CheckpointError, not a traceback."""
        subcommand = self.config.get("subcommand")
        ckpt_path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if ckpt_path and Path(ckpt_path).is_file():
            read_checkpoint(ckpt_path)
        super()._parse_ckpt_path()

    def instantiate_trainer(self, **kwargs: Any) -> Trainer:
        trainer_config = self._get(self.config_init, "trainer", default={})
        if trainer_config.get("logger") in (None, True):  # not configured: CSV (+ TensorBoard)
            root = trainer_config.get("default_root_dir") or "."
            tensorboard = importlib.util.find_spec("tensorboard") is not None
            kwargs["logger"] = default_loggers(root, tensorboard)
        return super().instantiate_trainer(**kwargs)


def run_lightning(args: list[str] | None) -> None:
    """Lightning's CLI on ``args`` (None: the process's own command line)."""
    bound_collective_waits()
    Seq2SeqCLI(
        TranslationTask,
        TranslationDataModule,
        save_config_callback=ConfigIntoCheckpoint,
        save_config_kwargs={"overwrite": True},
        # The bucketed batch sampler shards batches across processes itself.
        trainer_defaults={
            "use_distributed_sampler": False,
            "plugins": [{"class_path": "seq2seq.checkpoint_io.SafeCheckpointIO"}],
            # logs train|items_per_sec: real target tokens per second
            "callbacks": [
                ThroughputMonitor(batch_sentences, batch_target_tokens, window_size=20),
                FitSummary(),  # checkpoints, best val BLEU and wall time, in one line
            ],
            # Lightning's table measures FLOPs only with an example input (it would show 0);
            # FitSummary logs the parameter count instead
            "enable_model_summary": False,
        },
        seed_everything_default=1,
        parser_kwargs={"prog": "seq2seq", "description": DESCRIPTION},
        parser_class=OneLineErrorParser,
        args=args,
        auto_configure_optimizers=False,
    )


def show_progress_messages() -> None:
    """Print the toolkit's INFO messages (data filtering, vocabulary cache) on stderr."""
    logger = logging.getLogger("seq2seq")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("seq2seq: %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    show_progress_messages()
    quiet_lightning()
    keep_freed_memory()  # about a quarter more tokens/s in training on this CPU
    try:
        if args and args[0] in COMMANDS:
            run_command(args)
        else:
            run_lightning(argv)
    except Seq2SeqError as error:
        print(f"seq2seq: error: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
