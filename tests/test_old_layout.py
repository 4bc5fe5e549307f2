"""Nothing a user has breaks when modules move: a checkpoint written by the code before
commands, inference and training got their own packages (``tests/data/old-layout.ckpt``,
a 1+1-layer Transformer fitted for 60 steps on the demo corpus by commit 9ec03e7, then
averaged) loads and translates as it did then, and every old module path imports the
module at its new path."""

from __future__ import annotations

import importlib
import sys
import warnings
import zipfile
from pathlib import Path

import pytest
from jsonargparse import ArgumentParser
from lightning_fabric.plugins import CheckpointIO

from seq2seq.commands.main import main
from seq2seq.common.moved import OLD_TO_NEW
from seq2seq.training.checkpoint_io import SafeCheckpointIO

DATA = Path(__file__).parent / "data"
OLD_CHECKPOINT = DATA / "old-layout.ckpt"


def test_a_checkpoint_of_the_old_layout_translates_as_it_did(capsys):
    """``translations.de`` was written by the old code: ``seq2seq translate --beam 3``."""
    main(["translate", "--ckpt", str(OLD_CHECKPOINT), "--input", str(DATA / "sources.en"),
          "--beam", "3"])  # fmt: skip
    assert capsys.readouterr().out == (DATA / "translations.de").read_text()


def test_the_old_checkpoint_names_an_old_class_path_which_still_resolves():
    archive = zipfile.ZipFile(OLD_CHECKPOINT)
    (pickle,) = [name for name in archive.namelist() if name.endswith("data.pkl")]
    old_path = "seq2seq.checkpoint_io.SafeCheckpointIO"
    assert old_path.encode() in archive.read(pickle)  # what a saved run's config says
    parser = ArgumentParser()
    parser.add_argument("--plugins", type=CheckpointIO)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        config = parser.parse_args(["--plugins", f'{{"class_path": "{old_path}"}}'])
        assert isinstance(parser.instantiate(config).plugins, SafeCheckpointIO)


@pytest.mark.parametrize(("old", "new"), sorted(OLD_TO_NEW.items()))
def test_an_old_module_path_is_the_module_at_its_new_path(old: str, new: str):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} is now {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
