"""Decoder states that keep the source side once per sentence, not once per beam.

Beam search reorders the decoder's rows at every step (``state.select``), but the rows it
picks for a sentence always come from that sentence's own beams, and their source side
(attention keys and values, source lengths) is the same for all of them. A
``SharedSourceState`` stores that source side once per sentence: rows
``i * group ... i * group + group - 1`` share its row ``i``. Selecting rows then copies
only the per-row fields, and attention reads a sentence's ``group`` queries side by side
against its one source row (``group_queries`` / ``ungroup_weights``).

Evidence: BENCHMARKS.md, "The source side kept once per sentence": beam 5 on test_2016,
104.8 and 109.4 against 81.3 and 86.3 sentences/s (Transformer, fp32), peak memory 1.01
against 1.25 GB; the RNNs 160-172 against 112-120 sentences/s. The plain path: every row
its own copy of the source side, ``group`` always 1 (``SEQ2SEQ_PLAIN=beam_shared_source``,
see ``switch``); the same outputs up to float rounding of the regrouped products. On a
GPU the plain path runs: working out the groups reads a value back at each reordering, a
wait for the device that cost more than the copies it saves (docs/benchmarks/gpu.md).

Shapes: N decoder rows, G = N / group sentences, T queries per row, S source positions.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, TypeVar

import torch
from torch import Tensor

from seq2seq.model import State, select_batch
from seq2seq.speedups.switch import trick_enabled

SharedT = TypeVar("SharedT", bound="SharedSourceState")


def follow_sentences(indices: Tensor, group: int, sentences: int) -> tuple[Tensor | None, int]:
    """Where rows ``indices`` [N'] of a state with ``group`` rows per sentence (of
    ``sentences``) take their source side from.

    Returns (sentence of each new group [N' / group'], or None when that is every
    sentence in order, unchanged; group'). When the new rows come in runs of one length
    from one sentence each (beam expansion, reordering within sentences, dropping finished
    sentences) group' is that length; otherwise every row gets its own source row.
    """
    of_row = torch.div(indices, group, rounding_mode="floor")  # [N']
    N = of_row.numel()
    if not N:
        return (None if not sentences else of_row), 1
    # Computed on the device and read in one go (a GPU waits once): the length of the
    # first run of one sentence; whether every run has that length (a new run starts
    # exactly at each multiple of it); whether the runs are sentences 0, 1, ... in order.
    position = torch.arange(N, device=of_row.device)
    starts = of_row[1:] != of_row[:-1]  # [N' - 1]: a new run starts at position + 1
    first = torch.cat([starts, starts.new_ones(1)]).int().argmax() + 1  # N: a single run
    even = (starts == (position[1:] % first == 0)).all() & (N % first == 0)
    in_order = (of_row == position // first).all() & (first * sentences == N)
    length, is_even, is_in_order = torch.stack([first, even.long(), in_order.long()]).tolist()
    if not is_even:
        return of_row, 1
    return (None if is_in_order else of_row[::length]), length


class SharedSourceState(State):
    """A ``State`` dataclass whose fields named in ``per_sentence`` hold one row per
    sentence, among them ``src_lens`` [G]; every other field holds one row per decoder
    row; ``group`` is the number of decoder rows per sentence."""

    per_sentence: ClassVar[frozenset[str]]
    src_lens: Tensor
    group: int

    def select(self: SharedT, indices: Tensor) -> SharedT:
        if trick_enabled("beam_shared_source", self.src_lens.device.type):
            followed, group = follow_sentences(indices, self.group, self.src_lens.numel())
        else:  # the plain path: every row gets its own copy of its sentence's source side
            followed, group = torch.div(indices, self.group, rounding_mode="floor"), 1
        changes = {}
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, field.name)
            if field.name not in self.per_sentence:
                changes[field.name] = select_batch(value, indices)
            elif followed is not None:
                changes[field.name] = select_batch(value, followed)
        changes["group"] = group
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


def group_queries(queries: Tensor, group: int) -> Tensor:
    """[N, T, ...] -> [G, group * T, ...]: each sentence's rows side by side."""
    return queries.reshape(queries.size(0) // group, group * queries.size(1), *queries.shape[2:])


def ungroup_weights(weights: Tensor, group: int) -> Tensor:
    """Attention weights [G, *heads, group * T, S] -> [N, *heads, T, S]."""
    G, *heads, grouped, S = weights.shape
    per_row = weights.reshape(G, *heads, group, grouped // group, S).movedim(-3, 1)
    return per_row.reshape(G * group, *heads, grouped // group, S)
