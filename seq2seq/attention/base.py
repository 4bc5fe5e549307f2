"""The call every attention module shares.

    context, weights = attention(queries, keys, values, valid_lens, query_pos=None)
    # queries [B, Tq, Dq]  keys [B, S, Dk]  values [B, S, Dv]  valid_lens [B] or [B, Tq]
    # context [B, Tq, Dc]  weights [B, Tq, S]  (multi-head: [B, H, Tq, S])
    # query_pos [B, Tq]: the target positions of the queries (local-m centres on them)
    # need_weights=False: nobody reads the weights; a module may return None for them

Work that depends only on the keys and values is split out into ``prepare``, so that a
decoder does it once per source sentence (in ``start``) and then calls the module at
every step with the prepared tensors and ``prepared=True``. ``forward`` is
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
from seq2seq.speedups.cpu_dropout import Dropout


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
        return self.attend(queries, keys, values, valid_lens, query_pos, need_weights)


class SoftmaxAttention(Attention):
    """A softmax of ``scores`` over every valid key, with dropout on the weights; the
    context is the weighted values. Subclasses give ``scores``.

    Args:
        query_size, key_size: As in ``Attention``.
        dropout: Dropout on the attention weights.
    """

    def __init__(self, query_size: int, key_size: int, dropout: float = 0.0) -> None:
        super().__init__(query_size, key_size)
        self.dropout = Dropout(dropout)

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
