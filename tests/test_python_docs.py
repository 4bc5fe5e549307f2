"""Every Python example of docs/python.md runs, in order, on a trained checkpoint (the
session's tiny Transformer in place of the demo's), in a temporary folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "python.md"
DEMO_CKPT = "runs/demo/checkpoints/best.ckpt"


NOTEBOOK = DOC.parent / "notebooks" / "train-and-align.ipynb"
TRAINS = "seq2seq.fit("  # an example that trains: the notebook runs that call (quickly)


def all_examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def examples() -> list[str]:
    """The examples run here: all but the one that trains for minutes."""
    return [code for code in all_examples() if TRAINS not in code]


def test_the_training_example_is_what_the_notebook_runs() -> None:
    (training,) = [code for code in all_examples() if TRAINS in code]
    assert 'seq2seq.fit(\n    "configs/demo.yaml"' in training
    notebook = NOTEBOOK.read_text(encoding="utf-8")
    assert "seq2seq.fit(" in notebook and '\\"configs\\" / \\"demo.yaml\\"' in notebook


def test_the_page_has_its_examples() -> None:
    assert len(examples()) >= 4
    assert DEMO_CKPT in examples()[0]


def test_every_example_runs(
    trained_transformer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for number, code in enumerate(examples(), 1):
        code = code.replace(DEMO_CKPT, str(trained_transformer))
        exec(compile(code, f"docs/python.md, example {number}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "no/such/model.ckpt" in out  # the error example printed the one-line message
    assert (tmp_path / "forty-two.png").stat().st_size > 0
