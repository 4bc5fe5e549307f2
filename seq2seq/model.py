"""The encoder-decoder contract that every model family implements.

Shapes: B sentences, S source positions, T target positions, V target vocabulary.
Attention maps are ``[B, *heads, T, S]`` from ``forward`` and ``[B, *heads, S]`` from
``step``, where ``heads`` is ``()`` for single-head RNN attention, ``(H,)`` for
multi-head RNN attention and ``(L, H)`` (layers, heads) for the Transformer.

    memory = model.encode(src, src_lens)
    logits, attn = model(src, src_lens, tgt_in)              # teacher forcing
    state = model.start(memory)                              # for search
    logprobs, state, attn = model.step(prev_tokens, state)   # one target position
    state = state.select(beam_indices)                       # beam reordering

A state's fields that depend on the source sentence alone (encoder outputs, attention keys
and values prepared from them, source lengths) are marked ``Annotated[..., SOURCE_SIDE]``. A
search may keep them once per sentence while the other fields hold one row per decoder
row (a sentence's beams, side by side): attention given keys of G rows for queries of
G * k rows lets each key row serve k consecutive query rows (``attention/base.py``).

``need_weights=False`` (``decode``, ``forward``, ``step``) says nobody will read the
attention maps: a model may then return None for them and take a faster path; the
log-probabilities and logits are the same.

Greedy and beam search (``inference/search.py``) are written once against this contract.
"""

from __future__ import annotations

import dataclasses
import typing
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, TypeVar

from torch import Tensor, nn

from seq2seq.text.spec import VocabSpec


def select_batch(value: Any, indices: Tensor) -> Any:
    """Reorder every tensor inside ``value`` along its first (batch) axis."""
    if isinstance(value, Tensor):
        return value.index_select(0, indices)
    if isinstance(value, State):
        return value.select(indices)
    if isinstance(value, tuple | list):
        return type(value)(select_batch(v, indices) for v in value)
    if isinstance(value, dict):
        return {k: select_batch(v, indices) for k, v in value.items()}
    return value  # ints, None, flags: not per-sentence


StateT = TypeVar("StateT", bound="State")


class SourceSide:
    """The mark of a ``State`` field that depends on the source sentence alone
    (``keys: Annotated[Tensor, SOURCE_SIDE]``): a search may keep it once per sentence,
    however many decoder rows the sentence has."""


SOURCE_SIDE = SourceSide()


def source_side_fields(state: State) -> frozenset[str]:
    """The names of the fields of ``state``'s class marked ``SOURCE_SIDE`` (read once per
    class)."""
    cls = type(state)
    if cls not in _SOURCE_SIDE_FIELDS:
        hints = typing.get_type_hints(cls, include_extras=True)
        _SOURCE_SIDE_FIELDS[cls] = frozenset(
            name for name, hint in hints.items() if SOURCE_SIDE in getattr(hint, "__metadata__", ())
        )
    return _SOURCE_SIDE_FIELDS[cls]


_SOURCE_SIDE_FIELDS: dict[type, frozenset[str]] = {}


@dataclass
class State:
    """Per-sentence tensors (encoder memory, decoder state), every one batch-first."""

    def select(self: StateT, indices: Tensor) -> StateT:
        """The state of sentences ``indices`` [B'] (repeats allowed: beam expansion)."""
        changes = {
            f.name: select_batch(getattr(self, f.name), indices) for f in dataclasses.fields(self)
        }
        return dataclasses.replace(self, **changes)


@dataclass
class Memory(State):
    """The encoder's output for a batch of source sentences.

    states: [B, S, D] encoder outputs; lens: [B] valid source lengths;
    final: [B, D_final] a summary of each sentence (RNN bridge input) or None.
    """

    states: Tensor
    lens: Tensor
    final: Tensor | None = None


class EncoderDecoder(nn.Module, ABC):
    """An attentional encoder-decoder over padded batches with valid lengths."""

    def __init__(self, vocab: VocabSpec) -> None:
        super().__init__()
        self.vocab = vocab

    @abstractmethod
    def encode(self, src: Tensor, src_lens: Tensor) -> Memory:
        """src: [B, S] ids, src_lens: [B] -> Memory with states [B, S, D]."""

    @abstractmethod
    def start(self, memory: Memory) -> State:
        """The decoder state before the first target token."""

    @abstractmethod
    def step(
        self, prev_tokens: Tensor, state: State, need_weights: bool = True
    ) -> tuple[Tensor, State, Tensor | None]:
        """prev_tokens: [B] -> (log-probabilities [B, V], next state, attention [B, *heads, S]
        or None when not ``need_weights``)."""

    @abstractmethod
    def decode(
        self, memory: Memory, tgt_in: Tensor, need_weights: bool = True
    ) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing.

        tgt_in: [B, T] (BOS first) -> (logits [B, T, V], attn [B, *heads, T, S] or None
        when not ``need_weights``).
        """

    def forward(
        self, src: Tensor, src_lens: Tensor, tgt_in: Tensor, need_weights: bool = True
    ) -> tuple[Tensor, Tensor | None]:
        """src [B, S], src_lens [B], tgt_in [B, T] -> (logits [B, T, V], attn [B, *heads, T, S])."""
        return self.decode(self.encode(src, src_lens), tgt_in, need_weights)
