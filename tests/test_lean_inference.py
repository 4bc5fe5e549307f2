"""Inference sits below training: the commands that load a checkpoint (or need none) run
without importing Lightning, torchmetrics or `datasets`. Each command runs in a fresh
interpreter, through the `seq2seq` entry point, and reports the modules it imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pytorch_lightning.cli import LightningCLI

from seq2seq.commands.fit import Seq2SeqCLI
from seq2seq.commands.options import TRAINING_COMMANDS

TRAINING_STACK = ("pytorch_lightning", "lightning_fabric", "torchmetrics", "datasets")

# Runs seq2seq.commands.main.main(ARGS) in a fresh interpreter, then prints the imported modules'
# names as JSON on the last line of stdout (main may end in sys.exit(0) or return).
PROGRAM = """
import json, sys
from seq2seq.commands.main import main
try:
    main(json.loads(sys.argv[1]))
finally:
    print(json.dumps(sorted(sys.modules)))
"""


def imported_by(args: list[str], stdin: str = "") -> set[str]:
    """The top-level packages a fresh interpreter has imported after ``seq2seq ARGS``."""
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, json.dumps(args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return {name.partition(".")[0] for name in json.loads(done.stdout.splitlines()[-1])}


def assert_lean(imported: set[str]) -> None:
    assert imported & {"seq2seq", "torch"}, "the command did not run"
    assert not imported & set(TRAINING_STACK), sorted(imported & set(TRAINING_STACK))


def test_translate_imports_no_training_stack_and_no_matplotlib(trained_run: dict) -> None:
    imported = imported_by(["translate", "--ckpt", str(trained_run["ckpt"])], "twenty-one\n")
    assert_lean(imported)
    assert "matplotlib" not in imported
    assert "transformers" not in imported  # only a Hugging Face model brings it


def test_the_server_imports_no_training_stack_and_no_matplotlib() -> None:
    pytest.importorskip("fastapi")
    program = (
        "import json, sys; import seq2seq.commands.serve, seq2seq.serve.app; "
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    imported = {name.partition(".")[0] for name in json.loads(done.stdout.splitlines()[-1])}
    assert "fastapi" in imported and "matplotlib" not in imported
    assert "transformers" not in imported
    assert not imported & set(TRAINING_STACK), sorted(imported & set(TRAINING_STACK))


def first_lines(path: Path, out: Path) -> str:
    """The first two lines of ``path`` written to ``out``; ``out`` as a string."""
    out.write_text("".join(path.read_text().splitlines(True)[:2]))
    return str(out)


def test_evaluate_imports_no_training_stack(trained_run: dict, tmp_path: Path) -> None:
    src = first_lines(trained_run["corpus"] / "test.en", tmp_path / "src")
    ref = first_lines(trained_run["corpus"] / "test.de", tmp_path / "ref")
    args = ["--ckpt", str(trained_run["ckpt"]), "--src", src, "--ref", ref]
    assert_lean(imported_by(["evaluate", *args]))


def test_attention_imports_no_training_stack(trained_run: dict, tmp_path: Path) -> None:
    src = first_lines(trained_run["corpus"] / "test.en", tmp_path / "src")
    args = ["--ckpt", str(trained_run["ckpt"]), "--src", src, "--out", str(tmp_path / "out")]
    assert_lean(imported_by(["attention", *args, "--limit", "1"]))


def test_average_imports_no_training_stack(trained_run: dict, tmp_path: Path) -> None:
    ckpt = str(trained_run["ckpt"])
    out = tmp_path / "avg.ckpt"
    assert_lean(imported_by(["average", "--ckpts", ckpt, ckpt, "--out", str(out)]))
    assert out.is_file()


@pytest.mark.parametrize("args", [["--help"], ["corpus", "--help"], ["translate", "--help"]])
def test_help_imports_no_training_stack(args: list[str]) -> None:
    imported = imported_by(args)
    assert "seq2seq" in imported
    assert not imported & set(TRAINING_STACK), sorted(imported & set(TRAINING_STACK))


def test_the_static_list_of_training_commands_is_lightnings_but_predict() -> None:
    """`seq2seq --help` lists fit/validate/test from a list written out (so that it needs no
    Lightning); that list must stay what Lightning's CLI offers."""
    assert list(TRAINING_COMMANDS) == [c for c in LightningCLI.subcommands() if c != "predict"]
    assert list(Seq2SeqCLI.subcommands()) == list(TRAINING_COMMANDS)


def test_batching_pulls_no_datamodule() -> None:
    """seq2seq.inference.batching (translation batches with it) is reached without the package
    importing the DataModule, and with it Lightning and `datasets`."""
    program = "import json, sys, seq2seq.inference.batching; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    modules = set(json.loads(done.stdout))
    assert "seq2seq.training.data.datamodule" not in modules
    assert not {name.partition(".")[0] for name in modules} & set(TRAINING_STACK)
