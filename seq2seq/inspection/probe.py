"""Recording where local attention put its window, for drawing it over a heatmap.

Luong's local attention (``seq2seq.attention.LocalAttention``) looks at a window around a
centre ``p_t``: the target position for local-m, a prediction from the decoder state for
local-p. The attention contract returns the weights only, and an attention module must
not keep state between calls, so ``p_t`` is not part of any output. It is wanted only to
inspect a model, so ``LocalWindowProbe`` gets it from outside: while the probe is active,
a forward hook on the ``LocalAttention`` module (decoders call their attention as a
module, so the hook sees every call) asks the module's own public ``centres`` and
``window_positions`` for the centre and window of the queries it was called with. Leaving
the probe removes the hook; the outputs are untouched, and a model that nobody inspects
pays nothing.

Shapes: B sentences, T target positions, Tq queries per call.
"""

from __future__ import annotations

import inspect
from types import TracebackType
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from seq2seq.attention import LocalAttention


def find_local_attention(model: nn.Module) -> LocalAttention | None:
    """The model's local attention module, or None; more than one is an error."""
    found = [m for m in model.modules() if isinstance(m, LocalAttention)]
    if len(found) > 1:
        raise ValueError(f"the model has {len(found)} local attention modules; expected one")
    return found[0] if found else None


class LocalWindowProbe:
    """Records the window centres and bounds of one ``LocalAttention`` over a forward pass.

    Use around a single teacher-forced call, whose decoder calls the attention once per
    target position (or once for all of them) on the same batch::

        with LocalWindowProbe(attention) as probe:
            model(src, src_lens, tgt_in)
        centres, windows = probe.result()  # [B, T], [B, T, 2]
    """

    def __init__(self, attention: LocalAttention) -> None:
        self.attention = attention
        self._centres: list[Tensor] = []
        self._windows: list[Tensor] = []
        self._hook: RemovableHandle | None = None

    def _record(
        self,
        module: LocalAttention,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        output: tuple[Tensor, Tensor],
    ) -> None:
        """A forward hook: the centres [B, Tq] and windows [B, Tq, 2] of the call's queries."""
        call = inspect.signature(module.forward).bind(*args, **kwargs)
        call.apply_defaults()
        queries, keys = call.arguments["queries"], call.arguments["keys"]
        valid_lens, query_pos = call.arguments["valid_lens"], call.arguments["query_pos"]
        B, S = queries.size(0), keys.size(1)
        lengths = valid_lens if valid_lens is not None else torch.full((B,), S, device=keys.device)
        with torch.no_grad():
            centres = module.centres(queries, lengths, query_pos)
            positions, inside = module.window_positions(centres, lengths)
        first = positions.masked_fill(~inside, S).min(dim=-1).values
        last = positions.masked_fill(~inside, -1).max(dim=-1).values
        self._centres.append(centres.float().cpu())
        self._windows.append(torch.stack([first, last], dim=-1).cpu())

    def __enter__(self) -> LocalWindowProbe:
        self._centres.clear()
        self._windows.clear()
        self._hook = self.attention.register_forward_hook(self._record, with_kwargs=True)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def result(self) -> tuple[Tensor, Tensor]:
        """(centres p_t [B, T] float, windows [B, T, 2] the first and last position inside)."""
        if not self._centres:
            raise RuntimeError("the local attention was not called while the probe was active")
        return torch.cat(self._centres, dim=1), torch.cat(self._windows, dim=1)
