"""The ``seq2seq`` command.

``seq2seq fit|validate|test --config C`` is Lightning's CLI (``training_cli.py``), imported
only for those commands; the other commands (``translate``, ``evaluate``, ``attention``,
``align-score``, ``average``, ``corpus``) take a checkpoint or write data, live in
``commands.py`` and run without the training stack; ``cli_help.py`` lists them all. A
mistake in the user's input ends with one line on stderr and exit status 1, not a traceback.
"""

from __future__ import annotations

import logging
import sys

from seq2seq.cli_help import TRAINING_COMMANDS, exit_before_a_command
from seq2seq.commands import COMMANDS, run_command
from seq2seq.errors import Seq2SeqError
from seq2seq.speedups.malloc import keep_freed_memory


def show_progress_messages() -> None:
    """Print the toolkit's INFO messages (data filtering, vocabulary cache) on stderr."""
    logger = logging.getLogger("seq2seq")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("seq2seq: %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def command_summaries() -> dict[str, str]:
    """Every command of ``seq2seq`` with its one-line summary: Lightning's, then the others."""
    return {**TRAINING_COMMANDS, **COMMANDS}


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in command_summaries():
        exit_before_a_command(args, command_summaries())
    show_progress_messages()
    try:
        keep_freed_memory()  # faster CPU training; off with SEQ2SEQ_PLAIN=malloc
        if args[0] in COMMANDS:
            run_command(args)
        else:
            from seq2seq.training_cli import run_lightning  # Lightning: for training only

            run_lightning(argv)
    except Seq2SeqError as error:
        print(f"seq2seq: error: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
