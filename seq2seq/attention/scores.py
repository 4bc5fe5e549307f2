"""Compatibility scores between queries and keys, shared by global and local attention.

A score does its key-side work once in ``prepare`` (per source sentence); ``forward``
scores every query against every key, and ``window`` scores each query against its own
gathered keys (local attention).

    prepare(keys [B, S, Dk]) -> prepared [B, S, P]
    forward(queries [B, Tq, Dq], prepared [B, S, P]) -> scores [B, Tq, S]
    window(queries [B, Tq, Dq], prepared [B, Tq, W, P]) -> scores [B, Tq, W]
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class Score(nn.Module):
    """Base class: the dot product of queries with prepared keys."""

    def prepare(self, keys: Tensor) -> Tensor:
        return keys

    def forward(self, queries: Tensor, keys: Tensor) -> Tensor:
        return torch.bmm(queries, keys.transpose(1, 2))

    def window(self, queries: Tensor, keys: Tensor) -> Tensor:
        return (keys @ queries.unsqueeze(-1)).squeeze(-1)


def check_same_size(query_size: int, key_size: int, score: str) -> None:
    """Scores without parameters compare queries and keys directly: their sizes must match."""
    if query_size != key_size:
        raise ValueError(
            f"the {score} score needs queries and keys of one size, got {query_size} and "
            f"{key_size}: use the general or additive score, or make the encoder's output "
            "the decoder's size (RNNSeq2Seq(encoder_output='sum'))"
        )


class DotScore(Score):
    """Luong's dot, h_t^T h_s, optionally scaled (scaled dot-product: scale = 1/sqrt(d))."""

    def __init__(self, query_size: int, key_size: int, scale: float = 1.0) -> None:
        super().__init__()
        check_same_size(query_size, key_size, "dot")
        self.scale = scale

    def prepare(self, keys: Tensor) -> Tensor:
        return keys * self.scale  # scaling the keys once scales every score


class GeneralScore(Score):
    """Luong's general, h_t^T W_a h_s: W_a h_s is computed once per sentence."""

    def __init__(self, query_size: int, key_size: int) -> None:
        super().__init__()
        self.key_proj = nn.Linear(key_size, query_size, bias=False)

    def prepare(self, keys: Tensor) -> Tensor:
        return self.key_proj(keys)


class AdditiveScore(Score):
    """Bahdanau's additive / Luong's concat, v^T tanh(W_q q + W_k k) = v^T tanh(W [q; k])."""

    def __init__(self, query_size: int, key_size: int, hidden_size: int) -> None:
        super().__init__()
        self.query_proj = nn.Linear(query_size, hidden_size, bias=False)
        self.key_proj = nn.Linear(key_size, hidden_size, bias=False)
        self.energy = nn.Linear(hidden_size, 1, bias=False)

    def prepare(self, keys: Tensor) -> Tensor:
        return self.key_proj(keys)

    def forward(self, queries: Tensor, keys: Tensor) -> Tensor:
        q = self.query_proj(queries)  # [B, Tq, A]
        return self.energy(torch.tanh(q.unsqueeze(2) + keys.unsqueeze(1))).squeeze(-1)

    def window(self, queries: Tensor, keys: Tensor) -> Tensor:
        q = self.query_proj(queries)  # [B, Tq, A]; keys [B, Tq, W, A]
        return self.energy(torch.tanh(q.unsqueeze(2) + keys)).squeeze(-1)


class DistanceScore(Score):
    """-1/2 ||q - k||^2 = q.k - |k|^2/2 - |q|^2/2, from the keys' squared norms.

    ``prepare`` appends -|k|^2/2 to every key, so one batched product gives q.k - |k|^2/2
    for queries extended with a 1; no [B, Tq, S, d] difference tensor is ever built.
    """

    def __init__(self, query_size: int, key_size: int) -> None:
        super().__init__()
        check_same_size(query_size, key_size, "distance")

    def prepare(self, keys: Tensor) -> Tensor:
        return torch.cat([keys, -0.5 * keys.pow(2).sum(-1, keepdim=True)], dim=-1)

    @staticmethod
    def _extend(queries: Tensor) -> tuple[Tensor, Tensor]:
        ones = queries.new_ones(*queries.shape[:-1], 1)
        return torch.cat([queries, ones], dim=-1), 0.5 * queries.pow(2).sum(-1, keepdim=True)

    def forward(self, queries: Tensor, keys: Tensor) -> Tensor:
        extended, half_norm = self._extend(queries)
        return super().forward(extended, keys) - half_norm

    def window(self, queries: Tensor, keys: Tensor) -> Tensor:
        extended, half_norm = self._extend(queries)
        return super().window(extended, keys) - half_norm
