"""The products of ``nn.Linear`` at inference run in oneDNN, each weight reordered once.

PyTorch computes a float32 ``nn.Linear`` on the CPU with MKL's sgemm. The oneDNN library
that PyTorch bundles (and that CTranslate2 uses on AMD processors) runs the same products
faster at the shapes of a search, once the weight is reordered into oneDNN's layout. A
primitive for a new row count is cheap once the first has been built, so the search's
changing row counts are fine.

``onednn_linears(model)`` is a context manager: inside it, every ``nn.Linear`` of
``model`` called without autograd on a float32 CPU tensor outside autocast computes
through ``torch.ops.mkldnn._linear_pointwise`` with its weight reordered once (kept while
the weight is unchanged: its version counter and storage); any other call takes its plain
forward. Its gain: docs/benchmarks/speed.md, "Measurements behind choices in the code".
The plain path: MKL's sgemm
(``SEQ2SEQ_PLAIN=onednn_linear``, see ``switch``); the same outputs up to float rounding
of the products.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seq2seq.speedups.switch import trick_enabled

# layer -> (its weight's version counter and data pointer, the weight in oneDNN's layout)
_Packed = tuple[int, int, Tensor]
_packed: weakref.WeakKeyDictionary[nn.Linear, _Packed] = weakref.WeakKeyDictionary()


def available() -> bool:
    """Whether this PyTorch has oneDNN's linear (CPU builds with MKL-DNN on x86 and ARM)."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def packed_weight(layer: nn.Linear) -> Tensor:
    """``layer.weight`` [out, in] reordered into oneDNN's layout, reordered again only when
    it has changed since (an optimizer step bumps its version, loading replaces it)."""
    weight = layer.weight
    key = (weight._version, weight.data_ptr())
    cached = _packed.get(layer)
    if cached is None or cached[:2] != key:
        cached = (*key, torch.ops.mkldnn._reorder_linear_weight(weight.detach(), None))
        _packed[layer] = cached
    return cached[2]


def linear(layer: nn.Linear, x: Tensor) -> Tensor:
    """``layer(x)``: x [..., in] -> [..., out], through oneDNN when the call needs no
    autograd and is float32 on the CPU outside autocast, else ``layer``'s plain product."""
    weight, bias = layer.weight, layer.bias
    if (
        torch.is_grad_enabled()
        or torch.is_autocast_enabled("cpu")
        or x.dtype != torch.float32
        or weight.dtype != torch.float32
        or x.device.type != "cpu"
        or x.numel() == 0
    ):
        return F.linear(x, weight, bias)
    rows = x.reshape(-1, x.shape[-1]).contiguous()  # [N, in]
    out = torch.ops.mkldnn._linear_pointwise(rows, packed_weight(layer), bias, "none", [None], "")
    return out.view(*x.shape[:-1], weight.shape[0])


# model -> (how many blocks are open on it: threads of a server, nested calls; the layers
# the first one switched); guarded by _lock
_open: weakref.WeakKeyDictionary[nn.Module, tuple[int, list[nn.Linear]]] = (
    weakref.WeakKeyDictionary()
)
_lock = threading.Lock()


def device_type(model: nn.Module) -> str:
    """Where ``model`` computes: its first parameter's device type ("cpu" without any)."""
    first = next(model.parameters(), None)
    return "cpu" if first is None else first.device.type


@contextmanager
def onednn_linears(model: nn.Module) -> Iterator[None]:
    """Inside the block, ``model``'s ``nn.Linear`` layers compute through ``linear``;
    nothing changes where the trick is off, the model is not on the CPU (a GPU) or this
    PyTorch has no oneDNN. Blocks on one model may overlap (several threads, nesting): the
    layers are switched when the first opens and back when the last closes."""
    if not trick_enabled("onednn_linear", device_type(model)) or not available():
        yield
        return
    with _lock:
        if model in _open:
            count, layers = _open[model]
        else:
            linears = (m for m in model.modules() if type(m) is nn.Linear)
            count, layers = 0, [m for m in linears if "forward" not in vars(m)]  # not switched
            for layer in layers:
                layer.forward = functools.partial(linear, layer)  # type: ignore[method-assign]
        _open[model] = (count + 1, layers)
    try:
        yield
    finally:
        with _lock:
            count, layers = _open.pop(model)
            if count > 1:
                _open[model] = (count - 1, layers)
            else:
                for layer in layers:
                    del layer.forward
