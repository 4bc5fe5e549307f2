"""Loading checkpoints safely: a file whose unpickling would run code is refused unread."""

from __future__ import annotations

import io
import pathlib
import pickle
import re
from pathlib import Path

import pytest
import torch

from seq2seq.checkpoint import load_trained
from seq2seq.checkpoint_io import SafeCheckpointIO
from seq2seq.cli import main
from seq2seq.errors import CheckpointError

REFUSAL = (
    r"seq2seq: error: refusing to load {path}: it is not a plain-weights checkpoint and loading "
    r"it could run code \(Unsupported global: GLOBAL \S+ was not an allowed global by default\)"
)


class TouchOnLoad:
    """Unpickling this creates ``marker``: a stand-in for any code hidden in a checkpoint."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (pathlib.Path.touch, (self.marker,))


def hostile_checkpoint(path: Path, marker: Path) -> Path:
    """A checkpoint that looks like ours, written by torch.save, with the payload inside."""
    torch.save({"state_dict": {}, "seq2seq": {"vocab": TouchOnLoad(marker)}}, path)
    return path


def test_the_hostile_checkpoint_really_runs_code_when_loaded_unsafely(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    torch.load(hostile_checkpoint(tmp_path / "x.ckpt", marker), weights_only=False)
    assert marker.exists()  # so the refusals below are refusals of a working exploit


def test_load_trained_and_the_trainer_refuse_it(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    ckpt = hostile_checkpoint(tmp_path / "x.ckpt", marker)
    with pytest.raises(CheckpointError, match="refusing to load .*could run code"):
        load_trained(ckpt)
    with pytest.raises(CheckpointError, match="refusing to load"):
        SafeCheckpointIO().load_checkpoint(ckpt, weights_only=False)  # asked to be unsafe
    assert not marker.exists()


@pytest.mark.parametrize("command", ["translate", "fit", "average"])
def test_the_cli_refuses_it_in_one_line(
    trained_run: dict,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
) -> None:
    marker = tmp_path / "ran"
    ckpt = hostile_checkpoint(tmp_path / "x.ckpt", marker)
    args = {
        "translate": ["translate", "--ckpt", str(ckpt)],
        "fit": ["fit", "--config", str(trained_run["config"]), "--ckpt_path", str(ckpt)],
        "average": ["average", "--ckpts", str(ckpt), "--out", str(tmp_path / "avg.ckpt")],
    }[command]
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"twenty-one\n")))
    with pytest.raises(SystemExit) as stopped:
        main(args)
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    [error] = [line for line in err.splitlines() if line.startswith("seq2seq: error:")]
    assert re.fullmatch(REFUSAL.format(path=re.escape(str(ckpt))), error), error
    assert "Traceback" not in err
    assert not marker.exists()


def test_a_bare_pickle_is_not_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    ckpt = tmp_path / "x.ckpt"
    ckpt.write_bytes(pickle.dumps({"state_dict": {}, "seq2seq": TouchOnLoad(marker)}))
    with pytest.raises(CheckpointError, match=r"truncated or corrupted \(not a complete torch"):
        load_trained(ckpt)
    assert not marker.exists()
