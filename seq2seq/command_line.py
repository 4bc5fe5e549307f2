"""The command line of the commands beside Lightning's (translate, evaluate, attention,
align-score, average, corpus, export, serve): every option checked while the command line is
parsed, before any work, against a range the option's help shows with its default; a mistake
is one line, status 2."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from seq2seq.errors import DataError, OutputError

Run = Callable[[argparse.Namespace], None]  # what runs a command, given its parsed options
CT2_QUANTIZATIONS = ("float32", "int8", "int8_float32", "bfloat16")  # `export --quantization`


def usage_error(prog: str, message: str) -> NoReturn:
    """A command-line mistake of command ``prog`` ('seq2seq translate'): one line, status 2."""
    one_line = " ".join(message.split())
    print(f"seq2seq: error: {one_line} (see {prog} --help)", file=sys.stderr)
    sys.exit(2)


class OneLineParser(argparse.ArgumentParser):
    """Reports a command-line mistake in one line (status 2), not after a screen of usage."""

    def error(self, message: str) -> NoReturn:
        usage_error(self.prog, message)


@dataclass(frozen=True)
class Number:
    """The type of a numeric option: parses its text and checks it is within the range
    ``minimum`` .. ``maximum`` (either bound may be open: ``above``/``below``)."""

    kind: type[int] | type[float]
    minimum: float | None = None
    maximum: float | None = None
    above: bool = False  # the minimum itself is excluded
    below: bool = False  # the maximum itself is excluded

    @property
    def range(self) -> str:
        """The accepted values in words: 'an integer >= 1', 'a number in (0, 1]'."""
        noun = "an integer" if self.kind is int else "a number"
        low, high = self.minimum, self.maximum
        if low is not None and high is not None:
            opening, closing = "(" if self.above else "[", ")" if self.below else "]"
            return f"{noun} in {opening}{low:g}, {high:g}{closing}"
        if low is not None:
            return f"{noun} {'>' if self.above else '>='} {low:g}"
        if high is not None:
            return f"{noun} {'<' if self.below else '<='} {high:g}"
        return noun

    def __call__(self, text: str) -> int | float:
        try:
            value = self.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {self.range}, got {text!r}") from None
        if not math.isfinite(value) or not self._within(value):
            raise argparse.ArgumentTypeError(f"must be {self.range}, got {text}")
        return value

    def _within(self, value: float) -> bool:
        low, high = self.minimum, self.maximum
        if low is not None and (value <= low if self.above else value < low):
            return False
        return high is None or (value < high if self.below else value <= high)


def add_option(parser: argparse.ArgumentParser, *flags: str, help: str, **kwargs: Any) -> None:
    """``parser.add_argument`` with the option's range (for a Number) and default (unless
    None or a switch's False) appended to its help."""
    notes = []
    if isinstance(kwargs.get("type"), Number):
        notes.append(kwargs["type"].range)
    default = kwargs.get("default")
    if default is not None and default is not False:
        notes.append(f"default: {default}")
    if notes:
        help = f"{help} ({'; '.join(notes)})"
    parser.add_argument(*flags, help=help.replace("%", "%%"), **kwargs)


def check_input_file(path: str | None) -> None:
    """A text file to read must exist (checked before any work; None: stdin)."""
    if path is None:
        return
    if Path(path).is_dir():
        raise DataError(f"{path} is a folder, not a text file")
    if not Path(path).is_file():
        raise DataError(f"{path}: no such file")


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


def _add_search_options(parser: argparse.ArgumentParser, beam: int) -> None:
    """The search options, each stored under the name of the SearchSettings field it sets
    (what ``commands._search`` reads), and how sources are batched and cut."""
    add_option(parser, "--beam", dest="beam_size", metavar="BEAM", type=Number(int, 1),
               default=beam, help="beam size; 1 is greedy search")  # fmt: skip
    add_option(
        parser,
        "--length-penalty",
        type=Number(float, 0),
        default=None,
        help="GNMT alpha, 0 for none; unset: the model's config (model.length_penalty) or 1.0",
    )
    add_option(
        parser,
        "--max-len-ratio",
        type=Number(float, 0),
        default=1.5,
        help="longest output = ratio * source pieces + offset",
    )
    add_option(
        parser,
        "--max-len-offset",
        type=Number(int, 0),
        default=10,
        help="added to the longest output, see --max-len-ratio",
    )
    add_option(
        parser,
        "--max-tokens",
        type=Number(int, 1),
        default=4096,
        help="source pieces per batch, padding included; a longer sentence is a batch alone",
    )
    add_option(
        parser,
        "--max-source-len",
        type=Number(int, 1),
        default=512,
        help="cut longer sources to this many pieces, with a warning",
    )
    add_option(parser, "--bf16", action="store_true",
               help="search under bfloat16 autocast (faster on CPUs with AVX512-BF16/AMX; "
               "scores may differ in the last digits)")  # fmt: skip


def _add_command(commands: Any, name: str, runs: Mapping[str, Run]) -> argparse.ArgumentParser:
    """The parser of command ``name``, described by the docstring of the function that runs it."""
    return commands.add_parser(name, help=runs[name].__doc__, description=runs[name].__doc__)


def _add_checkpoints(parser: argparse.ArgumentParser | Any, required: bool) -> None:
    parser.add_argument(
        "--ckpt",
        action="append",
        required=required,
        help="checkpoint written by `seq2seq fit`; repeat it to decode with an ensemble "
        "(the mean of the models' log-probabilities at every step)",
    )


def _add_serve_command(commands: Any, runs: Mapping[str, Run]) -> None:
    """``seq2seq serve``: where to listen, the search, batching, and each request's limits."""
    p = _add_command(commands, "serve", runs)
    _add_checkpoints(p, required=True)
    _add_search_options(p, beam=5)  # --beam: a request's beam when it names none
    add_option(p, "--host", default="127.0.0.1", help="address to listen on")
    add_option(p, "--port", type=Number(int, 1, 65535), default=8000, help="port to listen on")
    add_option(p, "--batch-wait-ms", type=Number(float, 0, 1000), default=50.0,
               help="the longest a batch waits for as many requests as were lately in flight "
               "(up to --max-tokens); a lone client does not wait")  # fmt: skip
    add_option(p, "--max-beam", type=Number(int, 1, 64), default=16,
               help="the largest beam (and n_best) a request may ask for")  # fmt: skip
    add_option(p, "--max-sentences", type=Number(int, 1), default=64,
               help="sentences per request")  # fmt: skip
    add_option(p, "--max-chars", type=Number(int, 1), default=1000,
               help="characters per sentence")  # fmt: skip
    add_option(p, "--max-concurrent", type=Number(int, 1), default=256,
               help="requests in flight at once; more are refused (503)")  # fmt: skip


def build_parser(runs: Mapping[str, Run]) -> argparse.ArgumentParser:
    """The parser of the commands in ``runs`` (command name -> the function that runs it,
    whose docstring is the command's description)."""
    parser = OneLineParser(prog="seq2seq")
    commands = parser.add_subparsers(dest="command", required=True)

    p = _add_command(commands, "translate", runs)
    model = p.add_mutually_exclusive_group(required=True)
    _add_checkpoints(model, required=False)
    model.add_argument(
        "--ctranslate2",
        metavar="DIR",
        help="translate with a CTranslate2 export (`seq2seq export`) instead of a checkpoint; "
        "search options as with --ckpt (see the README), --bf16 excepted",
    )
    _add_search_options(p, beam=5)
    p.add_argument("--input", help="source text, one sentence per line (default: stdin)")
    p.add_argument("--output", help="where to write translations (default: stdout)")
    add_option(
        p,
        "--n-best",
        type=Number(int, 1),
        default=1,
        help="print N hypotheses per line (index, score, text), at most --beam",
    )
    p.add_argument("--progress", action="store_true", help="show a progress bar on stderr")

    p = _add_command(commands, "evaluate", runs)
    _add_checkpoints(p, required=True)
    _add_search_options(p, beam=5)
    p.add_argument("--src", required=True, help="source sentences")
    p.add_argument("--ref", required=True, help="reference translations")
    p.add_argument("--lang", help="target language for the literature scoring (default: config)")
    p.add_argument("--output", help="also write the translations here")
    p.add_argument("--json", action="store_true", help="print the scores as JSON")

    p = _add_command(commands, "attention", runs)
    _add_checkpoints(p, required=False)
    add_option(
        p,
        "--ensemble-attention",
        type=Number(int, 0),
        default=None,
        help="with several --ckpt: draw and align with this member's own attention (0 is the "
        "first) instead of the members' mean over heads, layers and members",
    )
    _add_search_options(p, beam=1)
    p.add_argument("--src", help="source sentences")
    p.add_argument("--ref", help="reference translations: align them (forced decoding)")
    p.add_argument("--out", required=True, help="folder for the heatmaps, alignments and report")
    add_option(
        p,
        "--limit",
        type=Number(int, 1),
        default=20,
        help="draw and report the first N lines; alignments and statistics cover all",
    )
    p.add_argument(
        "--layer", type=int, help="Transformer layer to align with (default: mean of all)"
    )
    add_option(
        p,
        "--method",
        choices=["argmax", "threshold"],
        default="argmax",
        help="one link per target word (argmax), or every weight above --threshold",
    )
    add_option(
        p,
        "--threshold",
        type=Number(float, 0, 1, above=True),
        default=0.3,
        help="link weight for --method threshold",
    )
    p.add_argument("--reverse-ckpt", help="a target->source model: symmetrise both directions")
    add_option(
        p,
        "--symmetrize",
        choices=["intersection", "union", "grow-diag", "grow-diag-final"],
        default="grow-diag",
        help="how --reverse-ckpt's links are combined with the forward ones",
    )
    p.add_argument(
        "--positional-encoding",
        action="store_true",
        help="plot the sinusoidal positional encoding instead (needs --dim and --len)",
    )
    add_option(p, "--dim", type=Number(int, 2), help="model size for --positional-encoding")
    add_option(
        p, "--len", type=Number(int, 1), help="number of positions for --positional-encoding"
    )

    p = _add_command(commands, "align-score", runs)
    p.add_argument("--gold", required=True, help="gold alignments, one line per sentence")
    p.add_argument("--hyp", required=True, help="alignments to score, Pharaoh i-j, 0-indexed")
    p.add_argument("--one-indexed", action="store_true", help="the gold file counts from 1")

    p = _add_command(commands, "average", runs)
    p.add_argument("--ckpts", nargs="+", required=True, help="checkpoints to average")
    p.add_argument("--out", required=True, help="where to write the averaged checkpoint")

    p = _add_command(commands, "export", runs)
    p.add_argument("--ckpt", required=True, help="Transformer checkpoint written by `seq2seq fit`")
    p.add_argument("--to", required=True, choices=["ctranslate2"], help="the engine to export for")
    p.add_argument("--out", required=True, help="folder to write the model into")
    add_option(
        p,
        "--quantization",
        choices=CT2_QUANTIZATIONS,
        default="float32",
        help="type of the stored weights (int8: about 4 times smaller and faster on CPUs)",
    )

    p = _add_command(commands, "corpus", runs)
    p.add_argument("--out", required=True, help="folder to write {split}.{lang} files into")
    add_option(p, "--seed", type=int, default=1, help="the draw of sentence pairs")
    add_option(p, "--src-lang", default="en", help="source language code")
    add_option(p, "--tgt-lang", default="de", help="target language code")

    _add_serve_command(commands, runs)
    return parser


def _check_together(args: argparse.Namespace) -> None:
    """Options whose range depends on another option (after parsing, before any work)."""
    n_best, beam = getattr(args, "n_best", 1), getattr(args, "beam_size", 1)
    if n_best > beam:
        usage_error(
            f"seq2seq {args.command}",
            f"argument --n-best: must be an integer in [1, --beam {beam}], got {n_best}",
        )


def parse_command_line(
    args: list[str], runs: Mapping[str, Callable[..., object]]
) -> argparse.Namespace:
    """The options of one command, every one checked: a mistake ends the process in one line."""
    parsed = build_parser(runs).parse_args(args)
    _check_together(parsed)
    return parsed
