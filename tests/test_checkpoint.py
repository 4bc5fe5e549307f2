"""Loading checkpoints safely: a file whose unpickling would run code is refused unread; and
the search a checkpoint gives the commands, in checkpoints of this version and older ones."""

from __future__ import annotations

import dataclasses
import io
import pathlib
import pickle
import re
from functools import partial
from pathlib import Path

import pytest
import torch
import yaml

from seq2seq.commands.main import main
from seq2seq.common.errors import CheckpointError
from seq2seq.inference.checkpoint import CHECKPOINT_KEY, load_trained
from seq2seq.inference.search import SearchSettings
from seq2seq.rnn import RNNSeq2Seq
from seq2seq.text.tokenizer import VocabSettings, Vocabulary
from seq2seq.training.checkpoint_io import SafeCheckpointIO
from seq2seq.training.task import TranslationTask

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


# The task's search options as a run's config sets them, and the search they make.
CONFIGURED = {"test_beam": 3, "length_penalty": 0.6, "max_len_ratio": 2.0, "max_len_offset": 4}
CONFIGURED_SEARCH = SearchSettings(beam=3, length_penalty=0.6, max_len_ratio=2.0, max_len_offset=4)


def saved_by_the_task(path: Path, options: dict) -> dict:
    """The checkpoint the task saves (weights and payload) for a run whose config gives it
    ``options``: written to ``path`` and returned."""
    vocab = Vocabulary.train(["one two three"] * 20, ["eins zwei drei"] * 20, VocabSettings(300))
    network = {"embed_size": 8, "hidden_size": 8}
    task = TranslationTask(partial(RNNSeq2Seq, **network), vocab, **options)
    config = {"class_path": "seq2seq.rnn.RNNSeq2Seq", "init_args": network}
    task.run_config = yaml.safe_dump({"model": {"network": config, **options}})
    checkpoint = {"state_dict": task.state_dict()}
    task.on_save_checkpoint(checkpoint)
    torch.save(checkpoint, path)
    return checkpoint


def test_a_checkpoint_gives_the_search_its_run_was_configured_to_test_with(tmp_path: Path):
    checkpoint = saved_by_the_task(tmp_path / "x.ckpt", CONFIGURED)
    assert checkpoint[CHECKPOINT_KEY]["search"] == dataclasses.asdict(CONFIGURED_SEARCH)
    assert load_trained(tmp_path / "x.ckpt").search == CONFIGURED_SEARCH
    checkpoint[CHECKPOINT_KEY]["search"]["beam"] = 7  # the stored search, not the config's
    torch.save(checkpoint, tmp_path / "x.ckpt")
    assert load_trained(tmp_path / "x.ckpt").search.beam == 7


@pytest.mark.parametrize(
    ("options", "search"), [(CONFIGURED, CONFIGURED_SEARCH), ({}, SearchSettings())]
)
def test_an_older_checkpoint_without_the_search_reads_it_from_its_config(
    tmp_path: Path, options: dict, search: SearchSettings
):
    checkpoint = saved_by_the_task(tmp_path / "x.ckpt", options)
    del checkpoint[CHECKPOINT_KEY]["search"]  # as checkpoints were written before
    torch.save(checkpoint, tmp_path / "old.ckpt")
    assert load_trained(tmp_path / "old.ckpt").search == search
