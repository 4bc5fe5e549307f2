"""Recording where local attention put its window, for drawing it over a heatmap.

Luong's local attention (``seq2seq.attention.LocalAttention``) looks at a window around a
centre ``p_t``: the target position for local-m, a prediction from the decoder state for
local-p. The attention contract returns the weights only, and an attention module must
not keep state between calls, so ``p_t`` is not part of any output. It is wanted only to
inspect a model, so ``LocalWindowProbe`` gets it from outside: while the probe is active
it replaces the ``attend`` method of one ``LocalAttention`` *instance* with a wrapper that
calls the real method unchanged and then asks the module's own public ``centres`` and
``window_positions`` for the centre and window of the same queries. Leaving the probe
restores the instance; the class, every other instance and the outputs are untouched,
and a model that nobody inspects pays nothing.

Shapes: B sentences, T target positions, Tq queries per call.
"""

from __future__ import annotations

from types import TracebackType

import torch
from torch import Tensor, nn

from seq2seq.attention import LocalAttention


def find_local_attention(model: nn.Module) -> LocalAttention | None:
    """The model's local attention module, or None; more than one is an error."""
    found = [m for m in model.modules() if isinstance(m, LocalAttention)]
    if len(found) > 1:
        raise ValueError(f"the model has {len(found)} local attention modules; expected one")
    return found[0] if found else None


class LocalWindowProbe:
    """Records the window centres and bounds of one ``LocalAttention`` over a forward pass.

    Use around a single teacher-forced call, whose decoder calls ``attend`` once per target
    position (or once for all of them) on the same batch::

        with LocalWindowProbe(attention) as probe:
            model(src, src_lens, tgt_in)
        centres, windows = probe.result()  # [B, T], [B, T, 2]
    """

    def __init__(self, attention: LocalAttention) -> None:
        self.attention = attention
        self._centres: list[Tensor] = []
        self._windows: list[Tensor] = []

    def _attend(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        valid_lens: Tensor | None,
        query_pos: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """The real ``attend``, then its centres [B, Tq] and windows [B, Tq, 2] recorded."""
        output = type(self.attention).attend(
            self.attention, queries, keys, values, valid_lens, query_pos
        )
        B, S = queries.size(0), keys.size(1)
        lengths = valid_lens if valid_lens is not None else torch.full((B,), S, device=keys.device)
        with torch.no_grad():
            centres = self.attention.centres(queries, lengths, query_pos)
            positions, inside = self.attention.window_positions(centres, lengths)
        first = positions.masked_fill(~inside, S).min(dim=-1).values
        last = positions.masked_fill(~inside, -1).max(dim=-1).values
        self._centres.append(centres.float().cpu())
        self._windows.append(torch.stack([first, last], dim=-1).cpu())
        return output

    def __enter__(self) -> LocalWindowProbe:
        self._centres.clear()
        self._windows.clear()
        self.attention.attend = self._attend  # an instance attribute shadows the method
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        del self.attention.attend

    def result(self) -> tuple[Tensor, Tensor]:
        """(centres p_t [B, T] float, windows [B, T, 2] the first and last position inside)."""
        if not self._centres:
            raise RuntimeError("the local attention was not called while the probe was active")
        return torch.cat(self._centres, dim=1), torch.cat(self._windows, dim=1)
