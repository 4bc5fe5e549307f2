"""Dropout whose mask is cheap to draw on a CPU.

``torch.nn.functional.dropout`` on a CPU tensor draws one Mersenne-Twister number per
element (``bernoulli_``), a large share of a Transformer training step on a small CPU.
Here every 64-bit draw gives four 16-bit numbers, and
an element is kept when its number is at or above ``round(p * 2^16)`` in the unsigned
16-bit range: the drop probability is ``p`` rounded to a multiple of 1/65536, and kept
elements are scaled by the inverse of the exact keep probability, so the expectation is
unchanged. Elsewhere than on a CPU, PyTorch's own dropout runs.

The models use ``torch.nn.Dropout``; the training task applies the trick from outside,
``cpu_dropouts(model)`` putting ``CPUDropout`` in their place. The plain path:
``F.dropout`` (``SEQ2SEQ_PLAIN=cpu_dropout``, see ``switch``), same rate, scale and
expectation. Its gain: docs/benchmarks/speed.md, "Dropout".
"""

from __future__ import annotations

from typing import TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seq2seq.speedups.switch import trick_enabled

ModuleT = TypeVar("ModuleT", bound=nn.Module)

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


class CPUDropout(nn.Dropout):
    """``torch.nn.Dropout`` with the cheap CPU mask above (or ``F.dropout``: off the CPU, or
    switched off)."""

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)


def cpu_dropouts(model: ModuleT) -> ModuleT:
    """``model`` with each of its ``torch.nn.Dropout`` modules replaced by a ``CPUDropout``
    of the same rate, in place (dropout has no weights: the state dict is unchanged)."""
    for module in list(model.modules()):
        for name, child in module.named_children():
            if type(child) is nn.Dropout:
                setattr(module, name, CPUDropout(child.p))
    return model
