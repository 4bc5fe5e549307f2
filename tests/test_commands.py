"""The commands beside Lightning's: every option checked before any work, in one line with
its range; help that shows defaults and ranges; checkpoints that are folders or other zips
named as such."""

from __future__ import annotations

import io
import zipfile
from dataclasses import fields
from functools import partial
from pathlib import Path

import pytest
from cli_errors import cli_error

from seq2seq.commands.decoding import DecodeSettings, search_options
from seq2seq.commands.main import build_parser, main
from seq2seq.inference.released import MODELS_ENV
from seq2seq.inference.search import SearchSettings
from seq2seq.translation_model import TranslationModel

one_line_error = partial(cli_error, alone=True)  # and nothing else on stderr


class UnreadableStdin(io.TextIOWrapper):
    """A stdin that fails the test when read: the error must come before any input."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO())

    @property
    def buffer(self):  # type: ignore[override]
        raise AssertionError("stdin was read before the options were checked")


TRANSLATE = ["translate", "--ckpt", "no-such.ckpt"]
ATTENTION = ["attention", "--ckpt", "no-such.ckpt", "--src", "x", "--out", "out"]


INT_1 = "an integer >= 1"
EVALUATE = ["evaluate", "--ckpt", "c", "--src", "s", "--ref", "r"]
POSITIONAL = ["positional-encoding", "--positions", "5", "--out", "o"]


@pytest.mark.parametrize(
    ("args", "option", "value", "accepted"),
    [
        (TRANSLATE, "--beam", "0", INT_1),
        (TRANSLATE, "--beam", "-1", INT_1),
        (TRANSLATE, "--beam", "two", INT_1),
        (TRANSLATE, "--n-best", "0", INT_1),
        (TRANSLATE, "--n-best", "7", "an integer in [1, --beam 5]"),
        (TRANSLATE, "--max-tokens", "0", INT_1),
        (TRANSLATE, "--max-tokens", "-5", INT_1),
        (TRANSLATE, "--max-len-ratio", "-1", "a number >= 0"),
        (TRANSLATE, "--max-len-offset", "-100", "an integer >= 0"),
        (TRANSLATE, "--max-source-len", "0", INT_1),
        (TRANSLATE, "--length-penalty", "-5", "a number >= 0"),
        (TRANSLATE, "--length-penalty", "nan", "a number >= 0"),
        (EVALUATE, "--beam", "0", INT_1),
        (EVALUATE, "--max-tokens", "0", INT_1),
        (ATTENTION, "--limit", "-1", INT_1),
        (ATTENTION, "--limit", "0", INT_1),
        (ATTENTION, "--threshold", "1.5", "a number in (0, 1]"),
        (ATTENTION, "--threshold", "0", "a number in (0, 1]"),
        (ATTENTION, "--max-source-len", "0", INT_1),
        (POSITIONAL, "--dim", "1", "an integer >= 2"),
    ],
)
def test_each_option_out_of_range_is_one_line_before_any_work(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    option: str,
    value: str,
    accepted: str,
) -> None:
    monkeypatch.setattr("sys.stdin", UnreadableStdin())
    status, error = one_line_error(capsys, *args, option, value)
    assert status == 2
    got = repr(value) if value == "two" else value
    assert (
        error == f"argument {option}: must be {accepted}, got {got} (see seq2seq {args[0]} --help)"
    )


@pytest.mark.parametrize(
    ("models", "error"),
    [
        ([], "translate needs --model, --ckpt, --hf or --ctranslate2 (no released models found)"),
        (["--ckpt", "a", "--ctranslate2", "b"], "--ckpt and --ctranslate2 exclude each other"),
        (["--model", "m", "--ctranslate2", "b"], "--model and --ctranslate2 exclude each other"),
    ],
)
def test_translate_takes_one_model_source_before_any_work(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    models: list[str],
    error: str,
) -> None:
    monkeypatch.setattr("sys.stdin", UnreadableStdin())
    monkeypatch.setenv(MODELS_ENV, str(tmp_path))  # a models folder with none in it
    status, line = one_line_error(capsys, "translate", *models)
    assert (status, line) == (2, f"{error} (see seq2seq translate --help)")


def test_output_into_a_missing_folder_is_refused_before_reading_input(
    trained_run: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.setattr("sys.stdin", UnreadableStdin())
    out = tmp_path / "missing" / "out.txt"
    status, error = one_line_error(
        capsys, "translate", "--ckpt", str(trained_run["ckpt"]), "--output", str(out)
    )
    assert (status, error) == (1, f"--output {out}: the folder {out.parent} does not exist")


def test_a_missing_checkpoint_is_refused_before_reading_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.setattr("sys.stdin", UnreadableStdin())
    missing = tmp_path / "nope.ckpt"
    status, error = one_line_error(capsys, "translate", "--ckpt", str(missing))
    assert (status, error) == (1, f"checkpoint not found: {missing}")


def test_a_folder_given_as_checkpoint_names_the_checkpoint_inside(
    trained_run: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = trained_run["root"] / "run"
    status, error = one_line_error(capsys, "translate", "--ckpt", str(run))
    expected = f"{run} is a folder, not a checkpoint (did you mean {run}/checkpoints/last.ckpt?)"
    assert (status, error) == (1, expected)
    status, error = one_line_error(capsys, "evaluate", "--ckpt", str(tmp_path), "--src", "s",
                                   "--ref", "r")  # fmt: skip
    assert error == f"{tmp_path} is a folder, not a checkpoint (it holds no last.ckpt or best.ckpt)"


def test_a_zip_that_is_not_a_checkpoint_is_named_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "notes.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("notes/readme.txt", "not weights")
    status, error = one_line_error(capsys, "average", "--ckpts", str(archive), "--out", "o.ckpt")
    assert (status, error) == (
        1,
        f"{archive} is a zip archive but not a torch checkpoint (it has no data.pkl record)",
    )


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("translate", ["beam size; 1 is greedy search (an integer >= 1; default: 5)",
                       "(an integer >= 1; default: 4096)", "(a number >= 0; default: 1.5)",
                       "(an integer >= 0; default: 10)", "(an integer >= 1; default: 512)",
                       "at most --beam (an integer >= 1; default: 1)", "(a number >= 0)"]),
        ("evaluate", ["(an integer >= 1; default: 5)", "(an integer >= 1; default: 4096)"]),
        ("attention", ["(an integer >= 1; default: 1)", "(an integer >= 1; default: 20)",
                       "(a number in (0, 1]; default: 0.3)", "(default: grow-diag)",
                       "(default: argmax)"]),
        ("positional-encoding", ["(an integer >= 2)", "(an integer >= 1; default: 50)"]),
        ("average", ["checkpoints to average"]),
        ("align-score", ["the gold file counts from 1"]),
        ("corpus", ["(default: 1)", "(default: en)", "(default: de)"]),
    ],
)  # fmt: skip
def test_help_shows_defaults_and_ranges(
    capsys: pytest.CaptureFixture[str], command: str, shown: list[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main([command, "--help"])
    assert stopped.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    for part in shown:
        assert part in text, part


CONFIGURED = SearchSettings(beam=4, length_penalty=0.6, max_len_ratio=2.0, max_len_offset=3)


@pytest.mark.parametrize(
    ("args", "search"),
    [
        (TRANSLATE, SearchSettings(beam=5, length_penalty=0.6)),  # the command's defaults
        (ATTENTION, SearchSettings(beam=1, length_penalty=0.6)),
        ([*TRANSLATE, "--beam", "3", "--n-best", "2", "--length-penalty", "0", "--max-len-ratio",
          "1", "--max-len-offset", "7", "--bf16"], SearchSettings(3, 2, 0.0, 1.0, 7, bf16=True)),
    ],
)  # fmt: skip
def test_the_search_is_the_models_with_what_the_command_line_sets(args, search):
    """Every option but an unset --length-penalty has a default of the command's own, so
    that only the length penalty comes from the checkpoint unless given."""
    parsed = build_parser().parse_args(args)
    options = parsed[parsed.command].as_dict()
    decode = DecodeSettings(**{field.name: options[field.name] for field in fields(DecodeSettings)})
    opened = TranslationModel(CONFIGURED)  # what seq2seq.load does with the keywords
    assert opened.searching(**search_options(decode, options.get("n_best", 1))) == search
