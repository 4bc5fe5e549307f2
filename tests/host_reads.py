"""What a piece of seq2seq reads back from its tensors to the host, counted by site.

On a GPU, every value read back to the host (``.item()``, ``int(t)``, ``bool(t)``,
``.tolist()``, ``nonzero``, ...) makes the host wait until the GPU has run everything queued
before it. A CPU has no such wait, but the reads are the same calls: a TorchFunctionMode
sees each of them, and the innermost frame of seq2seq's own code (the command line left
out) that led to it names the place.
"""

from __future__ import annotations

import traceback
from collections import Counter
from pathlib import Path

from torch.overrides import TorchFunctionMode

READS = {"item", "tolist", "numpy", "cpu", "nonzero", "__bool__", "__int__", "__float__"}
PACKAGE = Path(__file__).resolve().parents[1] / "seq2seq"
ENTRY_POINT = PACKAGE / "commands"  # on every stack: the `seq2seq fit` that runs Lightning


def reading_site() -> str | None:
    """``training/task.py:training_step`` for the innermost frame of seq2seq below the entry
    point on the current stack, None where there is none (a read of Lightning's own)."""
    for frame in reversed(traceback.extract_stack()):
        path = Path(frame.filename)
        if path.is_relative_to(PACKAGE) and not path.is_relative_to(ENTRY_POINT):
            return f"{path.relative_to(PACKAGE)}:{frame.name}"
    return None


class HostReads(TorchFunctionMode):
    """Counts the operations on tensors that read a value back to the host, by site."""

    def __init__(self) -> None:
        super().__init__()
        self.sites: Counter[str] = Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        if getattr(func, "__name__", "") in READS and (site := reading_site()):
            self.sites[f"{func.__name__} at {site}"] += 1
        return func(*args, **(kwargs or {}))
