"""Bahdanau et al. (2015) additive attention: score(q, k) = w_v^T tanh(W_q q + W_k k)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seq2seq.attention.base import Attention
from seq2seq.masking import masked_softmax


class AdditiveAttention(Attention):
    """Additive (MLP) attention; queries and keys may differ in size.

    ``prepare`` computes W_k k once per source sentence: keys [B, S, Dk] -> [B, S, A].
    """

    def __init__(
        self, query_size: int, key_size: int, hidden_size: int = 256, dropout: float = 0.0
    ):
        super().__init__(query_size, key_size)
        self.query_proj = nn.Linear(query_size, hidden_size, bias=False)
        self.key_proj = nn.Linear(key_size, hidden_size, bias=False)
        self.energy = nn.Linear(hidden_size, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def prepare(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        return self.key_proj(keys), values

    def attend(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        valid_lens: Tensor | None,
        query_pos: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        q = self.query_proj(queries)  # [B, Tq, A]
        features = torch.tanh(q.unsqueeze(2) + keys.unsqueeze(1))  # [B, Tq, S, A]
        scores = self.energy(features).squeeze(-1)  # [B, Tq, S]
        weights = masked_softmax(scores, valid_lens)
        context = torch.bmm(self.dropout(weights), values)  # [B, Tq, Dv]
        return context, weights
