"""Bahdanau et al. (2015) additive attention: score(q, k) = w_v^T tanh(W_q q + W_k k)."""

from __future__ import annotations

from seq2seq.attention.base import GlobalAttention
from seq2seq.attention.scores import AdditiveScore


class AdditiveAttention(GlobalAttention):
    """Additive (MLP) attention over all valid keys; queries and keys may differ in size.

    W_k k is computed once per source sentence (``prepare``), W_q q once per query.

    Args:
        query_size, key_size: As in ``Attention``.
        hidden_size: Size of the hidden layer W_q q + W_k k that w_v scores.
        dropout: As in ``SoftmaxAttention``.
    """

    def __init__(
        self, query_size: int, key_size: int, hidden_size: int = 256, dropout: float = 0.0
    ) -> None:
        super().__init__(
            query_size, key_size, AdditiveScore(query_size, key_size, hidden_size), dropout
        )
