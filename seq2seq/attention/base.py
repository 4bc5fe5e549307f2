"""The call every attention module shares.

    context, weights = attention(queries, keys, values, valid_lens, query_pos=None)
    # queries [B, Tq, Dq]  keys [B, S, Dk]  values [B, S, Dv]  valid_lens [B] or [B, Tq]
    # context [B, Tq, Dc]  weights [B, Tq, S]  (multi-head: [B, H, Tq, S])
    # query_pos [B, Tq]: the target positions of the queries (local-m centers on them)
    # need_weights=False: nobody reads the weights; a module may return None for them

Work that depends only on the keys and values is split out into ``prepare``, so that a
decoder does it once per source sentence (in ``start``) and then calls the module at
every step with the prepared tensors and ``prepared=True``. Keys, values and
``valid_lens [G]`` may have fewer rows than the queries (G and B = G * k): each key row
then serves k consecutive query rows (a sentence's beams in a search that keeps the source
side once per sentence), and the module sees a sentence's queries side by side. ``forward`` is
``attend(prepare(...))``. Decoders always call the module, never ``attend`` directly, so
forward hooks see every call (attention inspection relies on it). Weights are returned,
never stored on the module.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import Tensor, nn

from seq2seq.attention.scores import Score
from seq2seq.masking import masked_softmax


class Attention(nn.Module, ABC):
    """Base class. Subclasses take ``(query_size, key_size, ...)`` as their first arguments,
    so a config can name one and the decoder fills in the sizes it knows.

    Args:
        query_size: Size Dq of the queries (the decoder fills it in: its state size).
        key_size: Size Dk of the keys (the decoder fills it in: the encoder's output size).
    """

    def __init__(self, query_size: int, key_size: int) -> None:
        super().__init__()
        self.query_size = query_size
        self.key_size = key_size

    def context_size(self, value_size: int) -> int:
        """Size Dc of the context vectors given values of size Dv."""
        return value_size

    def prepare(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Per-sentence work on keys [B, S, Dk] and values [B, S, Dv]; identity by default."""
        return keys, values

    @abstractmethod
    def attend(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        valid_lens: Tensor | None,
        query_pos: Tensor | None = None,
        need_weights: bool = True,
    ) -> tuple[Tensor, Tensor | None]:
        """Attention with keys and values already passed through ``prepare``."""

    def forward(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        valid_lens: Tensor | None,
        query_pos: Tensor | None = None,
        prepared: bool = False,
        need_weights: bool = True,
    ) -> tuple[Tensor, Tensor | None]:
        """``attend`` after ``prepare``; ``prepared``: keys and values already went through it;
        ``need_weights=False``: nobody reads the weights, so a module may return None for
        them and take a faster path (``MultiHeadAttention``)."""
        if not prepared:
            keys, values = self.prepare(keys, values)
        group = queries.size(0) // max(keys.size(0), 1)  # query rows per key row
        if group <= 1:
            return self.attend(queries, keys, values, valid_lens, query_pos, need_weights)
        positions = None if query_pos is None else grouped(query_pos, group)
        context, weights = self.attend(
            grouped(queries, group), keys, values, valid_lens, positions, need_weights
        )  # [G, k * Tq, Dc], [G, *heads, k * Tq, S]
        context = context.reshape(queries.size(0), queries.size(1), -1)  # [B, Tq, Dc]
        return context, None if weights is None else ungrouped_weights(weights, group)


def grouped(rows: Tensor, group: int) -> Tensor:
    """[B, Tq, ...] -> [B / group, group * Tq, ...]: each key row's query rows side by side."""
    return rows.reshape(rows.size(0) // group, group * rows.size(1), *rows.shape[2:])


def ungrouped_weights(weights: Tensor, group: int) -> Tensor:
    """Attention weights [G, *heads, group * Tq, S] -> [G * group, *heads, Tq, S]."""
    G, *heads, grouped_queries, S = weights.shape
    per_row = weights.reshape(G, *heads, group, grouped_queries // group, S).movedim(-3, 1)
    return per_row.reshape(G * group, *heads, grouped_queries // group, S)


class SoftmaxAttention(Attention):
    """A softmax of ``scores`` over every valid key, with dropout on the weights; the
    context is the weighted values. Subclasses give ``scores``.

    Args:
        query_size, key_size: As in ``Attention``.
        dropout: Dropout on the attention weights.
    """

    def __init__(self, query_size: int, key_size: int, dropout: float = 0.0) -> None:
        super().__init__(query_size, key_size)
        self.dropout = nn.Dropout(dropout)

    @abstractmethod
    def scores(self, queries: Tensor, keys: Tensor) -> Tensor:
        """queries [B, Tq, Dq], prepared keys [B, S, P] -> scores [B, Tq, S]."""

    def attend(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        valid_lens: Tensor | None,
        query_pos: Tensor | None = None,
        need_weights: bool = True,
    ) -> tuple[Tensor, Tensor]:
        weights = masked_softmax(self.scores(queries, keys), valid_lens)  # [B, Tq, S]
        return torch.bmm(self.dropout(weights), values), weights


class GlobalAttention(SoftmaxAttention):
    """Softmax of a ``Score`` over every valid key; the context is the weighted values.

    Args:
        query_size, key_size: As in ``Attention``.
        score: The compatibility score of a query and a key (see ``seq2seq.attention.scores``).
        dropout: As in ``SoftmaxAttention``.
    """

    def __init__(self, query_size: int, key_size: int, score: Score, dropout: float = 0.0):
        super().__init__(query_size, key_size, dropout)
        self.score = score

    def prepare(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        return self.score.prepare(keys), values

    def scores(self, queries: Tensor, keys: Tensor) -> Tensor:
        return self.score(queries, keys)
