"""A NaN training loss stops training naming the step, or (`skip`) is skipped and counted."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import pytest
import pytorch_lightning as pl
import torch
from tiny_run import tiny_config, write_config

from seq2seq.commands.main import main

pytestmark = pytest.mark.slow  # fits

POISONED_STEP = 3
TRAIN_BATCHES = 8


class NaNLogitsAtStep(pl.Callback):
    """Makes the model's logits NaN in one training batch, the first at global step ``step``
    (on process ``rank`` only, if given), and fails the run if that batch changes a weight
    (on any process)."""

    def __init__(self, step: int, rank: int | None = None) -> None:
        self.step, self.rank = step, rank
        self.before: dict[str, torch.Tensor] | None = None
        self.hook: torch.utils.hooks.RemovableHandle | None = None

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if trainer.global_step == self.step and self.before is None:
            self.before = {k: v.clone() for k, v in pl_module.state_dict().items()}
            poison = self.rank is None or trainer.global_rank == self.rank
            self.hook = pl_module.model.register_forward_hook(
                lambda module, args, output: (output[0] * (math.nan if poison else 1.0), output[1])
            )

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if self.hook is None:
            return
        self.hook.remove()
        self.hook = None
        assert self.before is not None
        changed = [k for k, v in pl_module.state_dict().items() if not v.equal(self.before[k])]
        assert not changed, f"the skipped batch changed {changed}"


def poisoned_config(trained_run: dict, root: Path, nonfinite_loss: str) -> Path:
    config = tiny_config(root, trained_run["corpus"])
    config["data"]["cache_dir"] = str(trained_run["root"] / "cache")
    config["model"]["nonfinite_loss"] = nonfinite_loss
    config["trainer"].update(max_epochs=1, limit_train_batches=TRAIN_BATCHES, log_every_n_steps=1)
    config["trainer"]["callbacks"] = [
        {"class_path": f"{__name__}.NaNLogitsAtStep", "init_args": {"step": POISONED_STEP}}
    ]
    return write_config(root / "config.yaml", config)


def test_stop_ends_training_with_the_step_and_saves_no_poisoned_weights(
    trained_run: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["fit", "--config", str(poisoned_config(trained_run, tmp_path, "stop"))])
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("seq2seq: error:")]
    assert errors == [
        f"seq2seq: error: the training loss is nan at step {POISONED_STEP} (epoch 0, batch "
        f"{POISONED_STEP}); lower the learning rate, clip gradients, or set "
        "model.nonfinite_loss: skip"
    ]
    for ckpt in tmp_path.glob("run/checkpoints/*.ckpt"):
        for value in torch.load(ckpt, weights_only=True)["state_dict"].values():
            assert value.isfinite().all()


def test_skip_drops_the_batch_counts_it_and_keeps_the_weights_finite(
    trained_run: dict, tmp_path: Path
) -> None:
    config = poisoned_config(trained_run, tmp_path, "skip")
    with pytest.warns(
        UserWarning, match=f"skipped a batch at step {POISONED_STEP} .*: the loss is nan"
    ):
        main(["fit", "--config", str(config)])
    checkpoint = torch.load(tmp_path / "run/checkpoints/last.ckpt", weights_only=True)
    assert checkpoint["seq2seq"]["skipped_batches"] == 1
    for value in checkpoint["state_dict"].values():
        assert value.isfinite().all()
    with open(tmp_path / "run/logs/version_0/metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["train_skipped_batches"]) for r in rows if r["train_skipped_batches"]] == [1.0]
    epoch_loss = [float(r["train_loss_epoch"]) for r in rows if r["train_loss_epoch"]]
    assert len(epoch_loss) == 1 and math.isfinite(epoch_loss[0])
