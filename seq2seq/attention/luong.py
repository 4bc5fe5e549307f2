"""Luong et al. (2015) attention: global (dot | general | concat), location, and local.

Shapes: B batch, Tq queries, S keys, W = 2D + 1 window positions, P prepared key size,
Dq query size, Dv value size.

Local attention looks at a window ``[p_t - D, p_t + D]`` of source positions only:

- local-m (``predictive=False``): ``p_t = t``, the target position (``query_pos``).
- local-p (``predictive=True``): ``p_t = S_i * sigmoid(v_p^T tanh(W_p h_t))`` with ``S_i``
  the sentence's own valid length, so ``p_t`` lies in ``[0, S_i]``. The in-window softmax
  weights are multiplied by ``exp(-(s - p_t)^2 / (2 sigma^2))``, ``sigma = D / 2``
  (Luong eq. 10). They are *not* renormalized: a row sums to at most 1, and the Gaussian is
  how the gradient reaches ``W_p`` and ``v_p``.

A real-valued ``p_t`` picks the integer window centered on its nearest integer (halves
round up), moved into ``[0, S_i - 1]`` so that a window never misses the sentence
entirely (local-m with ``t >= S_i + D`` would otherwise see nothing); positions outside
``[0, S_i)`` get zero weight. The 2D+1 window positions are gathered from the prepared
keys and the values, so a step scores O(D) keys whatever S is; the weights returned are
still a full ``[B, Tq, S]`` map, zero outside the window.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seq2seq.attention.base import Attention, GlobalAttention, SoftmaxAttention
from seq2seq.attention.scores import AdditiveScore, DotScore, GeneralScore, Score
from seq2seq.common.errors import Seq2SeqError
from seq2seq.masking import softmax_where

ScoreName = Literal["dot", "general", "concat"]


def luong_score(
    name: ScoreName, query_size: int, key_size: int, hidden_size: int | None = None
) -> Score:
    """Luong's scores: dot ``h_t^T h_s``, general ``h_t^T W_a h_s`` and concat
    ``v_a^T tanh(W_a [h_t; h_s])`` (an ``AdditiveScore`` of width ``hidden_size``, by
    default ``query_size``)."""
    if name == "dot":
        return DotScore(query_size, key_size)
    if name == "general":
        return GeneralScore(query_size, key_size)
    if name == "concat":
        return AdditiveScore(query_size, key_size, hidden_size or query_size)
    raise Seq2SeqError(f"unknown Luong score {name!r}: choose dot, general or concat")


def per_query(lengths: Tensor, queries: int) -> Tensor:
    """Valid lengths [B] or [B, Tq] -> [B, Tq]: one length per query."""
    if lengths.dim() == 1:
        return lengths.unsqueeze(1).expand(-1, queries)
    if lengths.dim() == 2:
        return lengths
    raise ValueError(f"valid_lens must be [B] or [B, Tq], got shape {tuple(lengths.shape)}")


def gather_window(x: Tensor, index: Tensor) -> Tensor:
    """x [B, S, P] at index [B, Tq, W] (positions in [0, S)) -> [B, Tq, W, P].

    Whole rows are picked from x viewed as [B * S, P] (``index_select``), which copies
    each row in one go: faster than ``torch.gather`` with an index expanded over P."""
    B, S, P = x.shape
    rows = index + torch.arange(B, device=index.device).view(B, 1, 1) * S  # [B, Tq, W]
    return x.reshape(B * S, P).index_select(0, rows.flatten()).view(*index.shape, P)


class LuongGlobalAttention(GlobalAttention):
    """Luong's global attention: a softmax of the dot, general or concat score over every
    valid source position.

    Args:
        query_size, key_size: As in ``Attention``.
        score: ``dot`` h_t^T h_s (queries and keys of one size), ``general``
            h_t^T W_a h_s, or ``concat`` v_a^T tanh(W_a [h_t; h_s]).
        hidden_size: Width of the concat score's hidden layer (default: ``query_size``).
    """

    def __init__(
        self,
        query_size: int,
        key_size: int,
        score: ScoreName = "general",
        hidden_size: int | None = None,
    ) -> None:
        super().__init__(
            query_size, key_size, luong_score(score, query_size, key_size, hidden_size)
        )


class LuongLocationAttention(SoftmaxAttention):
    """Luong's location-based attention, ``a_t = softmax(W_a h_t)`` over the valid source
    positions: where to look is predicted from the query alone; the keys are not read.

    Args:
        query_size, key_size: As in ``Attention``.
        max_positions: Longest source it can attend over: ``W_a`` has one row per source
            position, and a step over S keys uses its first S rows.
    """

    def __init__(self, query_size: int, key_size: int, max_positions: int = 256) -> None:
        super().__init__(query_size, key_size)
        self.position_scores = nn.Linear(query_size, max_positions, bias=False)

    def scores(self, queries: Tensor, keys: Tensor) -> Tensor:
        """queries [B, Tq, Dq], keys [B, S, Dk] (only S is read) -> scores [B, Tq, S]."""
        num_keys, limit = keys.size(1), self.position_scores.out_features
        if num_keys > limit:
            raise Seq2SeqError(
                f"a source of {num_keys} tokens is longer than location attention's max_positions "
                f"({limit}): shorten the input or train with a larger max_positions"
            )
        return F.linear(queries, self.position_scores.weight[:num_keys])


class LuongLocalAttention(Attention):
    """Luong's local attention (local-m or local-p) with the dot, general or concat score.

    See the module's docstring for how the window is chosen, clipped and gathered.

    Args:
        query_size, key_size: As in ``Attention``.
        score: ``dot``, ``general`` or ``concat``, as in ``LuongGlobalAttention``.
        hidden_size: Width of the concat score's hidden layer (default: ``query_size``).
        window: The window's half-width D (at least 1): it covers 2D + 1 source positions.
        predictive: local-p, a window center predicted from the decoder state; otherwise
            local-m, centered on the target position.
    """

    def __init__(
        self,
        query_size: int,
        key_size: int,
        score: ScoreName = "general",
        window: int = 10,
        predictive: bool = True,
        hidden_size: int | None = None,
    ) -> None:
        super().__init__(query_size, key_size)
        if window < 1:
            raise Seq2SeqError(f"local attention needs a window half-width D >= 1, got {window}")
        self.score = luong_score(score, query_size, key_size, hidden_size)
        self.window = window
        self.sigma = window / 2
        self.predictor = (
            nn.Sequential(  # v_p^T tanh(W_p h_t)
                nn.Linear(query_size, query_size, bias=False),
                nn.Tanh(),
                nn.Linear(query_size, 1, bias=False),
            )
            if predictive
            else None
        )

    def prepare(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        return self.score.prepare(keys), values

    def centers(self, queries: Tensor, lengths: Tensor, query_pos: Tensor | None = None) -> Tensor:
        """The window centers p_t [B, Tq] (float32).

        queries [B, Tq, Dq]; lengths [B] or [B, Tq] the valid source lengths S_i;
        query_pos [B, Tq] the target positions t (local-m; default 0, 1, ..., Tq - 1).
        """
        B, Tq, _ = queries.shape
        if self.predictor is None:
            if query_pos is None:
                query_pos = torch.arange(Tq, device=queries.device).expand(B, Tq)
            return query_pos.float()
        # float32 even under autocast: bf16 would place p_t only to about +-0.5 near S = 100
        with torch.autocast(queries.device.type, enabled=False):
            gate = torch.sigmoid(self.predictor(queries.float()).squeeze(-1))  # [B, Tq]
        return per_query(lengths, Tq).float() * gate

    def window_positions(self, centers: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """The 2D+1 source positions around each center, and which lie inside [0, S_i).

        centers [B, Tq] (p_t); lengths [B] or [B, Tq] ->
        (positions [B, Tq, 2D+1] long, may be < 0 or >= S_i; inside [B, Tq, 2D+1] bool).
        """
        lengths = per_query(lengths, centers.size(1))
        center = torch.floor(centers + 0.5).long().clamp(min=0)
        center = torch.minimum(center, (lengths - 1).clamp(min=0))
        offsets = torch.arange(-self.window, self.window + 1, device=centers.device)
        positions = center.unsqueeze(-1) + offsets
        inside = (positions >= 0) & (positions < lengths.unsqueeze(-1))
        return positions, inside

    def attend(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        valid_lens: Tensor | None,
        query_pos: Tensor | None = None,
        need_weights: bool = True,
    ) -> tuple[Tensor, Tensor]:
        """queries [B, Tq, Dq], prepared keys [B, S, P], values [B, S, Dv]
        -> (context [B, Tq, Dv], weights [B, Tq, S], zero outside each window)."""
        B, Tq, _ = queries.shape
        S = keys.size(1)
        lengths = valid_lens if valid_lens is not None else keys.new_full((B,), S, dtype=torch.long)
        p = self.centers(queries, lengths, query_pos)  # [B, Tq]
        positions, inside = self.window_positions(p, lengths)  # [B, Tq, W]
        index = positions.clamp(0, S - 1)  # outside positions read any key, then weigh 0
        scores = self.score.window(queries, gather_window(keys, index))  # [B, Tq, W]
        weights = softmax_where(scores, inside)
        if self.predictor is not None:
            distance = positions.float() - p.unsqueeze(-1)
            gaussian = torch.exp(-distance.pow(2) / (2 * self.sigma**2))
            weights = weights * gaussian.to(weights.dtype)
        window_values = gather_window(values, index)  # [B, Tq, W, Dv]
        context = (weights.unsqueeze(-2) @ window_values).squeeze(-2)  # [B, Tq, Dv]
        # clipped duplicates of a position weigh 0, so adding them changes nothing
        full = weights.new_zeros(B, Tq, S).scatter_add_(-1, index, weights)
        return context, full
