"""seq2seq.allocator: glibc keeps freed blocks; training results do not change."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"

PROGRAM = """
import torch
from seq2seq.allocator import keep_freed_memory
if {keep}:
    assert keep_freed_memory()
torch.manual_seed(0)
layer = torch.nn.Linear(256, 8000)
for _ in range(3):  # 64 MB of logits, freed and allocated again every step
    layer(torch.randn(2000, 256)).logsumexp(-1).sum().backward()
print(repr(layer.weight.grad.sum().item()))
"""


@pytest.mark.skipif(not GLIBC, reason="mallopt is a glibc function")
@pytest.mark.slow  # trains in two child processes
def test_keeping_freed_memory_changes_no_result():
    """In fresh processes (mallopt affects the whole process): same gradients either way."""
    results = [
        subprocess.run(
            [sys.executable, "-c", PROGRAM.format(keep=keep)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout  # fmt: skip
        for keep in (False, True)
    ]
    assert results[0] == results[1] != ""
