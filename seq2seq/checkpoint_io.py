"""How the Trainer writes and reads checkpoints: atomically, and never running pickled code.

A checkpoint is written to a temporary file in its own folder, flushed to disk, then
renamed over the target: a process killed mid-save leaves the previous checkpoint
intact, never a truncated one. Every load goes through ``torch.load(weights_only=True)``
whatever the caller asks, so a checkpoint cannot execute code while it is read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO

from seq2seq.atomic import write_atomically
from seq2seq.checkpoint import read_checkpoint


class SafeCheckpointIO(TorchCheckpointIO):
    """Atomic saves and weights-only loads for Lightning's Trainer."""

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | Path, storage_options: Any | None = None
    ) -> None:
        if storage_options is not None:
            raise TypeError("SafeCheckpointIO writes local files and takes no storage_options")
        write_atomically(path, lambda file: torch.save(checkpoint, file))

    def load_checkpoint(
        self,
        path: str | Path,
        map_location: Callable | None = None,
        weights_only: bool | None = None,
    ) -> dict[str, Any]:
        return read_checkpoint(path)
