"""One run per checkpoint folder, and a log version folder of its own for every run: the
file-system half, which needs nothing of torch or Lightning (``training.run_lock`` holds the
lock for the length of a fit).

A training run holds an exclusive ``flock`` on ``.<folder name>.lock`` beside its
checkpoint folder (inside, it would make the folder look used to Lightning) while it
trains, and writes its process id and host into that file. The kernel drops the lock when
the process ends, however it ends, so a run killed with SIGKILL leaves no lock behind,
only its id in the file: the next run takes over and says so. A run that ends normally
empties the file.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import time
from pathlib import Path

from seq2seq.common.errors import Seq2SeqError

log = logging.getLogger(__name__)


class RunLockedError(Seq2SeqError):
    """Another run is training into the same checkpoint folder."""


class FolderLock:
    """An exclusive, non-blocking lock on ``folder`` (the file ``.<name>.lock`` beside it)
    naming its holder."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        absolute = self.folder.absolute()
        self.path = absolute.parent / f".{absolute.name}.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise RunLockedError naming the process that holds it."""
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "unknown process"
            os.close(fd)
            raise RunLockedError(
                f"{self.folder} is in use by another run ({holder}); wait for it to end, "
                "or train into another folder (--trainer.default_root_dir DIR)"
            ) from None
        previous = os.pread(fd, 4096, 0).decode(errors="replace").strip()
        if previous:
            log.info("taking over the lock on %s from %s, which is gone", self.folder, previous)
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        holder = f"pid {os.getpid()} on {socket.gethostname()}, started {started}"
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder.encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Empty the file (a clean end) and drop the lock; nothing if not held."""
        if self._fd is None:
            return
        os.ftruncate(self._fd, 0)
        os.close(self._fd)  # closing the descriptor drops the flock
        self._fd = None


def claim_version(logs: str | Path) -> int:
    """The next free ``version_N`` under ``logs``, created here so that no other run can
    take it (``mkdir`` either creates the folder or fails: two runs never share one)."""
    logs = Path(logs)
    logs.mkdir(parents=True, exist_ok=True)
    taken = [
        int(path.name.removeprefix("version_"))
        for path in logs.glob("version_*")
        if path.name.removeprefix("version_").isdigit()
    ]
    version = max(taken, default=-1) + 1
    while True:
        try:
            (logs / f"version_{version}").mkdir()
            return version
        except FileExistsError:
            version += 1
