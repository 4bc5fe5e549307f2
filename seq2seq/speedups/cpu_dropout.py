"""Dropout whose mask is cheap to draw on a CPU.

``torch.nn.functional.dropout`` on a CPU tensor draws one Mersenne-Twister number per
element (``bernoulli_``). On the 2-core machine this project targets that made dropout
14% of a Transformer training step. Here every 64-bit draw gives four 16-bit numbers, and
an element is kept when its number is at or above ``round(p * 2^16)`` in the unsigned
16-bit range: the drop probability is ``p`` rounded to a multiple of 1/65536, and kept
elements are scaled by the inverse of the exact keep probability, so the expectation is
unchanged. Elsewhere than on a CPU, PyTorch's own dropout runs.

Evidence: BENCHMARKS.md, "Dropout": on [2000, 1024] bf16, 5.5 ms against 16.3 ms for
``F.dropout``; with the loss backward change, 5198 against 4479 target tokens/s of a
Transformer training step (``make bench-speed``). The plain path: ``F.dropout``
(``SEQ2SEQ_PLAIN=cpu_dropout``, see ``switch``), same rate, scale and expectation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seq2seq.speedups.switch import trick_enabled

_LEVELS = 1 << 16  # each mask element is one uniform 16-bit number
_INT16_MIN = -(1 << 15)


def dropout_threshold(p: float) -> int:
    """The signed 16-bit cut: an element is kept when its number is >= it."""
    return _INT16_MIN + round(p * _LEVELS)


def keep_mask(shape: torch.Size, device: torch.device, threshold: int) -> Tensor:
    """A boolean mask of ``shape``: True where an element's 16-bit number is >= ``threshold``
    (``dropout_threshold(p)``), that is with probability ~1 - p."""
    n = shape.numel()
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device)
    words.random_(-(1 << 63), (1 << 63) - 1)  # 64 random bits per word (one value aside)
    numbers = words.view(torch.int16)[:n].view(shape)  # 4 uniform 16-bit numbers per word
    return numbers >= threshold


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Zero each element of ``x`` with probability p and scale the rest; identity when
    not training or p == 0. Same shape and dtype as ``x``."""
    if not training or p == 0.0:
        return x
    if not trick_enabled("cpu_dropout", x.device.type):
        return F.dropout(x, p, training)
    threshold = dropout_threshold(p)
    keep_probability = 1.0 - (threshold - _INT16_MIN) / _LEVELS
    if keep_probability == 0.0:  # p within 1/131072 of 1 (or 1): everything is dropped
        return x * 0.0
    return torch.where(keep_mask(x.shape, x.device, threshold), x * (1.0 / keep_probability), 0.0)


class Dropout(nn.Module):
    """``torch.nn.Dropout`` with the cheap CPU mask above (or ``F.dropout``, switched off)."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
