"""A training batch reads nothing back from its device but the non-finite-loss check
(each read makes a GPU's host wait: ``host_reads.py`` counts them on a CPU). The reads that
Lightning makes on its own (a logger's values every ``log_every_n_steps``, the optimizer's
step counters, which live on the host) are not the toolkit's and are left out.

The Transformer is checked, the family the GPU recipes train. The RNN encoder packs its
sequences for cuDNN, and packing takes the lengths on the host: one copy of ``src_lens``
per batch (``rnn.py``), then reads of that host copy, which a CPU cannot tell apart from
reads of a device.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from host_reads import HostReads
from tiny_run import tiny_config, write_config

from seq2seq.commands.main import main


class HostReadAudit(pl.Callback):
    """Counts the reads from the start of training batch ``skip`` to the start of batch
    ``skip + batches`` (the step, the optimizer and every callback in between) and writes
    them to ``out`` as JSON."""

    def __init__(self, out: str, skip: int = 2, batches: int = 4) -> None:
        self.out, self.skip, self.batches = Path(out), skip, batches
        self.seen = 0
        self.reads: HostReads | None = None

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, index: int) -> None:
        if self.seen == self.skip:
            self.reads = HostReads().__enter__()
        elif self.seen == self.skip + self.batches and self.reads is not None:
            self.reads.__exit__(None, None, None)
            self.out.write_text(json.dumps(dict(self.reads.sites)))
            self.reads = None
        self.seen += 1


TRANSFORMER = {
    "class_path": "seq2seq.transformer.Transformer",
    "init_args": {"model_size": 16, "num_heads": 2, "ff_size": 32, "dropout": 0.1},
}


def test_a_training_batch_reads_back_only_whether_its_loss_is_finite(
    tmp_path: Path, trained_run: dict
) -> None:
    out = tmp_path / "reads.json"
    config = tiny_config(tmp_path, trained_run["corpus"])
    config["data"]["cache_dir"] = str(trained_run["root"] / "cache")
    config["model"]["network"] = TRANSFORMER
    config["trainer"].update(max_epochs=None, max_steps=8, log_every_n_steps=50)
    config["trainer"]["callbacks"] = [
        {"class_path": f"{__name__}.HostReadAudit", "init_args": {"out": str(out)}}
    ]
    main(["fit", "--config", str(write_config(tmp_path / "fit.yaml", config))])

    # one per batch: the policy for a non-finite loss (stop, or skip the optimizer step)
    # must know before the backward pass whether the loss is finite
    assert json.loads(out.read_text()) == {"__bool__ at training/task.py:training_step": 4}
