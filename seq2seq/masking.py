"""Masks built from valid lengths, and a softmax that respects them.

Every mask in the toolkit comes from lengths, never from comparing token ids to the
padding id: a padding id may legitimately occur inside a sentence's valid span.
"""

from __future__ import annotations

import torch
from torch import Tensor


def sequence_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """True at the valid positions of each row.

    lengths: [...] integer valid lengths.  Returns a bool mask [..., max_len] where
    ``mask[..., s] = s < lengths[...]``.  ``max_len`` defaults to ``lengths.max()``.
    """
    if max_len is None:
        max_len = int(lengths.max()) if lengths.numel() else 0
    positions = torch.arange(max_len, device=lengths.device)
    return positions < lengths.unsqueeze(-1)


def key_mask(valid_lens: Tensor, num_keys: int, score_dims: int) -> Tensor:
    """A bool mask that broadcasts against scores [B, ..., Tq, S] of ``score_dims`` dims.

    valid_lens: [B] (one length per sentence) or [B, Tq] (one length per query).
    Returns [B, 1, ..., 1, S] or [B, 1, ..., Tq, S], with a singleton for every axis
    (heads, layers) between the batch and the queries.
    """
    mask = sequence_mask(valid_lens, num_keys)  # [B, S] or [B, Tq, S]
    if valid_lens.dim() == 1:
        mask = mask.unsqueeze(1)  # [B, 1, S]
    elif valid_lens.dim() != 2:
        raise ValueError(f"valid_lens must be [B] or [B, Tq], got shape {tuple(valid_lens.shape)}")
    middle = score_dims - 3  # e.g. heads in [B, H, Tq, S]
    return mask.view(mask.size(0), *([1] * middle), *mask.shape[1:])


def masked_softmax(scores: Tensor, valid_lens: Tensor | None) -> Tensor:
    """Softmax over the last axis that gives exactly zero weight past the valid length.

    scores: [B, ..., Tq, S]; valid_lens: None, [B] or [B, Tq].
    A row whose valid length is 0 yields all zeros (never NaN).
    """
    if valid_lens is None:
        return torch.softmax(scores, dim=-1)
    return softmax_where(scores, key_mask(valid_lens, scores.size(-1), scores.dim()))


def softmax_where(scores: Tensor, mask: Tensor) -> Tensor:
    """Softmax over the last axis of ``scores`` restricted to where the bool ``mask`` (which
    broadcasts against it) is True: exactly 0 elsewhere, and all zeros for a row with no
    True position (never NaN)."""
    lowest = torch.finfo(scores.dtype).min
    weights = torch.softmax(scores.masked_fill(~mask, lowest), dim=-1)
    # Multiplying by the mask makes masked weights exactly 0, and turns the uniform
    # distribution of an all-masked row into zeros.
    return weights * mask
