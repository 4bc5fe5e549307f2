"""Checkpoint averaging: the element-wise mean of the weights of several checkpoints.

Averaging the last few checkpoints of a run usually scores a little higher than any of
them (Vaswani et al., 2017, average the last 5 or 20). The result keeps the vocabulary
and config of the checkpoints (which must agree) and drops optimizer state, so it is a
checkpoint to translate with, not to resume from.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from seq2seq.checkpoint import read_checkpoint
from seq2seq.checkpoint_io import SafeCheckpointIO
from seq2seq.errors import CheckpointError
from seq2seq.task import CHECKPOINT_KEY


def average_checkpoints(paths: Sequence[str | Path]) -> dict[str, Any]:
    """A checkpoint whose floating-point weights are the mean over ``paths``."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    first = read_checkpoint(paths[0])
    total = {k: v.double() if v.is_floating_point() else v for k, v in first["state_dict"].items()}
    for path in paths[1:]:
        checkpoint = read_checkpoint(path)
        if checkpoint[CHECKPOINT_KEY]["vocab"] != first[CHECKPOINT_KEY]["vocab"]:
            raise CheckpointError(f"{path} has another vocabulary than {paths[0]}")
        weights = checkpoint["state_dict"]
        if weights.keys() != total.keys():
            raise CheckpointError(f"{path} holds other weights than {paths[0]}")
        for key, value in weights.items():
            if value.is_floating_point():
                total[key] += value.double()
    state_dict = {
        key: (value / len(paths)).to(first["state_dict"][key].dtype)
        if value.is_floating_point()
        else value
        for key, value in total.items()
    }
    return {
        "state_dict": state_dict,
        CHECKPOINT_KEY: {**first[CHECKPOINT_KEY], "averaged_from": [str(p) for p in paths]},
        "epoch": first.get("epoch"),
        "global_step": first.get("global_step"),
    }


def save_atomically(checkpoint: dict[str, Any], path: str | Path) -> Path:
    """Write ``checkpoint`` to ``path`` as the Trainer does (``SafeCheckpointIO``): atomically."""
    SafeCheckpointIO().save_checkpoint(checkpoint, path)
    return Path(path)
