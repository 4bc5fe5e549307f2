"""Nothing a user has breaks when classes move: a checkpoint written by the code before
commands, inference and training got their own packages (``tests/data/old-layout.ckpt``,
a 1+1-layer Transformer fitted for 60 steps on the demo corpus by commit 9ec03e7, then
averaged) names a class path that moved; it is upgraded where it is read, loads and
translates as it did then, and `seq2seq upgrade` writes it as this version does. No old
module path is importable: the upgrade is one explicit table (``inference/upgrade.py``),
not an import hook."""

from __future__ import annotations

import importlib
import zipfile
from pathlib import Path

import pytest
import torch
import yaml

from seq2seq.commands.main import main
from seq2seq.inference.checkpoint import CHECKPOINT_KEY, load_trained
from seq2seq.inference.upgrade import RENAMED_CLASSES, upgraded_config

DATA = Path(__file__).parent / "data"
OLD_CHECKPOINT = DATA / "old-layout.ckpt"
OLD_PATH = "seq2seq.checkpoint_io.SafeCheckpointIO"


def test_a_checkpoint_of_the_old_layout_translates_as_it_did(capsys):
    """``translations.de`` was written by the old code: ``seq2seq translate --beam 3``."""
    main(["translate", "--ckpt", str(OLD_CHECKPOINT), "--input", str(DATA / "sources.en"),
          "--beam", "3"])  # fmt: skip
    assert capsys.readouterr().out == (DATA / "translations.de").read_text()


def test_the_old_checkpoint_names_an_old_class_path_read_as_its_new_one():
    archive = zipfile.ZipFile(OLD_CHECKPOINT)
    (pickle,) = [name for name in archive.namelist() if name.endswith("data.pkl")]
    assert OLD_PATH.encode() in archive.read(pickle)  # what a saved run's config says
    config = load_trained(OLD_CHECKPOINT).config
    assert config["trainer"]["plugins"][0]["class_path"] == RENAMED_CLASSES[OLD_PATH]
    assert OLD_PATH not in yaml.safe_dump(config)


def test_upgrade_writes_the_checkpoint_as_this_version_does(tmp_path, capsys):
    out = tmp_path / "upgraded.ckpt"
    main(["upgrade", "--ckpt", str(OLD_CHECKPOINT), "--out", str(out)])
    payload = torch.load(out, weights_only=True)[CHECKPOINT_KEY]
    assert OLD_PATH not in payload["config"] and RENAMED_CLASSES[OLD_PATH] in payload["config"]
    main(["translate", "--ckpt", str(out), "--input", str(DATA / "sources.en"), "--beam", "3"])
    assert capsys.readouterr().out.splitlines()[1:] == (
        (DATA / "translations.de").read_text().splitlines()
    )  # the first line printed was the upgraded checkpoint's path


@pytest.mark.parametrize("old", sorted(RENAMED_CLASSES))
def test_an_old_class_path_is_not_importable_but_upgraded(old: str):
    """No alias keeps an old path alive (a moved module or a renamed class): the upgrade
    table alone reads it as the new one."""
    module, _, name = old.rpartition(".")
    with pytest.raises((ModuleNotFoundError, AttributeError)):
        getattr(importlib.import_module(module), name)
    config = {"trainer": {"plugins": [{"class_path": old}]}, "note": old + " stays in text"}
    upgraded = upgraded_config(config)
    assert upgraded["trainer"]["plugins"][0]["class_path"] == RENAMED_CLASSES[old]
    assert upgraded["note"] == config["note"]  # only a whole value is a class path


def test_fit_reads_a_config_that_names_an_old_class_path(trained_run, tmp_path):
    """A config a run of the old layout saved (its log folder's config.yaml) still trains."""
    config = yaml.safe_load(Path(trained_run["config"]).read_text())
    config["trainer"].update(default_root_dir=str(tmp_path / "run"), max_epochs=1,
                             plugins=[{"class_path": OLD_PATH}])  # fmt: skip
    config["checkpoint"] = {"dirpath": str(tmp_path / "run" / "checkpoints")}
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(config))
    main(["fit", "--config", str(path), "--trainer.max_steps", "2"])
    payload = torch.load(tmp_path / "run/checkpoints/last.ckpt", weights_only=True)
    assert RENAMED_CLASSES[OLD_PATH] in payload[CHECKPOINT_KEY]["config"]


def test_a_search_stored_under_its_old_field_names_is_read_with_the_new(tmp_path):
    checkpoint = torch.load(OLD_CHECKPOINT, weights_only=True)
    assert "beam_size" in checkpoint[CHECKPOINT_KEY]["search"]  # how it was written
    assert (
        load_trained(OLD_CHECKPOINT).search.beam
        == checkpoint[CHECKPOINT_KEY]["search"]["beam_size"]
    )


def test_fit_takes_the_old_spelling_of_a_renamed_option(trained_run, tmp_path, caplog):
    """``--model.test_beam_size`` (now ``--model.test_beam``) and ``--model.model.*`` (now
    ``--model.network.*``), each with a warning naming the new one; a config file naming
    ``test_beam_size`` and ``model: {model: ...}`` reads as ``test_beam`` and
    ``model: {network: ...}``."""
    config = yaml.safe_load(Path(trained_run["config"]).read_text())
    config["model"]["val_beam_size"] = config["model"].pop("val_beam", 1)
    config["model"]["model"] = config["model"].pop("network")
    config["trainer"].update(default_root_dir=str(tmp_path / "run"), max_epochs=1)
    config["checkpoint"] = {"dirpath": str(tmp_path / "run" / "checkpoints")}
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(config))
    main(["fit", "--config", str(path), "--trainer.max_steps", "2", "--model.test_beam_size", "3",
          "--model.model.init_args.dropout", "0.25"])  # fmt: skip
    payload = torch.load(tmp_path / "run/checkpoints/last.ckpt", weights_only=True)[CHECKPOINT_KEY]
    assert payload["search"]["beam"] == 3
    assert "test_beam: 3" in payload["config"] and "beam_size" not in payload["config"]
    stored = yaml.safe_load(payload["config"])["model"]
    assert "model" not in stored and stored["network"]["init_args"]["dropout"] == 0.25
    assert "--model.model.init_args.dropout is now --model.network.init_args.dropout" in caplog.text


def test_only_the_tasks_model_key_is_renamed():
    old = {"model": {"model": {"class_path": "X"}, "lr": 0.1}, "data": {"model": "kept"}}
    assert upgraded_config(old) == {
        "model": {"network": {"class_path": "X"}, "lr": 0.1},
        "data": {"model": "kept"},
    }
