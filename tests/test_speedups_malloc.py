"""seq2seq.speedups.malloc: glibc keeps freed blocks; training results do not change, and
SEQ2SEQ_PLAIN=malloc leaves glibc's defaults alone."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from seq2seq.speedups.switch import VARIABLE

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
only_glibc = pytest.mark.skipif(not GLIBC, reason="mallopt is a glibc function")

TRAINING = """
import torch
from seq2seq.speedups.malloc import keep_freed_memory
print(keep_freed_memory())
torch.manual_seed(0)
layer = torch.nn.Linear(256, 8000)
for _ in range(3):  # 35 MB of logits (glibc's defaults mmap any block over 32 MiB), freed
    layer(torch.randn(1100, 256)).logsumexp(-1).sum().backward()  # and allocated every step
print(repr(layer.weight.grad.sum().item()))
"""

# After keep_freed_memory(): glibc's malloc, free and mallinfo2 (its statistics), for the
# programs below.
WITH_MALLINFO = """
import ctypes
from seq2seq.speedups.malloc import keep_freed_memory
keep_freed_memory()
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
"""

# How glibc serves a 64 MB block after keep_freed_memory(): the mmapped blocks it adds
# (mallinfo2's hblks): none when the trick took effect, one under glibc's defaults.
LARGE_BLOCK = f"""{WITH_MALLINFO}
before = libc.mallinfo2().hblks
block = libc.malloc(64 << 20)
print(libc.mallinfo2().hblks - before)
"""

# The heap glibc keeps after 3 GiB of blocks are freed at once, in MiB: all of it when the
# trick took effect (a 2 GiB trim threshold gave 1 GiB back). The blocks are never touched,
# so they cost address space only.
FREED_AT_ONCE = f"""{WITH_MALLINFO}
blocks = [libc.malloc(64 << 20) for _ in range(48)]
held = libc.mallinfo2().arena
for block in reversed(blocks):
    libc.free(block)
print(held >> 20, libc.mallinfo2().arena >> 20)
"""


def run(program: str, plain: bool) -> list[str]:
    """The lines ``program`` prints in a fresh process (mallopt affects the whole process),
    with the trick switched off by SEQ2SEQ_PLAIN=malloc when ``plain``."""
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    if plain:
        env[VARIABLE] = "malloc"
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, env=env
    )
    return done.stdout.split()


@only_glibc
@pytest.mark.slow  # trains in two child processes
def test_keeping_freed_memory_changes_no_result():
    """The same gradients with the trick and on the plain path."""
    trick, plain = run(TRAINING, plain=False), run(TRAINING, plain=True)
    assert trick[0] == "True" and plain[0] == "False"
    assert trick[1] == plain[1]


@only_glibc
def test_the_off_switch_leaves_glibc_mapping_large_blocks():
    trick, plain = run(LARGE_BLOCK, plain=False), run(LARGE_BLOCK, plain=True)
    assert (trick, plain) == (["0"], ["1"])


@only_glibc
def test_the_heap_keeps_what_a_step_frees_however_much_it_is():
    held, kept = map(int, run(FREED_AT_ONCE, plain=False))
    assert held >= 3 * 1024 and kept == held
