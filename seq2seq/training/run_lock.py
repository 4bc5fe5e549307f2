"""The checkpoint folder's lock (``common.folder_lock``) held from the start of a fit to its
end, however it ends. Under DDP only global rank 0 takes the lock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytorch_lightning import Callback, LightningModule, Trainer

from seq2seq.common.folder_lock import FolderLock


class RunLock(Callback):
    """Holds a FolderLock on the checkpoint folder from ``acquire`` to the end of ``fit``."""

    def __init__(self) -> None:
        self.lock: FolderLock | None = None

    def acquire(self, folder: str | Path) -> None:
        self.lock = FolderLock(folder)
        self.lock.acquire()

    def release(self) -> None:
        if self.lock is not None:
            self.lock.release()

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self.release()

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: Any) -> None:
        self.release()
