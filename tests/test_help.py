"""The command line shows itself: every command listed, --version, no broken command, and
the toolkit's own options described in `fit --help`."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
from importlib.metadata import version

import jsonargparse
import pytest
from tiny_run import SIZES, run_seq2seq, tiny_config, write_config

import seq2seq
from seq2seq.attention import Attention
from seq2seq.commands.options import COMMANDS, TRAINING_COMMANDS
from seq2seq.model import EncoderDecoder
from seq2seq.text.demo_corpus import write_corpus

EVERY_COMMAND = {"fit", "validate", "test", *COMMANDS}


def outcome(result: subprocess.CompletedProcess) -> tuple[int, str, str]:
    """A command's (exit status, stdout, stderr)."""
    return result.returncode, result.stdout, result.stderr


def listed_commands(help_text: str) -> dict[str, str]:
    """The "commands:" section of a help screen: each command and the one line beside it.
    A summary that wraps onto a second line fails here."""
    lines = help_text.splitlines()
    if "commands:" not in lines:
        return {}
    section = lines[lines.index("commands:") + 1 :]
    section = section[: section.index("")] if "" in section else section
    listed = {}
    for line in section:
        match = re.fullmatch(r"\s+([a-z][a-z-]*)\s{2,}(\S.*)", line)
        assert match, f"not one command with its summary on one line: {line!r}"
        listed[match.group(1)] = match.group(2)
    return listed


def option_help(help_text: str) -> dict[str, str]:
    """Each option of an argparse help screen and its whole help text. Entries start with
    two spaces and a dash; their help continues on more deeply indented lines."""
    entries: dict[str, str] = {}
    option = None
    for line in help_text.splitlines():
        if re.match(r"  -", line):
            invocation, *text = re.split(r"\s{2,}", line.strip(), maxsplit=1)
            option = invocation.split()[0].rstrip(",")
            entries[option] = " ".join(text)
        elif option and line.startswith("   "):
            entries[option] = f"{entries[option]} {line.strip()}".strip()
        else:
            option = None
    return entries


def undescribed(help_text: str, prefix: str) -> list[str]:
    """Options under ``prefix`` whose help is only jsonargparse's "(type: ..., default: ...)"."""
    return [
        option
        for option, text in option_help(help_text).items()
        if option.startswith(prefix) and (not text or text.startswith("("))
    ]


def concrete_subclasses(base: type) -> set[type]:
    """Every non-abstract subclass of ``base`` defined in the seq2seq package (all of its
    modules imported first, so that none is missed)."""
    for module in pkgutil.walk_packages(seq2seq.__path__, "seq2seq."):
        importlib.import_module(module.name)
    found, stack = set(), [base]
    while stack:
        for subclass in stack.pop().__subclasses__():
            stack.append(subclass)
            if not inspect.isabstract(subclass) and subclass.__module__.startswith("seq2seq."):
                found.add(subclass)
    return found


@pytest.fixture(scope="module")
def fit_help() -> str:
    """`seq2seq fit --help` in a fresh process: what it lists must not depend on what this
    test session happens to have imported."""
    result = run_seq2seq("fit", "--help")
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_help_lists_every_command_on_one_line_each(run_here, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    status, out, _ = outcome(run_here("--help"))
    assert status == 0
    listed = listed_commands(out)
    assert set(listed) == EVERY_COMMAND
    assert all(summary.strip() for summary in listed.values())


def test_seq2seq_alone_shows_the_commands_and_fails(run_here, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    status, out, _ = outcome(run_here())
    assert status == 2
    assert set(listed_commands(out)) == EVERY_COMMAND


def test_an_unknown_command_is_one_line_naming_every_command(run_here):
    status, out, err = outcome(run_here("frobnicate"))
    assert status == 2
    assert out == ""
    [line] = err.splitlines()
    assert line.startswith("seq2seq: error: ") and "frobnicate" in line
    assert all(command in line for command in EVERY_COMMAND)


def test_version_is_the_installed_package_version(run_here):
    status, out, _ = outcome(run_here("--version"))
    assert status == 0
    assert out.strip() == f"seq2seq {version('seq2seq')}"


def test_predict_is_not_offered(tmp_path, run_here):
    """The task has no predict step (Lightning's predict crashed): `translate` is how a
    checkpoint translates."""
    assert "predict" not in TRAINING_COMMANDS
    write_corpus(tmp_path / "corpus", seed=3, sizes=SIZES)
    config = write_config(tmp_path / "c.yaml", tiny_config(tmp_path, tmp_path / "corpus"))
    status, _, err = outcome(run_here("predict", "--config", str(config)))
    assert status == 2
    [line] = err.splitlines()
    assert line.startswith("seq2seq: error: ") and "'predict'" in line


@pytest.mark.slow  # `seq2seq fit --help` in a child process
def test_fit_help_describes_every_option_of_the_task_and_the_data(fit_help):
    options = option_help(fit_help)
    assert "--model.lr" in options and "--data.max_tokens" in options
    assert undescribed(fit_help, "--model.") == []
    assert undescribed(fit_help, "--data.") == []


@pytest.mark.slow  # `seq2seq fit --help` in a child process
def test_fit_help_lists_the_toolkits_options_before_lightnings(fit_help):
    """Lightning's Trainer has some 250 lines of options: they come last, and the
    description says so, so that --model.* and --data.* are on the first screen."""
    description = " ".join(fit_help.split("\noptions:", 1)[0].split())
    assert "Lightning's Trainer options (--trainer.*" in description and "come last" in description
    options = list(option_help(fit_help))
    ours = ("--model", "--data", "--checkpoint", "--early_stopping", "--ckpt_path", "--replace")
    first_trainer = next(i for i, option in enumerate(options) if option.startswith("--trainer"))
    assert max(i for i, option in enumerate(options) if option.startswith(ours)) < first_trainer
    assert all(option.startswith("--trainer") for option in options[first_trainer:])
    assert {"--trainer.max_epochs", "--trainer.devices"} <= set(options)  # all still there
    assert "--model.network" in "\n".join(fit_help.splitlines()[:60])


@pytest.mark.slow  # `seq2seq fit --help` in a child process
def test_fit_help_lists_every_model_family(fit_help):
    families = {cls.__name__ for cls in concrete_subclasses(EncoderDecoder)}
    assert {"RNNSeq2Seq", "Transformer"} <= families
    known = option_help(fit_help)["--model.network"].split("known subclasses:")[-1]
    listed = {path.strip(" ,)").rsplit(".", 1)[-1] for path in known.split()}
    assert families <= listed


@pytest.mark.parametrize(
    "part",
    sorted(
        concrete_subclasses(EncoderDecoder) | concrete_subclasses(Attention),
        key=lambda cls: cls.__name__,
    ),
    ids=lambda cls: cls.__name__,
)
def test_every_parameter_of_a_model_or_attention_is_described(part):
    """What `fit --model.network.help NAME` and `--model.network.attention.help NAME` show."""
    parser = jsonargparse.ArgumentParser(prog="part")
    parser.add_class_arguments(part, "part", skip={"vocab"})
    assert undescribed(parser.format_help(), "--part.") == []
