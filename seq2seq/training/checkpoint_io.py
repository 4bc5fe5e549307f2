"""How the Trainer writes and reads checkpoints: through ``seq2seq.inference.checkpoint``.

Lightning's Trainer saves and loads through a ``CheckpointIO`` plugin; this one hands both
to the toolkit's own checkpoint functions, so that the Trainer's checkpoints are written
as ``seq2seq average`` writes its own: atomically (to a temporary file in the same folder,
flushed, then renamed over the target; a full disk is one line naming the checkpoint), and
always read with ``torch.load(weights_only=True)``, whatever the caller asks, so that a
checkpoint cannot execute code while it is read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO

from seq2seq.inference.checkpoint import read_checkpoint, save_checkpoint


class SafeCheckpointIO(TorchCheckpointIO):
    """Atomic saves and weights-only loads for Lightning's Trainer."""

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | Path, storage_options: Any | None = None
    ) -> None:
        if storage_options is not None:
            raise TypeError("SafeCheckpointIO writes local files and takes no storage_options")
        save_checkpoint(checkpoint, path)

    def load_checkpoint(
        self,
        path: str | Path,
        map_location: Callable | None = None,
        weights_only: bool | None = None,
    ) -> dict[str, Any]:
        return read_checkpoint(path)
