"""Attention heatmaps as matplotlib Figures: one map, a layers x heads grid, local windows.

Every map has the source pieces along the x axis (on top) and the target pieces, one row
per decoder step ending with end-of-sentence, along the y axis. About a quarter inch per
piece keeps the labels of sentences up to ~60 pieces readable.

Figures are built as ``matplotlib.figure.Figure`` objects, not through pyplot: they need
no display and no backend, a notebook shows them as they are returned, and
``save_figure`` writes one to a file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import cast

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator
from torch import Tensor

from seq2seq.common.atomic import write_atomically
from seq2seq.inspection.collect import SentenceAttention
from seq2seq.inspection.maps import as_layers_heads, check_layer

INCH_PER_PIECE = 0.26
CMAP = "Blues"


def _panel_size(rows: int, columns: int) -> tuple[float, float]:
    """(width, height) in inches of a labeled map of rows x columns pieces."""
    return max(2.0 + INCH_PER_PIECE * columns, 4.0), max(1.5 + INCH_PER_PIECE * rows, 3.0)


def _draw_map(
    ax: Axes,
    weights: Tensor,
    src_pieces: Sequence[str] | None,
    tgt_pieces: Sequence[str] | None,
    title: str | None,
    fontsize: float = 9,
) -> AxesImage:
    """Draw weights [T, S] on ``ax``; labels only where pieces are given. Returns the image."""
    T, S = weights.shape
    image = ax.imshow(weights.float().numpy(), cmap=CMAP, vmin=0.0, vmax=1.0, aspect="auto")
    ax.xaxis.tick_top()
    if src_pieces is not None and tgt_pieces is not None:
        ax.set_xticks(range(S), labels=list(src_pieces), rotation=90, fontsize=fontsize)
        ax.set_yticks(range(T), labels=list(tgt_pieces), fontsize=fontsize)
    else:
        ax.set_xticks([])
        ax.set_yticks([])
    if title:
        ax.set_title(title, fontsize=fontsize + 1, pad=4 if src_pieces is None else 12)
    return image


def draw_windows(ax: Axes, centers: Tensor, windows: Tensor) -> None:
    """Local attention's center p_t (a line through the rows) and window (a box per row).

    centers [T] in source positions; windows [T, 2] the first and last position inside.
    """
    rows = range(centers.size(0))
    for t, (first, last) in zip(rows, windows.tolist(), strict=True):
        ax.add_patch(
            Rectangle(
                (first - 0.5, t - 0.5), last - first + 1, 1, fill=False, edgecolor="tab:orange"
            )
        )
    ax.plot(centers.tolist(), list(rows), "o-", color="tab:red", markersize=3, label="p_t")
    ax.plot([], [], "s", mfc="none", color="tab:orange", label="window")
    ax.legend(loc="lower left", fontsize=8, framealpha=0.8)


def save_figure(fig: Figure, path: str | Path, dpi: int = 100) -> Path:
    """Write ``fig`` as an image (of the type of ``path``'s suffix), atomically."""
    path = Path(path)
    write_atomically(
        path,  # tight: titles never cut
        lambda file: fig.savefig(
            file, format=path.suffix[1:], dpi=dpi, bbox_inches="tight", pad_inches=0.1
        ),
    )
    return path


def attention_figure(
    weights: Tensor,
    src_pieces: Sequence[str],
    tgt_pieces: Sequence[str],
    title: str | None = None,
    centers: Tensor | None = None,
    windows: Tensor | None = None,
) -> Figure:
    """One map, weights [T, S], with T = len(tgt_pieces) and S = len(src_pieces); with local
    attention's ``centers`` [T] and ``windows`` [T, 2] drawn over it."""
    T, S = weights.shape
    if (len(tgt_pieces), len(src_pieces)) != (T, S):
        raise ValueError(
            f"attention is {T}x{S} but there are {len(tgt_pieces)} target and "
            f"{len(src_pieces)} source labels"
        )
    fig = Figure(figsize=_panel_size(T, S))
    ax = fig.subplots()
    image = _draw_map(ax, weights, src_pieces, tgt_pieces, title)
    if centers is not None and windows is not None:
        draw_windows(ax, centers, windows)
    ax.set_xlabel("source")
    ax.set_ylabel("target")
    ax.xaxis.set_label_position("top")
    fig.colorbar(image, ax=ax, fraction=0.03, pad=0.02)
    fig.tight_layout()
    return fig


def attention_grid_figure(
    weights: Tensor,
    src_pieces: Sequence[str],
    tgt_pieces: Sequence[str],
    layer: int = -1,
    title: str | None = None,
) -> Figure:
    """Multi-head attention, weights [T, L, H, S], as one figure.

    On top, labeled: the mean over the heads of ``layer`` and, with several layers, the
    mean over every layer and head. Below, unlabelled: every layer (rows) and head (columns).
    """
    T, L, H, S = weights.shape
    layer = check_layer(layer, L)
    aggregates = [(weights[:, layer].mean(dim=1), f"layer {layer + 1}, mean over heads")]
    if L > 1:
        aggregates.append((weights.mean(dim=(1, 2)), "mean over layers and heads"))
    width, height = _panel_size(T, S)
    cell_width = min(max(0.12 * S, 1.2), 2.5)  # a small map per head, no labels
    cell_height = min(max(cell_width * T / S, 0.8), 3.0)
    grid_height = L * (cell_height + 0.35)
    title_height = 0.6 if title else 0.0
    fig = Figure(
        figsize=(
            max(width * len(aggregates), (cell_width + 0.3) * H),
            title_height + height + grid_height,
        ),
        layout="constrained",
    )
    if title:
        fig.suptitle(title, fontsize=10)
    # 2 x 1: an array of subfigures (matplotlib types a lone SubFigure too, for 1 x 1)
    top, bottom = cast(np.ndarray, fig.subfigures(2, 1, height_ratios=[height, grid_height]))
    for ax, (summary, label) in zip(
        top.subplots(1, len(aggregates), squeeze=False)[0], aggregates, strict=True
    ):
        _draw_map(ax, summary, src_pieces, tgt_pieces, label)
    axes = bottom.subplots(L, H, squeeze=False)
    for l_index in range(L):
        for h_index in range(H):
            _draw_map(
                axes[l_index][h_index],
                weights[:, l_index, h_index],
                None,
                None,
                f"L{l_index + 1} H{h_index + 1}",
                fontsize=8,
            )
    return fig


def heatmap(  # matplotlib's own settings of a map, each with its default
    weights: Tensor | np.ndarray,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    title: str | None = None,
    titles: Sequence[str] | None = None,
    xlabel: str | None = "keys",
    ylabel: str | None = "queries",
    cmap: str = CMAP,
    vmin: float | None = 0.0,
    vmax: float | None = 1.0,
) -> Figure:
    """Any map [rows, columns], or several side by side [N, rows, columns] (one panel each,
    ``titles`` naming them): attention weights (the default colors run from 0 to 1, rows
    are queries, columns keys), or anything else with ``xlabel``/``ylabel`` and
    ``cmap``/``vmin``/``vmax`` (None: the data's own range)."""
    maps = torch.as_tensor(weights, dtype=torch.float32).detach().cpu()
    if maps.dim() == 2:
        maps = maps.unsqueeze(0)
    if maps.dim() != 3:
        raise ValueError(
            f"heatmap draws [rows, columns] or [N, rows, columns], got {tuple(maps.shape)}"
        )
    n, rows, columns = maps.shape
    if titles is not None and len(titles) != n:
        raise ValueError(f"{len(titles)} titles for {n} maps")
    width, height = _panel_size(rows, columns) if x_labels else (4.0, 3.2)
    fig = Figure(figsize=(width * n, height + (0.4 if title else 0.0)), layout="constrained")
    if title:
        fig.suptitle(title)
    for i, ax in enumerate(fig.subplots(1, n, squeeze=False)[0]):
        image = ax.imshow(maps[i].numpy(), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel(xlabel or "")
        ax.set_ylabel(ylabel or "")
        if x_labels is not None:
            ax.set_xticks(range(columns), labels=list(x_labels), rotation=90)
            ax.xaxis.tick_top()
        if y_labels is not None:
            ax.set_yticks(range(rows), labels=list(y_labels))
        if titles is not None:
            ax.set_title(titles[i])
    fig.colorbar(image, ax=fig.axes, fraction=0.03, pad=0.02)
    return fig


def sentence_figure(sentence: SentenceAttention, layer: int = -1) -> Figure:
    """The heatmap of one sentence: a single map, or the grid for multi-head attention."""
    grid = as_layers_heads(sentence.weights)
    title = f"{sentence.source}\n{sentence.target}"
    if grid.size(1) * grid.size(2) == 1:
        return attention_figure(
            grid[:, 0, 0],
            sentence.src_pieces,
            sentence.tgt_pieces,
            title,
            sentence.centers,
            sentence.windows,
        )
    return attention_grid_figure(grid, sentence.src_pieces, sentence.tgt_pieces, layer, title)


def draw_sentence(sentence: SentenceAttention, path: str | Path, layer: int = -1) -> Path:
    """``sentence_figure`` written to ``path`` (a PNG)."""
    return save_figure(sentence_figure(sentence, layer), path)
