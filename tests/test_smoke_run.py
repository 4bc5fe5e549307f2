"""`seq2seq fit --trainer.fast_dev_run 1`, Lightning's smoke test, with every shipped config:
each Multi30k recipe as its --config files compose it, the demo and the WMT14 recipe."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml
from test_recipes import COMPOSITIONS, recipe_files

from seq2seq.commands.main import main
from seq2seq.common.precision import Machine

pytestmark = pytest.mark.slow  # a fit of every shipped config

REPO_ROOT = Path(__file__).resolve().parents[1]
SINGLE_FILES = [
    REPO_ROOT / "configs" / "demo.yaml",
    REPO_ROOT / "configs/wmt14/en-de/transformer-base.yaml",
]
SHIPPED = {path.stem: [path] for path in SINGLE_FILES} | {
    f"{name}@{pair}": recipe_files(pair, name) for pair, name in COMPOSITIONS
}


def tiny_data(corpus: Path, cache: Path) -> list[str]:
    """Overrides that point a shipped config's data block at the tiny corpus (the WMT config
    reads a Hub dataset with its own split names), in small batches: a step of the WMT
    recipe's Transformer on all 400 pairs at once took eight seconds."""
    data = {
        "source": str(corpus),
        "src_lang": "en",
        "tgt_lang": "de",  # the en-fr configs too: the tiny corpus is en-de
        "hub_config": "null",
        "train_split": "train",
        "val_split": "val",
        "test_split": "test",
        "vocab_size": "400",
        "max_tokens": "300",
        "spm_sample": "0",
        "num_workers": "0",
        "cache_dir": str(cache),
    }
    return [arg for key, value in data.items() for arg in (f"--data.{key}", value)]


def uses_cosine(files: list[Path]) -> bool:
    """Whether the last of ``files`` that names a schedule names the cosine."""
    schedules = [
        yaml.safe_load(path.read_text()).get("model", {}).get("schedule") for path in files
    ]
    return [schedule for schedule in schedules if schedule][-1:] == ["cosine"]


@pytest.mark.parametrize("name", SHIPPED)
def test_fast_dev_run_works_with_every_shipped_config(
    name: str, trained_run: dict, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="seq2seq")
    one_cpu = ["--trainer.accelerator", "cpu", "--trainer.devices", "1"]
    main(
        [
            "fit",
            *(arg for path in SHIPPED[name] for arg in ("--config", str(path))),
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
    assert len(notes) == uses_cosine(SHIPPED[name])  # one line where the schedule had to adapt
    # every recipe trains in a precision this machine computes natively, and says which
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "bf16" in r.msg]
    (start,) = [r.getMessage() for r in caplog.records if " parameters) in " in r.getMessage()]
    native = {"bf16-mixed", "32-true"} if Machine.this().cpu_bf16 else {"32-true"}
    assert start.split(" parameters) in ")[1].split(" ")[0] in native, start
