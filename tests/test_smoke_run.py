"""`seq2seq fit --trainer.fast_dev_run 1`, Lightning's smoke test, with every shipped config."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

from seq2seq.cli import main

pytestmark = pytest.mark.slow  # a fit of every shipped config

REPO_ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted((REPO_ROOT / "configs").rglob("*.yaml"))


def tiny_data(corpus: Path, cache: Path) -> list[str]:
    """Overrides that point a shipped config's data block at the tiny corpus (the WMT config
    reads a Hub dataset with its own split names)."""
    data = {
        "source": str(corpus),
        "src_lang": "en",
        "tgt_lang": "de",  # the en-fr configs too: the tiny corpus is en-de
        "hub_config": "null",
        "train_split": "train",
        "val_split": "val",
        "test_split": "test",
        "vocab_size": "400",
        "spm_sample": "0",
        "num_workers": "0",
        "cache_dir": str(cache),
    }
    return [arg for key, value in data.items() for arg in (f"--data.{key}", value)]


@pytest.mark.parametrize("config", SHIPPED, ids=lambda path: path.stem + "@" + path.parent.name)
def test_fast_dev_run_works_with_every_shipped_config(
    config: Path, trained_run: dict, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="seq2seq")
    one_cpu = ["--trainer.accelerator", "cpu", "--trainer.devices", "1"]
    main(
        [
            "fit",
            "--config",
            str(config),
            *tiny_data(trained_run["corpus"], trained_run["root"] / "smoke-cache"),
            *one_cpu,
            "--trainer.strategy",
            "auto",
            "--trainer.default_root_dir",
            str(tmp_path),
            "--trainer.fast_dev_run",
            "1",
        ]
    )
    notes = [r.getMessage() for r in caplog.records if "the cosine schedule warms up" in r.msg]
    cosine = yaml.safe_load(config.read_text())["model"].get("schedule") == "cosine"
    assert len(notes) == cosine  # one line where the schedule had to adapt
