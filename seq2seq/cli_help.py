"""What ``seq2seq`` shows of itself: the list of commands, ``--version``, and the one line
a command-line mistake ends with.

Each command parses its own options (Lightning's CLI for fit/validate/test, in
``training_cli.py``; argparse for the others); the parser here only lists them, so that
``seq2seq``, ``seq2seq --help`` and an unknown command show every command, one line each,
without importing Lightning.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from importlib.metadata import PackageNotFoundError, version
from typing import NoReturn

DESCRIPTION = (
    "Neural machine translation with pluggable, inspectable attention. fit, validate and "
    "test run Lightning's CLI over a config; the other commands take a checkpoint or write "
    "data."
)

# The Lightning subcommands offered (all but predict: the task has no predict step, and
# `seq2seq translate` is how a checkpoint translates), each with the line `seq2seq --help`
# shows for it. Written out so that listing them needs no Lightning; a test checks them
# against LightningCLI.subcommands().
TRAINING_COMMANDS = {
    "fit": "train a model on a config's data (--config C)",
    "validate": "score a checkpoint on the validation split",
    "test": "score a checkpoint on the test split",
}


def print_usage_error(message: str, command: str) -> None:
    """``seq2seq: error: MESSAGE (see COMMAND --help)`` on stderr, on one line."""
    one_line = " ".join(message.split())
    print(f"seq2seq: error: {one_line} (see {command} --help)", file=sys.stderr)


def package_version() -> str:
    """The installed package's version, from its metadata."""
    try:
        return version("seq2seq")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


class TopLevelParser(argparse.ArgumentParser):
    """Reports an unknown command or option in one line, not after the usage."""

    def error(self, message: str) -> NoReturn:
        print_usage_error(message, self.prog)
        self.exit(2)


def command_list(summaries: dict[str, str]) -> str:
    """The commands, one line each: the name, then its summary."""
    width = max(map(len, summaries)) + 2
    return "commands:\n" + "\n".join(f"  {name:{width}}{line}" for name, line in summaries.items())


def top_level_parser(summaries: dict[str, str]) -> argparse.ArgumentParser:
    """``seq2seq [--version] COMMAND``, listing each command of ``summaries`` with its line.
    The list is written out here rather than left to argparse's subparsers, which wrap a
    name longer than their column (align-score) onto a line of its own."""
    parser = TopLevelParser(
        prog="seq2seq",
        usage="%(prog)s [-h] [--version] COMMAND [options]",
        description=f"{textwrap.fill(DESCRIPTION, width=79)}\n\n{command_list(summaries)}",
        epilog="`seq2seq COMMAND --help` shows a command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    parser.add_argument(
        "command", metavar="COMMAND", nargs="?", choices=list(summaries), help=argparse.SUPPRESS
    )
    return parser


def exit_before_a_command(args: list[str], summaries: dict[str, str]) -> NoReturn:
    """For a command line that does not start with a command: the help, the version, or a
    one-line error (an unknown command names the known ones). With no command at all the
    help is shown and the exit status is 2, since nothing was run."""
    parser = top_level_parser(summaries)
    parser.parse_args(args)  # exits on --help, --version and any mistake
    parser.print_help()
    sys.exit(2)
