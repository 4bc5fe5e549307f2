"""Every Python example of docs/python.md runs, in order, on a trained checkpoint (the
session's tiny Transformer in place of the demo's), in a temporary folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "python.md"
DEMO_CKPT = "runs/demo/checkpoints/best.ckpt"


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


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
