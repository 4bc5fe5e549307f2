"""How the Trainer writes and reads checkpoints: atomically, and never running pickled code.

A checkpoint is written to a temporary file in its own folder, flushed to disk, then
renamed over the target: a process killed mid-save leaves the previous checkpoint
intact, never a truncated one, and a full disk is one line naming the checkpoint. The
first save into a folder removes the temporary files that killed runs left there. Every
load goes through ``torch.load(weights_only=True)`` whatever the caller asks, so a
checkpoint cannot execute code while it is read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO

from seq2seq.atomic import remove_stale_temps, write_atomically
from seq2seq.checkpoint import read_checkpoint


class SafeCheckpointIO(TorchCheckpointIO):
    """Atomic saves and weights-only loads for Lightning's Trainer."""

    def __init__(self) -> None:
        super().__init__()
        self._cleaned: set[Path] = set()  # folders whose stale temporary files are gone

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | Path, storage_options: Any | None = None
    ) -> None:
        if storage_options is not None:
            raise TypeError("SafeCheckpointIO writes local files and takes no storage_options")
        folder = Path(path).parent
        if folder not in self._cleaned:
            remove_stale_temps(folder, lambda name: name.endswith(".ckpt"))
            self._cleaned.add(folder)
        write_atomically(path, lambda file: torch.save(checkpoint, file))

    def load_checkpoint(
        self,
        path: str | Path,
        map_location: Callable | None = None,
        weights_only: bool | None = None,
    ) -> dict[str, Any]:
        return read_checkpoint(path)
