"""The ``seq2seq`` command.

``seq2seq fit|validate|test --config C`` is Lightning's CLI (``commands/fit.py``), imported
only for those commands; the other commands are the functions marked ``@command`` in the
``*_command(s).py`` modules imported below, read by jsonargparse
(``commands/options.py``) and run without the training stack. A mistake in the user's input
ends with one line on stderr and exit status 1 (2 for the command line), not a traceback.
"""

from __future__ import annotations

import logging
import os
import sys
import textwrap
from argparse import SUPPRESS
from importlib.metadata import PackageNotFoundError, version

from jsonargparse import ArgumentParser

# isort: off
# The modules of the @command functions, imported in the order of the command list.
import seq2seq.commands.translate  # noqa: F401
import seq2seq.commands.models  # noqa: F401
import seq2seq.commands.checkpoint  # noqa: F401
import seq2seq.commands.corpus  # noqa: F401
import seq2seq.commands.recase  # noqa: F401
import seq2seq.commands.distill  # noqa: F401
import seq2seq.commands.attention  # noqa: F401
import seq2seq.commands.serve  # noqa: F401

# isort: on
from seq2seq.commands.options import (
    COMMANDS,
    DESCRIPTION,
    TRAINING_COMMANDS,
    OneLineParser,
    call_with_options,
    command_parser,
    print_usage_error,
    summary,
)
from seq2seq.common.errors import Seq2SeqError, UsageError
from seq2seq.inference.upgrade import RENAMED_COMMAND_OPTIONS, upgraded_arguments
from seq2seq.speedups.malloc import keep_freed_memory

BROKEN_PIPE_STATUS = 128 + 13  # what a shell reports for a process ended by SIGPIPE


class StderrHandler(logging.StreamHandler):
    """A handler that writes to whatever ``sys.stderr`` is when a message comes (not the
    stream of the first call: ``main`` may run several times in one process, as in tests)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _: object) -> None:
        pass


def show_progress_messages() -> None:
    """Print the toolkit's INFO messages (data filtering, vocabulary cache) on stderr."""
    logger = logging.getLogger("seq2seq")
    if not logger.handlers:
        handler = StderrHandler()
        handler.setFormatter(logging.Formatter("seq2seq: %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def package_version() -> str:
    """The installed package's version, from its metadata."""
    try:
        return version("seq2seq")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def command_summaries() -> dict[str, str]:
    """Every command of ``seq2seq`` with its one-line summary: Lightning's, then the others."""
    return {**TRAINING_COMMANDS, **{name: summary(run) for name, run in COMMANDS.items()}}


def command_list(summaries: dict[str, str]) -> str:
    """The commands, one line each: the name, then its summary. Written out here rather than
    left to the subcommands' own listing, which wraps a name longer than its column
    (align-score) onto a line of its own."""
    width = max(map(len, summaries)) + 2
    return "commands:\n" + "\n".join(f"  {name:{width}}{line}" for name, line in summaries.items())


def build_parser() -> ArgumentParser:
    """``seq2seq [--version] COMMAND [options]``: every command a subcommand. Lightning's are
    listed here but parsed by Lightning's CLI, which gets their command lines whole."""
    parser = OneLineParser(
        prog="seq2seq",
        usage="%(prog)s [-h] [--version] COMMAND [options]",
        description=f"{textwrap.fill(DESCRIPTION, width=79)}\n\n"
        f"{command_list(command_summaries())}",
        epilog="`seq2seq COMMAND --help` shows a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    subcommands = parser.add_subcommands(
        dest="command", required=True, help=SUPPRESS, title=SUPPRESS, description=SUPPRESS
    )
    for name in TRAINING_COMMANDS:
        subcommands.add_subcommand(name, OneLineParser())
    for name, run in COMMANDS.items():
        subcommands.add_subcommand(name, command_parser(name, run))
    for name, subparser in subcommands.choices.items():
        subparser.prog = f"seq2seq {name}"  # not jsonargparse's `seq2seq [options] NAME`
    return parser


def run_command(args: list[str]) -> None:
    """Parse a command line of the commands beside Lightning's and run its command."""
    parser = build_parser()
    if not args:  # nothing was run: the help, and a failure status
        parser.print_help()
        sys.exit(2)
    parsed = parser.parse_args(upgraded_arguments(args, RENAMED_COMMAND_OPTIONS))
    try:
        call_with_options(COMMANDS[parsed.command], parsed[parsed.command].as_dict())
    except UsageError as error:
        print_usage_error(str(error), f"seq2seq {parsed.command}")
        sys.exit(2)
    except BrokenPipeError:
        # The reader of stdout has gone (`seq2seq translate ... | head`): stop quietly, with
        # the status of a process ended by SIGPIPE, as `yes | head` ends. Stdout goes to
        # /dev/null so that the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(BROKEN_PIPE_STATUS)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    show_progress_messages()
    try:
        keep_freed_memory()  # faster CPU training; off with SEQ2SEQ_PLAIN=malloc
        if args and args[0] in TRAINING_COMMANDS:
            from seq2seq.commands.fit import run_lightning  # Lightning: for training only

            run_lightning(argv)
        else:
            run_command(args)
    except UsageError as error:  # from fit, validate or test: run_command reports its own
        print_usage_error(str(error), f"seq2seq {args[0]}")
        sys.exit(2)
    except Seq2SeqError as error:
        print(f"seq2seq: error: {error}", file=sys.stderr)
        sys.exit(1)
