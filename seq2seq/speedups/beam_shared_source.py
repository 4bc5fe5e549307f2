"""A beam search that keeps each sentence's source side once, not once per beam.

Beam search reorders the decoder's rows at every step (``state.select``), but the rows it
picks for a sentence always come from that sentence's own beams, and their source side
(the fields a model marks ``SOURCE_SIDE``: attention keys and values, source lengths)
is the same for all of them. ``select_sharing_source`` is ``state.select`` that keeps
those fields once per sentence: rows ``i * k ... i * k + k - 1`` share their row ``i``,
and attention reads a sentence's ``k`` queries side by side against it (the contract of
``attention/base.py``). Only the per-row fields are copied.

The search applies it from outside the model (``inference/search.py``); the plain path
is ``state.select``, every row its own copy of the source side (``SEQ2SEQ_PLAIN=
beam_shared_source``, see ``switch``), with the same outputs up to float rounding of the
regrouped products. On a GPU the plain path runs: working out the groups reads a value
back at each reordering, a wait for the device that cost more than the copies it saves.
Its gain: docs/benchmarks/speed.md, "The source side kept once per sentence".

Shapes: N decoder rows, G sentences (source rows), k = N / G rows per sentence.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import torch
from torch import Tensor

from seq2seq.model import State, select_batch, source_side_fields

StateT = TypeVar("StateT", bound=State)


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


def _first_tensor(value: Any) -> Tensor:
    """The first tensor in ``value`` (a tensor, or lists and tuples of them)."""
    return value if isinstance(value, Tensor) else _first_tensor(value[0])


def _holds_states(value: Any) -> bool:
    return isinstance(value, State) or (
        isinstance(value, list | tuple) and any(isinstance(v, State) for v in value)
    )


def _select(value: Any, indices: Tensor, rows: int) -> Any:
    """A per-row field's value at rows ``indices``; states inside it keep their own source
    side once per sentence too (an ensemble's members)."""
    if isinstance(value, State):
        return select_sharing_source(value, indices, rows)
    if isinstance(value, list | tuple) and _holds_states(value):
        return type(value)(_select(v, indices, rows) for v in value)
    return select_batch(value, indices)


def select_sharing_source(state: StateT, indices: Tensor, rows: int) -> StateT:
    """``state.select(indices)`` for a state of ``rows`` decoder rows, with its source-side
    fields kept once per sentence where the new rows come in equal runs from one sentence
    each (beam expansion, reordering within sentences, dropping finished sentences), and
    copied per row otherwise."""
    fields = dataclasses.fields(state)
    source = [f.name for f in fields if f.name in source_side_fields(state)]
    if not source and not any(_holds_states(getattr(state, f.name)) for f in fields):
        return state.select(indices)  # nothing of the source here: the state's own select
    changes: dict[str, Any] = {}
    followed = None
    if source:
        sentences = _first_tensor(getattr(state, source[0])).size(0)
        followed, _ = follow_sentences(indices, rows // max(sentences, 1), sentences)
    for field in fields:
        value = getattr(state, field.name)
        if field.name in source:
            if followed is not None:
                changes[field.name] = select_batch(value, followed)
        else:
            changes[field.name] = _select(value, indices, rows)
    return dataclasses.replace(state, **changes)
