"""Inference sits below training: the commands that load a checkpoint (or need none) run
without importing Lightning, torchmetrics or `datasets`. The commands run one after another
in one fresh interpreter, through the `seq2seq` entry point, which reports the modules
imported after each."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from pytorch_lightning.cli import LightningCLI

from seq2seq.commands.options import TRAINING_COMMANDS

TRAINING_STACK = ("pytorch_lightning", "lightning_fabric", "torchmetrics", "datasets")

# One fresh interpreter runs every step in turn (an import, or seq2seq.commands.main.main(ARGS)
# with its stdin) and writes, after each, its exit status and the names of every module
# imported so far. Modules only accumulate: a step is lean when nothing up to it imported
# what it must not, so the steps that may import matplotlib come last.
PROGRAM = """
import importlib, io, json, sys
from seq2seq.commands.main import main
steps, report = json.loads(sys.argv[1]), []
for step in steps:
    status = 0
    if "module" in step:
        importlib.import_module(step["module"])
    else:
        sys.stdin = io.TextIOWrapper(io.BytesIO(step["stdin"].encode()), "utf-8")
        try:
            main(step["args"])
        except SystemExit as stop:
            status = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    report.append({"status": status, "modules": sorted(sys.modules)})
with open(sys.argv[2], "w") as out:
    json.dump(report, out)
"""


def first_lines(path: Path, out: Path) -> str:
    """The first two lines of ``path`` written to ``out``; ``out`` as a string."""
    out.write_text("".join(path.read_text().splitlines(True)[:2]))
    return str(out)


def lean_steps(trained_run: dict, folder: Path) -> dict[str, dict]:
    """The steps by name, in the order the child takes them."""
    ckpt = str(trained_run["ckpt"])
    src = first_lines(trained_run["corpus"] / "test.en", folder / "src")
    ref = first_lines(trained_run["corpus"] / "test.de", folder / "ref")
    steps = {"batching": {"module": "seq2seq.inference.batching"}}
    if importlib.util.find_spec("fastapi"):
        steps["server"] = {"module": "seq2seq.serve.app"}
    commands = {
        "translate": ["translate", "--ckpt", ckpt],
        "help": ["--help"],
        "corpus --help": ["corpus", "--help"],
        "translate --help": ["translate", "--help"],
        "average": ["average", "--ckpts", ckpt, ckpt, "--out", str(folder / "avg.ckpt")],
        "distill": ["distill", "--ckpt", ckpt, "--data", str(trained_run["corpus"]),
                    "--out", str(folder / "distilled"), "--src-lang", "en", "--tgt-lang", "de",
                    "--beam", "1"],
        "evaluate": ["evaluate", "--ckpt", ckpt, "--src", src, "--ref", ref],
        "attention": ["attention", "--ckpt", ckpt, "--src", src, "--out", str(folder / "maps"),
                      "--limit", "1"],
    }  # fmt: skip
    for name, args in commands.items():
        steps[name] = {"args": args, "stdin": "twenty-one\n" if name == "translate" else ""}
    return steps


@pytest.fixture(scope="module")
def imported(trained_run: dict, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Imported]:
    """Each step's exit status and the modules imported up to it, by step name."""
    folder = tmp_path_factory.mktemp("lean")
    steps = lean_steps(trained_run, folder)
    report = folder / "report.json"
    command = [sys.executable, "-c", PROGRAM, json.dumps(list(steps.values())), str(report)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results = {}
    for name, result in zip(steps, json.loads(report.read_text()), strict=True):
        modules, args = set(result["modules"]), steps[name].get("args", [])
        results[name] = Imported(name, args, result["status"], modules, results)
        assert results[name].status == 0, (name, done.stderr[-3000:])
    return results


class Imported:
    """What a step left imported: ``packages`` (top-level names), ``modules`` (full names);
    ``args``: the step's command line, if it ran one."""

    def __init__(
        self, step: str, args: list[str], status: int, modules: set[str], before: dict
    ) -> None:
        self.step, self.args, self.status, self.modules = step, args, status, modules
        self.before = dict(before)
        self.packages = {name.partition(".")[0] for name in modules}

    def assert_lacks(self, *packages: str) -> None:
        """None of ``packages`` is imported; else name the step that first imported each."""
        found = self.packages & set(packages)
        first = {
            package: next(s.step for s in [*self.before.values(), self] if package in s.packages)
            for package in found
        }
        assert not found, f"{self.step}: imported {sorted(found)}, first by step {first}"


def test_translate_imports_no_training_stack_and_no_matplotlib(imported) -> None:
    imported["translate"].assert_lacks(*TRAINING_STACK, "matplotlib")
    imported["translate"].assert_lacks("transformers")  # only a Hugging Face model brings it


def test_the_server_imports_no_training_stack_and_no_matplotlib(imported) -> None:
    if "server" not in imported:
        pytest.skip("fastapi is not installed (pip install -e '.[serve]')")
    assert "fastapi" in imported["server"].packages
    imported["server"].assert_lacks(*TRAINING_STACK, "matplotlib", "transformers")


def test_evaluate_imports_no_training_stack(imported) -> None:
    imported["evaluate"].assert_lacks(*TRAINING_STACK)


def test_attention_imports_no_training_stack(imported) -> None:
    imported["attention"].assert_lacks(*TRAINING_STACK)


def test_average_imports_no_training_stack(imported) -> None:
    imported["average"].assert_lacks(*TRAINING_STACK)
    assert Path(imported["average"].args[-1]).is_file()


def test_distill_imports_no_training_stack(imported) -> None:
    imported["distill"].assert_lacks(*TRAINING_STACK)


@pytest.mark.parametrize("step", ["help", "corpus --help", "translate --help"])
def test_help_imports_no_training_stack(imported, step: str) -> None:
    assert imported[step].status == 0
    imported[step].assert_lacks(*TRAINING_STACK)


def test_the_static_list_of_training_commands_is_lightnings_but_predict() -> None:
    """`seq2seq --help` lists fit/validate/test from a list written out (so that it needs no
    Lightning); that list must stay what Lightning's CLI offers."""
    assert list(TRAINING_COMMANDS) == [c for c in LightningCLI.subcommands() if c != "predict"]


def test_batching_pulls_no_datamodule(imported) -> None:
    """seq2seq.inference.batching (translation batches with it) is reached without the package
    importing the DataModule, and with it Lightning and `datasets`."""
    assert "seq2seq.training.data.datamodule" not in imported["batching"].modules
    imported["batching"].assert_lacks(*TRAINING_STACK)
