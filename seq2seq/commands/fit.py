"""``seq2seq fit|validate|test``: Lightning's CLI over ``TranslationTask`` and
``TranslationDataModule``.

Only these commands import Lightning: ``seq2seq.commands.main`` imports this module when one of them
is asked for, so that translating, evaluating and the other commands start without the
training stack.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import yaml
from jsonargparse import DefaultHelpFormatter, get_loader, set_loader
from pytorch_lightning import LightningModule, Trainer
from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint, ThroughputMonitor
from pytorch_lightning.cli import LightningArgumentParser, LightningCLI, SaveConfigCallback
from pytorch_lightning.loggers import CSVLogger, Logger, TensorBoardLogger

from seq2seq.commands.options import DESCRIPTION, TRAINING_COMMANDS, OneLineErrors
from seq2seq.common.errors import Seq2SeqError
from seq2seq.common.folder_lock import claim_version
from seq2seq.common.ranges import declared_ranges
from seq2seq.inference.checkpoint import CHECKPOINT_KEY, read_checkpoint
from seq2seq.inference.upgrade import config_loader, upgraded_arguments

# --model.network lists (and takes by class name) the EncoderDecoder subclasses that exist
# when the parser is built, so every model family is imported here.
from seq2seq.rnn import RNNSeq2Seq
from seq2seq.training.data.datamodule import TranslationDataModule
from seq2seq.training.distributed import bound_collective_waits
from seq2seq.training.fit_summary import FitSummary
from seq2seq.training.guided_alignment import check_guided_settings
from seq2seq.training.init_from import (
    INIT_OPTION,
    check_contradictions,
    init_from_value,
    starting_options,
)
from seq2seq.training.quiet import quiet_lightning
from seq2seq.training.resume import (
    REPLACE_OPTION,
    check_new_run,
    checkpoint_dir,
    checkpoint_to_resume,
    remove_checkpoints,
)
from seq2seq.training.run_lock import RunLock
from seq2seq.training.stopping import GracefulStop, PreparationStop, ResumableCheckpoint
from seq2seq.training.task import TranslationTask, batch_sentences, batch_target_tokens
from seq2seq.training.trainer import AutoPrecisionTrainer
from seq2seq.transformer import Transformer

MODEL_FAMILIES = (RNNSeq2Seq, Transformer)

# Instead of argparse's usage, which spells out all 130 options in 75 lines; in the order
# the help lists them (TrainingParser.format_help).
TRAINING_USAGE = """%(prog)s [-h] [--config CONFIG] [--print_config]
    [--model.* ...] [--data.* ...] [--checkpoint.* ...] [--early_stopping.* ...]
    [--ckpt_path CKPT_PATH]{fit_only} [--trainer.* ...]"""


def training_help(command: str) -> dict[str, str]:
    """The description and short usage of a Lightning subcommand's ``--help``."""
    summary = TRAINING_COMMANDS[command]
    families = ", ".join(family.__name__ for family in MODEL_FAMILIES)
    description = (
        f"{summary[0].upper()}{summary[1:]}. The toolkit's own options come first: "
        f"--model.* (the task; --model.network is the encoder-decoder, one of {families}: "
        f"`seq2seq {command} --model.network.help NAME` shows its options), --data.* (the data "
        "and vocabulary), --checkpoint.* and --early_stopping.* (both on validation BLEU), "
        "--ckpt_path; Lightning's Trainer options (--trainer.*: devices, precision, "
        "max_epochs, max_time, ...) come last."
    )
    fit_only = f" [{REPLACE_OPTION}]" if command == "fit" else ""
    return {"description": description, "usage": TRAINING_USAGE.format(fit_only=fit_only)}


class ConfigIntoCheckpoint(SaveConfigCallback):
    """Besides writing config.yaml to the log folder, hand the config to the task so that
    every checkpoint carries it (a checkpoint alone must be enough to translate)."""

    def save_config(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        pl_module.run_config = self.parser.dump(self.config, skip_none=False)


def default_loggers(root: str, tensorboard: bool, claim: bool) -> list[Logger]:
    """CSV logs always, TensorBoard logs beside them when tensorboard is installed. With
    ``claim`` (the process that writes logs), the version folder is taken atomically."""
    version = claim_version(Path(root) / "logs") if claim else None
    csv = CSVLogger(save_dir=root, name="logs", version=version)
    if not tensorboard:
        return [csv]
    return [csv, TensorBoardLogger(save_dir=root, name="logs", version=csv.version)]


@functools.cache
def range_words() -> dict[str, str]:
    """``data.max_tokens`` -> ``an integer >= 1``: the ranges that the data module's and the
    task's arguments declare, as the help says them."""
    built: dict[str, Callable[..., Any]] = {
        "data.": TranslationDataModule.__init__,
        "model.": TranslationTask.__init__,
    }
    return {
        prefix + name: bounds.words(kind)
        for prefix, function in built.items()
        for name, (kind, bounds) in declared_ranges(function).items()
    }


class RangeHelpFormatter(DefaultHelpFormatter):
    """jsonargparse's help, with the declared range of an option before its type:
    ``(an integer >= 1; type: int, default: 4096)``."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = super()._get_help_string(action) or ""
        if words := range_words().get(action.dest):
            text = text.replace("(type: ", f"({words}; type: ", 1)
        return text


class TrainingParser(OneLineErrors, LightningArgumentParser):
    """The parser of fit, validate and test: the commands' one-line errors, each declared
    range in its option's help, and Lightning's --trainer.* options last."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, formatter_class=RangeHelpFormatter, **kwargs)

    def format_help(self, formatter: argparse.HelpFormatter | None = None) -> str:
        """The help, with the Trainer's 250 options after the toolkit's own, so that
        --model.* and --data.* come on the first screens."""
        trainer = (self.groups or {}).get("trainer")
        # argparse lists its groups in this order, a list that jsonargparse types Sequence
        groups = cast("list[argparse._ArgumentGroup]", self._action_groups)
        if trainer is not None and trainer in groups:
            groups.remove(trainer)
            groups.append(trainer)
        return super().format_help(formatter)


def _is_model_checkpoint(callback: Any) -> bool:
    """Whether a configured callback (class_path + init_args) is a ModelCheckpoint."""
    class_path = getattr(callback, "class_path", "")
    module, _, name = class_path.rpartition(".")
    try:
        return issubclass(getattr(importlib.import_module(module), name), ModelCheckpoint)
    except (ImportError, AttributeError, TypeError, ValueError):
        return False


def place_checkpoints(settings: Any) -> list[Path]:
    """Put every checkpoint callback of a parsed config (``settings``: one subcommand's)
    that names no folder of its own into the run's checkpoint folder (``recent-*.ckpt``
    beside the others, not per log version), and save them after validation only, as
    the checkpoint block does (never for an epoch cut short). The run's checkpoint
    folders, its own first."""
    folder = checkpoint_dir(
        settings.get("trainer.default_root_dir"), settings.get("checkpoint.dirpath")
    )
    settings["checkpoint.dirpath"] = str(folder)
    folders = [folder]
    for callback in settings.get("trainer.callbacks") or []:
        options = getattr(callback, "init_args", None)
        if not (_is_model_checkpoint(callback) and options):
            continue
        if not options.get("dirpath"):
            options["dirpath"] = str(folder)
        if options.get("save_on_train_epoch_end") is None:
            options["save_on_train_epoch_end"] = False
        folders.append(Path(options["dirpath"]))
    return folders


class Seq2SeqCLI(LightningCLI):
    """LightningCLI with the vocabulary linked from the data into the model, and best-k
    checkpointing and early stopping on validation BLEU. ``command``: the one subcommand
    (of ``TRAINING_COMMANDS``) it parses, whose parser is then the only one built (building
    a subcommand's parser is a large share of a command's start-up); None: all of them."""

    def __init__(self, *args: Any, command: str | None = None, **kwargs: Any) -> None:
        self.commands = [command] if command else list(TRAINING_COMMANDS)
        super().__init__(*args, **kwargs)

    def subcommands(self) -> dict[str, set[str]]:  # type: ignore[override]
        """Lightning's subcommands of those names (never ``predict``: the task has no
        predict step, and ``seq2seq translate`` is how a checkpoint translates)."""
        return {name: LightningCLI.subcommands()[name] for name in self.commands}

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.link_arguments("data.vocab", "model.vocab", apply_on="instantiate")
        parser.add_lightning_class_args(ResumableCheckpoint, "checkpoint")
        parser.add_lightning_class_args(EarlyStopping, "early_stopping")
        parser.set_defaults(
            {
                "checkpoint.monitor": "val_bleu",
                "checkpoint.mode": "max",
                "checkpoint.save_top_k": 3,
                "checkpoint.save_last": True,
                "checkpoint.filename": "epoch{epoch:02d}-bleu{val_bleu:.2f}",
                "checkpoint.auto_insert_metric_name": False,
                # saved after validation instead: an epoch cut short would resume at the next
                "checkpoint.save_on_train_epoch_end": False,
                "early_stopping.monitor": "val_bleu",
                "early_stopping.mode": "max",
                "early_stopping.patience": 5,
                # val BLEU exists only after a validation: check there, not at the end of
                # a training epoch, which max_steps or max_time can cut short of one
                "early_stopping.check_on_train_epoch_end": False,
            }
        )

    def _prepare_subcommand_parser(
        self, klass: type, subcommand: str, **kwargs: Any
    ) -> LightningArgumentParser:
        """Lightning's parser of ``subcommand`` (LightningCLI has no public hook for one
        subcommand's options); ``fit``'s also takes --replace_checkpoints."""
        parser = super()._prepare_subcommand_parser(klass, subcommand, **kwargs)
        if subcommand == "fit":
            parser.add_argument(
                REPLACE_OPTION,
                action="store_true",
                help="Start a new run in a checkpoint folder that holds another run's "
                "checkpoints, deleting them (without it, fit refuses; --ckpt_path last "
                "continues that run instead).",
            )
            parser.add_argument(
                INIT_OPTION,
                help="Start a new run from a trained model's weights: a checkpoint, a released "
                "model's name or a transformers MarianMT folder (or Hub id). The model brings "
                "its architecture, vocabulary and search; the data, optimizer, schedule and "
                "steps are the run's own (docs/fine-tuning.md).",
            )
        return parser

    def parse_arguments(self, parser: LightningArgumentParser, args: Any) -> None:
        """The parsed config, with what its options name on disk resolved: every checkpoint
        callback's folder (the run's own unless given) and ``--ckpt_path last`` as the newest
        last checkpoint there (or an error: there is nothing to resume). A checkpoint to
        resume from is read through ``read_checkpoint`` here, before Lightning reads it with
        a bare torch.load, so that a bad file is a CheckpointError, not a traceback."""
        super().parse_arguments(parser, args)
        self.checkpoint_folders: list[Path] = []
        # the checkpoint to resume from, its step and the precision it was trained in
        self.resuming: tuple[str, int | None, str | None] | None = None
        if not (subcommand := self.config.get("subcommand")):
            return
        settings = self.config[subcommand]
        if source := settings.get("init_from"):
            check_contradictions(settings, source)
        check_guided_settings(settings.get("model.guided_alignment"),
                              settings.get("data.train_alignments"))  # fmt: skip
        self.checkpoint_folders = place_checkpoints(settings)
        if settings.get("ckpt_path") == "last":
            root = settings.get("trainer.default_root_dir")
            settings["ckpt_path"] = str(checkpoint_to_resume(self.checkpoint_folders[0], root))
        if (ckpt_path := settings.get("ckpt_path")) and Path(ckpt_path).is_file():
            checkpoint = read_checkpoint(ckpt_path)
            precision = checkpoint.get(CHECKPOINT_KEY, {}).get("precision")
            self.resuming = ckpt_path, checkpoint.get("global_step"), precision

    def before_instantiate_classes(self) -> None:
        """A ``fit`` that would write over the checkpoints of another run is refused here,
        before any data are prepared; the checkpoints it may replace are noted."""
        self.checkpoints_to_replace: list[Path] = []
        if self.subcommand != "fit":
            return
        settings = self.config["fit"]
        replace = settings.pop("replace_checkpoints")  # a saved config must not carry it
        settings.pop("init_from")  # expanded into model.* and data.* options before parsing
        ckpt_path, root = settings.get("ckpt_path"), settings.get("trainer.default_root_dir")
        if not settings.get("trainer.fast_dev_run"):  # a smoke run writes no checkpoint
            self.checkpoints_to_replace = check_new_run(
                self.checkpoint_folders, root, ckpt_path, replace
            )
        if self.resuming:
            path, step, _ = self.resuming
            print(f"seq2seq: resuming from {path} at step {step}", file=sys.stderr)

    def note_precision_change(self, trainer: AutoPrecisionTrainer) -> None:
        """A run resumed in another precision than it trained in (``precision: auto`` on
        another kind of machine) says so."""
        trained_in = self.resuming[2] if self.resuming else None
        if trained_in and trained_in != trainer.precision:
            print(
                f"seq2seq: the run trained in {trained_in} until now and goes on in "
                f"{trainer.precision} ({trainer.precision_choice.reason})",
                file=sys.stderr,
            )

    def instantiate_trainer(self, **kwargs: Any) -> Trainer:
        """The Trainer; for ``fit``, with the checkpoint folder locked (by global rank 0,
        before any log folder is made) and, unless configured, the default loggers."""
        trainer_config = self._get(self.config_init, "trainer", default={})
        default_logging = trainer_config.get("logger") in (None, True)
        if default_logging:  # set below, once this process's rank is known
            kwargs["logger"] = False
        # the CLI's trainer_class, which Lightning types as its base
        trainer = cast(AutoPrecisionTrainer, super().instantiate_trainer(**kwargs))
        if trainer.is_global_zero:
            self.note_precision_change(trainer)
        if self.subcommand == "fit" and trainer.is_global_zero:
            # Lightning sets trainer.callbacks at run time without declaring it
            callbacks = trainer.callbacks  # type: ignore[attr-defined]
            run_lock = next(c for c in callbacks if isinstance(c, RunLock))
            run_lock.acquire(self._get(self.config, "checkpoint.dirpath"))
            remove_checkpoints(self.checkpoints_to_replace)  # the lock is ours: no run uses them
        if default_logging:  # CSV (+ TensorBoard)
            root = trainer_config.get("default_root_dir") or "."
            tensorboard = importlib.util.find_spec("tensorboard") is not None
            trainer.loggers = default_loggers(root, tensorboard, claim=trainer.is_global_zero)
        return trainer

    def before_fit(self) -> None:
        """Settings the Trainer cannot run are refused here, before DDP starts its processes."""
        self.model.check_trainer(self.trainer)

    def after_fit(self) -> None:
        # Lightning sets trainer.callbacks at run time without declaring it
        callbacks = self.trainer.callbacks  # type: ignore[attr-defined]
        next(c for c in callbacks if isinstance(c, GracefulStop)).exit_if_stopped(self.trainer)


UPGRADING_YAML = "seq2seq_yaml"  # jsonargparse's YAML with renamed class paths upgraded
set_loader(UPGRADING_YAML, config_loader(get_loader("yaml")), exceptions=(yaml.YAMLError,))


def with_starting_options(args: list[str]) -> list[str]:
    """``fit --init_from MODEL ...`` with what the model brings (architecture, vocabulary,
    search) put before the user's options, which may change only what a run may change
    (``check_contradictions`` says which). Done once: DDP's processes read the result."""
    source = init_from_value(args)
    if not args or args[0] != "fit" or source is None or "--model.init_from" in args:
        return args
    return [args[0], *starting_options(source), *args[1:]]


def run_lightning(args: list[str] | None) -> Seq2SeqCLI:
    """Lightning's CLI on ``args`` (None: the process's own command line), run; options
    renamed since an earlier version are read under their names of now."""
    if args is None:
        sys.argv[1:] = with_starting_options(upgraded_arguments(sys.argv[1:]))  # DDP reads it
    else:
        args = with_starting_options(upgraded_arguments(args))
    command = (sys.argv[1:] if args is None else args)[0]  # one of TRAINING_COMMANDS
    quiet_lightning()
    bound_collective_waits()
    with PreparationStop() as preparation_stop:  # signals until the data are ready
        return Seq2SeqCLI(
            TranslationTask,
            TranslationDataModule,
            trainer_class=AutoPrecisionTrainer,  # precision: auto
            save_config_callback=ConfigIntoCheckpoint,
            save_config_kwargs={"overwrite": True},
            # The bucketed batch sampler shards batches across processes itself.
            trainer_defaults={
                "use_distributed_sampler": False,
                "plugins": [{"class_path": "seq2seq.training.checkpoint_io.SafeCheckpointIO"}],
                # logs train|items_per_sec: real target tokens per second
                "callbacks": [
                    ThroughputMonitor(batch_sentences, batch_target_tokens, window_size=20),
                    preparation_stop,
                    GracefulStop(),
                    RunLock(),
                    FitSummary(),  # checkpoints, best val BLEU and wall time, in one line
                ],
                # Lightning's table measures FLOPs only with an example input (it would show 0);
                # FitSummary logs the parameter count instead
                "enable_model_summary": False,
            },
            seed_everything_default=1,
            parser_kwargs={
                "prog": "seq2seq",
                "description": DESCRIPTION,
                "parser_mode": UPGRADING_YAML,
                command: {**training_help(command), "parser_mode": UPGRADING_YAML},
            },
            parser_class=TrainingParser,
            args=args,
            auto_configure_optimizers=False,
            command=command,
        )


def fit(
    *configs: str | Path, options: Sequence[str] = (), init_from: str | Path | None = None
) -> Path:
    """Train from Python as ``seq2seq fit --config C ... OPTIONS`` does: the same configs,
    Lightning run, checkpoints, logs and refusals. Returns the checkpoint to translate with:
    the best by the config's monitored score, else the last. ``init_from``: start from a
    trained model's weights, as ``--init_from`` does (a checkpoint, a released name, a
    transformers MarianMT folder).

        best = seq2seq.fit("configs/demo.yaml", options=["--trainer.max_epochs", "2"])
        seq2seq.load(best).translate("forty-two")
        tuned = seq2seq.fit("configs/finetune.yaml", init_from="multi30k-en-de",
                            options=["--data.source", "my-corpus"])

    A mistake in the data, a checkpoint or the run folder raises ``Seq2SeqError`` with the
    command's one-line message; a mistake in the options themselves prints that line and
    raises ``SystemExit(2)``, as the command exits.
    """
    args = ["fit", *(a for config in configs for a in ("--config", str(config))), *options]
    if init_from is not None:
        args += [INIT_OPTION, str(init_from)]
    cli = run_lightning(args)
    callback = cli.trainer.checkpoint_callback
    chosen = ""
    if isinstance(callback, ModelCheckpoint):
        chosen = callback.best_model_path or callback.last_model_path
    if not chosen:
        raise Seq2SeqError("the run wrote no checkpoint (fast_dev_run, or no checkpointing?)")
    return Path(chosen)
