"""How a command of ``seq2seq`` is read from the command line: a typed function becomes a
jsonargparse parser whose options are its parameters, every option checked while the
command line is parsed, before any work; a mistake is one line, status 2.

A parameter ``max_len_ratio: Annotated[float, Range(0)] = 1.5`` documented in the
function's docstring (``Args:``) becomes ``--max-len-ratio`` with its help, its range and
its default; a parameter whose type is a dataclass contributes the dataclass's fields (its
``Attributes:``), so that options shared by several commands are written once; a
positional-only parameter (before ``/``) takes the command's positional arguments. Options
are spelled with dashes, as command lines usually are: jsonargparse's own
``add_function_arguments`` would spell them with underscores and take ``--ckpt+ B`` instead
of a repeated ``--ckpt B`` and ``--bf16 true`` instead of ``--bf16``.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import sys
from collections.abc import Callable, Sized
from pathlib import Path
from typing import Any, Literal, NoReturn, get_args, get_origin, get_type_hints

import docstring_parser
from jsonargparse import ArgumentParser, DefaultHelpFormatter

from seq2seq.common.errors import DataError, OutputError
from seq2seq.common.ranges import range_of

DESCRIPTION = (
    "Neural machine translation with pluggable, inspectable attention. fit, validate and "
    "test run Lightning's CLI over a config; the other commands take a checkpoint or write "
    "data."
)
# Lightning's subcommands offered (all but predict: the task has no predict step, and
# `seq2seq translate` is how a checkpoint translates), with the line `seq2seq --help` shows
# for each. Written out so that listing them needs no Lightning; a test checks them against
# LightningCLI.subcommands().
TRAINING_COMMANDS = {
    "fit": "train a model on a config's data (--config C)",
    "validate": "score a checkpoint on the validation split",
    "test": "score a checkpoint on the test split",
}


COMMANDS: dict[str, Callable[..., None]] = {}  # by name, filled by @command


def command(function: Callable[..., None]) -> Callable[..., None]:
    """Make ``function`` a command of ``seq2seq``, named after it (dashes for underscores):
    its parameters are the command's options, its docstring's first line the command's
    summary in ``seq2seq --help``."""
    COMMANDS[function.__name__.replace("_", "-")] = function
    return function


def print_usage_error(message: str, command: str) -> None:
    """``seq2seq: error: MESSAGE (see COMMAND --help)`` on stderr, on one line."""
    one_line = " ".join(message.split())
    print(f"seq2seq: error: {one_line} (see {command} --help)", file=sys.stderr)


class OptionHelpFormatter(argparse.RawDescriptionHelpFormatter, DefaultHelpFormatter):
    """Each option's help as written (it already says its range and default), without
    jsonargparse's ``(type: ..., default: ...)``; descriptions as written, paragraphs kept."""

    def _get_help_string(self, action: argparse.Action) -> str:
        return action.help or ""


class OneLineErrors(ArgumentParser):
    """The error policy of every ``seq2seq`` parser, the commands' and the Lightning ones':
    a command-line or config mistake is reported in one line (status 2), not after a screen
    of usage."""

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:
        if not self.exit_on_error:  # a parser used internally: jsonargparse handles the error
            super().error(message, ex)
        parser = getattr(ex, "subcommand_parser", None) or self
        print_usage_error(message, parser.prog.replace(" [options]", ""))
        sys.exit(2)


class OneLineParser(OneLineErrors):
    """The parser of a command written as a function (``@command``): one-line errors, each
    option's help as written."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(formatter_class=OptionHelpFormatter, **kwargs)


def option_name(parameter: str) -> str:
    """The option of a parameter: ``max_len_ratio`` -> ``--max-len-ratio``; a trailing
    underscore, which keeps a parameter from shadowing a builtin, is not spelled
    (``json_`` -> ``--json``)."""
    return "--" + parameter.removesuffix("_").replace("_", "-")


def _add_option(parser: ArgumentParser, name: str, hint: Any, default: Any, doc: str) -> None:
    """One option for parameter ``name``: a switch for a bool, repeatable for a list,
    choices for a Literal, a checked number for a range, with its range and default
    appended to its help."""
    kind, numbers = range_of(hint)
    kwargs: dict[str, Any] = {}
    notes = [numbers.words(kind)] if numbers else []
    if kind is bool:
        kwargs["action"] = "store_true"
    elif get_origin(kind) is list:  # --ckpt A --ckpt B, or --ckpts A B
        kwargs.update(action="extend", nargs="+", type=get_args(kind)[0])
    elif get_origin(kind) is Literal:
        kwargs["choices"] = get_args(kind)
    else:
        kwargs["type"] = numbers.parser(kind) if numbers else kind
    required = default is inspect.Parameter.empty
    if not required and default is not None and default is not False:
        notes.append(f"default: {default}")
    help = f"{doc} ({'; '.join(notes)})" if notes else doc
    parser.add_argument(
        option_name(name),
        dest=name,
        required=required,
        default=None if required else default,
        help=help,
        **kwargs,
    )


def _add_positional(parser: ArgumentParser, name: str, doc: str) -> None:
    """Parameter ``name`` (positional-only in the function: a list of strings) as the
    command's positional arguments, any number of them."""
    parser.add_argument(name, nargs="*", default=None, help=doc)


def _documented(thing: Callable[..., Any] | type) -> dict[str, str]:
    """The documentation of each parameter (``Args:``) or field (``Attributes:``)."""
    docs = docstring_parser.parse(inspect.getdoc(thing) or "").params
    return {doc.arg_name: " ".join((doc.description or "").split()) for doc in docs}


def summary(function: Callable[..., Any]) -> str:
    """A command's one-line summary: the first line of its function's docstring."""
    line = (inspect.getdoc(function) or "").splitlines()[0].rstrip(".")
    return line[:1].lower() + line[1:]


def command_parser(name: str, function: Callable[..., Any]) -> ArgumentParser:
    """The parser of command ``name``: one option per parameter of ``function`` (the fields
    of a dataclass parameter, each an option of its own), described by its docstring."""
    docstring = docstring_parser.parse(inspect.getdoc(function) or "")
    paragraphs = [docstring.short_description, docstring.long_description]
    description = "\n\n".join(filter(None, paragraphs))
    parser = OneLineParser(prog=f"seq2seq {name}", description=description)
    hints, docs = get_type_hints(function, include_extras=True), _documented(function)
    for parameter in inspect.signature(function).parameters.values():
        hint = hints[parameter.name]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            defaults = parameter.default if parameter.default is not parameter.empty else hint()
            field_hints, field_docs = get_type_hints(hint, include_extras=True), _documented(hint)
            for field in dataclasses.fields(hint):
                default = getattr(defaults, field.name)
                _add_option(parser, field.name, field_hints[field.name], default,
                            field_docs[field.name])  # fmt: skip
        elif parameter.kind is parameter.POSITIONAL_ONLY:  # e.g. sentences to translate
            _add_positional(parser, parameter.name, docs[parameter.name])
        else:
            _add_option(parser, parameter.name, hint, parameter.default, docs[parameter.name])
    return parser


def call_with_options(function: Callable[..., Any], options: dict[str, Any]) -> None:
    """Call ``function`` with the parsed ``options`` (option values by parameter or field
    name), each dataclass parameter built from its fields."""
    hints = get_type_hints(function)
    positional, arguments = [], {}
    for name, parameter in inspect.signature(function).parameters.items():
        if dataclasses.is_dataclass(hints[name]):
            fields = dataclasses.fields(hints[name])
            arguments[name] = hints[name](**{field.name: options[field.name] for field in fields})
        elif parameter.kind is parameter.POSITIONAL_ONLY:
            positional.append(options[name] or None)  # none given: as if left out
        else:
            arguments[name] = options[name]
    function(*positional, **arguments)


def check_input_file(path: str | None) -> None:
    """A text file to read must exist (checked before any work; None: stdin)."""
    if path is None:
        return
    if Path(path).is_dir():
        raise DataError(f"{path} is a folder, not a text file")
    if not Path(path).is_file():
        raise DataError(f"{path}: no such file")


def check_parallel(path_a: str, lines_a: Sized, path_b: str, lines_b: Sized) -> None:
    """Two files that must hold one line per sentence each, the same sentences."""
    if len(lines_a) != len(lines_b):
        raise DataError(f"{path_a} has {len(lines_a)} lines but {path_b} has {len(lines_b)}")


def check_output_file(path: str | None, option: str = "--output", new_folder: bool = False) -> None:
    """A file to write must not be a folder, and its folder must exist unless ``new_folder``
    (it is then created): checked before any work, not after translating everything."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise OutputError(f"{option} {path} is a folder; give a file name")
    if not new_folder and not target.parent.is_dir():
        raise OutputError(f"{option} {path}: the folder {target.parent} does not exist")


def check_output_folder(path: str, option: str = "--out") -> None:
    """A folder to write into may not exist yet, but must not be a file."""
    if Path(path).exists() and not Path(path).is_dir():
        raise OutputError(f"{option} {path} is a file; give a folder")
