"""Scaled dot-product, multi-head and distance-based attention.

Shapes: B batch, H heads, Tq queries, S keys, d model size, dh = d / H per head.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from seq2seq.attention.base import Attention, GlobalAttention
from seq2seq.attention.scores import DistanceScore, DotScore
from seq2seq.masking import key_mask, masked_softmax

# SDPA's kernels but cuDNN's, which builds an execution plan for every new shape: with
# batches of varying lengths nearly every step is one (docs/benchmarks/gpu.md).
VARIABLE_SHAPE_BACKENDS = [
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
    SDPBackend.MATH,
]


class ScaledDotProductAttention(GlobalAttention):
    """softmax(q k^T / sqrt(d)) v with dropout on the weights (Vaswani et al., 2017).

    Args:
        query_size, key_size: As in ``Attention``; queries and keys must be of one size.
        dropout: As in ``SoftmaxAttention``.
    """

    def __init__(self, query_size: int, key_size: int, dropout: float = 0.0) -> None:
        score = DotScore(query_size, key_size, scale=1.0 / math.sqrt(key_size))
        super().__init__(query_size, key_size, score, dropout)


class DistanceAttention(GlobalAttention):
    """softmax(-||q - k||^2 / 2) v: keys close to the query get the weight.

    Args:
        query_size, key_size: As in ``Attention``; queries and keys must be of one size.
        dropout: As in ``SoftmaxAttention``.
    """

    def __init__(self, query_size: int, key_size: int, dropout: float = 0.0) -> None:
        super().__init__(query_size, key_size, DistanceScore(query_size, key_size), dropout)


class MultiHeadAttention(Attention):
    """H scaled dot-product heads over learned projections, and an output projection.

    ``prepare`` projects keys and values once: [B, S, Dk] -> [B, H, S, dh]. With
    ``position_bias`` every head learns one bias per key position (up to
    ``max_positions``), so a head can attend to a fixed position whatever its content.
    ``attend(..., need_weights=False)`` returns ``None`` for the weights; with ``sdpa`` it
    also takes PyTorch's fused ``scaled_dot_product_attention`` (same outputs). At
    Multi30k's lengths on a CPU it was slower than the explicit path, so it is off by
    default; it pays for long sequences and on GPUs (cuDNN's kernel excluded: see
    ``VARIABLE_SHAPE_BACKENDS``; docs/benchmarks/speed.md, "Measurements behind choices").

    Args:
        query_size, key_size: As in ``Attention``.
        num_heads: Number of heads H; must divide ``model_size``.
        model_size: Size d of the projected queries, keys and values, and of the output
            (default: ``query_size``); each head gets d / H.
        value_size: Size Dv of the values (default: ``key_size``).
        dropout: Dropout on the attention weights.
        position_bias: Let every head learn one bias per key position, so that a head can
            attend to a fixed position whatever its content.
        max_positions: Key positions the position bias covers.
        sdpa: Take PyTorch's fused ``scaled_dot_product_attention`` when no weights are
            needed (same outputs).
    """

    def __init__(  # its parameters are an attention block's init_args in a config
        self,
        query_size: int,
        key_size: int,
        num_heads: int = 4,
        model_size: int | None = None,
        value_size: int | None = None,
        dropout: float = 0.0,
        position_bias: bool = False,
        max_positions: int = 256,
        sdpa: bool = False,
    ) -> None:
        super().__init__(query_size, key_size)
        self.sdpa = sdpa
        d = model_size or query_size
        if d % num_heads:
            raise ValueError(f"model_size {d} is not divisible by num_heads {num_heads}")
        self.num_heads, self.head_size, self.model_size = num_heads, d // num_heads, d
        self.q_proj = nn.Linear(query_size, d)
        self.k_proj = nn.Linear(key_size, d)
        self.v_proj = nn.Linear(value_size or key_size, d)
        self.out_proj = nn.Linear(d, d)
        self.dropout = nn.Dropout(dropout)
        self.position_bias = (
            nn.Parameter(torch.zeros(num_heads, max_positions)) if position_bias else None
        )

    def context_size(self, value_size: int) -> int:
        return self.model_size

    def _split(self, x: Tensor) -> Tensor:
        """[B, T, d] -> [B, H, T, dh]."""
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, self.head_size).transpose(1, 2)

    def prepare(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        return self._split(self.k_proj(keys)), self._split(self.v_proj(values))

    def _bias(self, keys: int) -> Tensor | None:
        """The learned per-position bias [H, 1, S] for S keys, or None."""
        if self.position_bias is None:
            return None
        if keys > self.position_bias.size(1):
            raise ValueError(
                f"{keys} keys but the position bias covers {self.position_bias.size(1)}: "
                "raise max_positions"
            )
        return self.position_bias[:, None, :keys]

    def attend(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        valid_lens: Tensor | None,
        query_pos: Tensor | None = None,
        need_weights: bool = True,
    ) -> tuple[Tensor, Tensor | None]:
        B, Tq, _ = queries.shape
        q = self._split(self.q_proj(queries))  # [B, H, Tq, dh]
        bias = self._bias(keys.size(2))
        if need_weights or not self.sdpa:
            scores = q @ keys.transpose(-1, -2) / math.sqrt(self.head_size)  # [B, H, Tq, S]
            if bias is not None:
                scores = scores + bias
            probs = masked_softmax(scores, valid_lens)
            context = self.dropout(probs) @ values  # [B, H, Tq, dh]
            weights = probs if need_weights else None
        else:
            mask = None if valid_lens is None else key_mask(valid_lens, keys.size(2), q.dim())
            if bias is not None:
                additive = bias.to(q.dtype).expand(B, -1, Tq, -1)
                mask = additive if mask is None else additive.masked_fill(~mask, float("-inf"))
            with sdpa_kernel(VARIABLE_SHAPE_BACKENDS):
                dropout = self.dropout.p if self.training else 0.0
                context = F.scaled_dot_product_attention(
                    q, keys, values, attn_mask=mask, dropout_p=dropout
                )
            weights = None
        merged = context.transpose(1, 2).reshape(B, Tq, self.model_size)
        return self.out_proj(merged), weights
