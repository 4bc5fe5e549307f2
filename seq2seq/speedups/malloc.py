"""Keep freed CPU memory inside the process instead of handing it back to the kernel.

glibc's malloc serves large blocks (above 32 MiB at most, a dynamic threshold) with
``mmap`` and returns them with ``munmap`` when freed, and trims the heap top back to the
kernel once more than a threshold of it is free. A training step frees and reallocates the
same large tensors (logits, attention scores, gradients) every time, so each step pays
again for the kernel to map and zero those pages. ``keep_freed_memory`` makes malloc take
every block from its heap and never trim it, so the pages are reused: the process's peak
memory is unchanged (it is reached on every step anyway), only the mapping churn goes away.

Its gain: docs/benchmarks/speed.md, "Keeping freed memory" (bit-identical results). The
plain path: glibc's defaults, untouched (``SEQ2SEQ_PLAIN=malloc``, see ``switch``).
"""

from __future__ import annotations

import ctypes
import sys

from seq2seq.speedups.switch import trick_enabled

# mallopt parameters, from glibc's malloc.h
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4


def keep_freed_memory(device_type: str = "cpu") -> bool:
    """Tell glibc not to mmap blocks nor trim the heap, for a process that computes on a
    device of ``device_type``; False where that is not possible (not Linux, or a C library
    without ``mallopt``, e.g. musl), switched off, or the device is not the CPU."""
    if not trick_enabled("malloc", device_type) or not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    no_mmap = mallopt(M_MMAP_MAX, 0) == 1
    # -1 turns trimming off (mallopt(3)); the largest positive int, 2 GiB, did not: what a
    # step freed beyond 2 GiB at once went back to the kernel, to be faulted in again.
    no_trim = mallopt(M_TRIM_THRESHOLD, -1) == 1
    return no_mmap and no_trim
