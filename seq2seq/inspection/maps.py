"""One sentence's attention maps: heads arranged as layers x heads, and their aggregates.

A model's attention for one sentence is ``[T, *heads, S]``: ``heads`` is ``()`` for
single-head RNN attention, ``(H,)`` for multi-head RNN attention and ``(L, H)`` for the
Transformer (see ``seq2seq.model``). Every map here has target rows and source columns.
"""

from __future__ import annotations

from torch import Tensor

from seq2seq.common.errors import Seq2SeqError


def as_layers_heads(weights: Tensor) -> Tensor:
    """[T, *heads, S] -> [T, L, H, S]: heads ``()`` become (1, 1), ``(H,)`` become (1, H)."""
    if weights.dim() == 2:
        return weights[:, None, None, :]
    if weights.dim() == 3:
        return weights[:, None, :, :]
    if weights.dim() == 4:
        return weights
    raise ValueError(
        f"attention must be [T, *heads, S] with at most 2 head axes, got {weights.shape}"
    )


def check_layer(layer: int, num_layers: int) -> int:
    """``layer`` (negative counts from the last) as an index in [0, num_layers)."""
    if not -num_layers <= layer < num_layers:
        raise Seq2SeqError(
            f"--layer {layer} does not exist: the model's attention has {num_layers} layer(s)"
        )
    return layer % num_layers


def check_layer_choice(layer: int | None, heads: tuple[int, ...]) -> None:
    """Fail unless ``layer`` is None or a layer of attention with head axes ``heads``."""
    if layer is None:
        return
    if len(heads) < 2:
        raise Seq2SeqError(f"--layer {layer}: this model's attention has no layers to choose")
    check_layer(layer, heads[0])


def summary_map(weights: Tensor, layer: int | None = None) -> Tensor:
    """The one map to align and measure with: [T, *heads, S] -> [T, S].

    The mean over the heads of ``layer`` (negative counts from the last), or over every
    layer and head when ``layer`` is None. RNN attention has no layer axis: its heads are
    averaged (single-head attention is returned as it is) and choosing a layer is an error.
    """
    grid = as_layers_heads(weights).float()
    if layer is None:
        return grid.mean(dim=(1, 2))
    check_layer_choice(layer, tuple(weights.shape[1:-1]))
    return grid[:, check_layer(layer, grid.size(1))].mean(dim=1)


def step_map(
    weights: Tensor, layer: int | None = None, head: int | None = None, shift: bool = False
) -> Tensor:
    """[T + 1, *heads, S] (rows: each target piece's step, then EOS's) -> [T, S]: one row per
    target piece, each a distribution. The map: ``summary_map``'s, or one ``head`` of
    ``layer``; the step: the piece's own, or with ``shift`` the next one, which has the
    piece as its input (Shift-Att, Chen et al. 2020)."""
    if head is None:
        summary = summary_map(weights, layer)
    else:
        if layer is None:
            raise Seq2SeqError("a head is chosen within a layer: give the layer too")
        grid = as_layers_heads(weights).float()  # [T + 1, L, H, S]
        layer = check_layer(layer, grid.size(1))
        if not -grid.size(2) <= head < grid.size(2):
            raise Seq2SeqError(f"head {head} does not exist: {grid.size(2)} heads")
        summary = grid[:, layer, head]
    return normalize_rows(summary[1:] if shift else summary[:-1])


def normalize_rows(weights: Tensor) -> Tensor:
    """Each row [..., S] divided by its sum; rows without mass stay zero.

    Local-p attention multiplies its softmax by a Gaussian, so its rows sum to less than 1.
    """
    total = weights.sum(dim=-1, keepdim=True)
    return weights / total.where(total > 0, total.new_ones(()))
