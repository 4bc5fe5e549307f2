"""Training on two CPU processes with Lightning's DDP strategy (gloo)."""

from __future__ import annotations

import csv
import json
import math
import subprocess
from pathlib import Path
from typing import Any

import pytest
import pytorch_lightning as pl
import torch
import yaml
from cli_errors import cli_error
from pytorch_lightning import Trainer
from tiny_run import run_seq2seq, tiny_config, write_config

from seq2seq.training.distributed import COLLECTIVE_TIMEOUT, bound_collective_waits

pytestmark = pytest.mark.slow  # several processes

REPO_ROOT = Path(__file__).resolve().parents[1]


class RecordTrainingRows(pl.Callback):
    """Writes ``rank<k>.json``: the files this process's training rows are read from, and
    the row ids of each training batch it took, per epoch."""

    def __init__(self, out: str) -> None:
        self.out = Path(out)
        self.batches: dict[int, list[list[int]]] = {}

    def on_train_batch_start(self, trainer: pl.Trainer, module: Any, batch: Any, i: int) -> None:
        self.batches.setdefault(trainer.current_epoch, []).append(batch.ids.tolist())

    def on_train_end(self, trainer: pl.Trainer, module: Any) -> None:
        rows, _ = trainer.datamodule.tokenized("train")
        record = {
            "files": sorted(str(path) for path in rows.files.values()),
            "rows": len(rows),
            "batches": self.batches,
        }
        (self.out / f"rank{trainer.global_rank}.json").write_text(json.dumps(record))


def test_the_demo_config_on_two_processes_shards_training_and_scores_all_of_val(
    trained_run, tmp_path
):
    """configs/demo.yaml as shipped (progress bar, loggers, checkpoints and callbacks by
    default), shrunk and pointed at the tiny corpus, on two processes for two epochs: the
    processes share the training batches out, score the whole validation set together, and
    the checkpoint translates. Lightning's progress bar reads the epoch's metrics on process
    0 only: every collective must still meet its peers (it once hung at the end of epoch 0)."""
    config = yaml.safe_load((REPO_ROOT / "configs/demo.yaml").read_text())
    root = tmp_path / "demo"
    config["trainer"].update(max_epochs=2, default_root_dir=str(root), log_every_n_steps=5)
    record = {"class_path": "test_ddp.RecordTrainingRows", "init_args": {"out": str(tmp_path)}}
    config["trainer"]["callbacks"] = [*(config["trainer"].get("callbacks") or []), record]
    model = config["model"]["network"]["init_args"]
    model.update(embed_size=16, hidden_size=16)
    model["attention"]["init_args"]["hidden_size"] = 16
    config["data"].update(
        source=str(trained_run["corpus"]),
        vocab_size=400,
        max_tokens=800,
        eval_max_tokens=60,  # several validation batches, shared out
        cache_dir=str(tmp_path / "cache"),
    )
    path = write_config(tmp_path / "demo.yaml", config)
    ddp = ["--trainer.strategy", "ddp", "--trainer.devices", "2", "--trainer.accelerator", "cpu"]
    fit = run_seq2seq("fit", "--config", str(path), *ddp, timeout=300)
    assert fit.returncode == 0, fit.stderr[-3000:]
    assert "seq2seq: fit finished in " in fit.stderr  # the summary line, from process 0

    # Both processes read the one tokenized copy in the cache and take every other batch:
    # only the batch repeated to even out the last share may be in both, so each takes half
    # the epoch's batches (rounded up), and an optimizer step is one batch of each.
    ranks = [json.loads((tmp_path / f"rank{k}.json").read_text()) for k in (0, 1)]
    assert ranks[0]["files"] == ranks[1]["files"]
    assert all(Path(f).is_relative_to(tmp_path / "cache" / "tokens") for f in ranks[0]["files"])
    steps = 0
    for epoch in ranks[0]["batches"]:
        zero, one = ({tuple(b) for b in rank["batches"][epoch]} for rank in ranks)
        assert len(zero & one) <= 1
        assert {i for b in zero | one for i in b} == set(range(ranks[0]["rows"]))
        assert len(zero) == len(one) == math.ceil(len(zero | one) / 2)
        steps += len(zero)
    last = root / "checkpoints" / "last.ckpt"
    assert torch.load(last, map_location="cpu", weights_only=True)["global_step"] == steps

    # val_bleu is only logged when the hypotheses of both processes cover the whole split.
    with open(root / "logs/version_0/metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert len([row for row in rows if row.get("val_bleu")]) == 2
    assert len([row for row in rows if row.get("train_ppl")]) == 2

    translate = run_seq2seq("translate", "--ckpt", str(last),
                            stdin="twenty-one\nthree hundred and five\n")  # fmt: skip
    assert translate.returncode == 0, translate.stderr[-2000:]
    assert len(translate.stdout.splitlines()) == 2  # one line per input (2 epochs: maybe blank)


def test_ddp_stops_every_process_when_one_has_a_nan_loss(trained_run, tmp_path):
    config = tiny_config(tmp_path, trained_run["corpus"])
    config["data"]["cache_dir"] = str(trained_run["root"] / "cache")
    config["trainer"].update(strategy="ddp", devices=2, max_epochs=1, limit_train_batches=6)
    config["trainer"]["callbacks"] = [  # NaN logits at step 2 on process 1 only
        {"class_path": "test_nonfinite_loss.NaNLogitsAtStep", "init_args": {"step": 2, "rank": 1}}
    ]
    # a process stopping alone would leave the other waiting until the timeout
    fit = run_seq2seq("fit", "--config", str(write_config(tmp_path / "nan.yaml", config)))
    assert fit.returncode == 1, fit.stderr[-3000:]
    assert "Traceback" not in fit.stderr
    assert "seq2seq: error: the training loss is nan at step 2 (epoch 0, batch 2)" in fit.stderr


def test_skipping_nonfinite_steps_under_ddp_is_refused_before_its_processes_start(
    trained_run, tmp_path, capsys, monkeypatch
):
    def started(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(subprocess, "Popen", started)  # as DDP starts its other processes
    config = tiny_config(tmp_path, trained_run["corpus"])
    config["data"]["cache_dir"] = str(trained_run["root"] / "cache")
    config["trainer"].update(strategy="ddp", devices=2)
    config["model"]["nonfinite_loss"] = "skip"  # Lightning cannot skip a step under DDP
    path = write_config(tmp_path / "skip.yaml", config)
    status, error = cli_error(capsys, "fit", "--config", str(path))
    assert status == 1 and error.startswith("model.nonfinite_loss: skip works on one process only")
    assert not list(tmp_path.glob("run/checkpoints/*.ckpt"))  # no step was trained


def test_strategies_given_by_name_wait_at_most_the_collective_timeout():
    """`--trainer.strategy ddp` (or `auto` with several devices) builds its strategy from
    Lightning's registry; after ``bound_collective_waits`` (the CLI calls it) it carries
    COLLECTIVE_TIMEOUT, so a lost process ends the run instead of a wait without end."""
    bound_collective_waits()
    for strategy in ("ddp", "ddp_spawn", "auto"):
        trainer = Trainer(strategy=strategy, devices=2, accelerator="cpu", logger=False)
        assert trainer.strategy._timeout == COLLECTIVE_TIMEOUT  # no public accessor
