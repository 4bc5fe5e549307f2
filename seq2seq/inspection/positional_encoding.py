"""Plots of the Transformer's sinusoidal positional encoding (``sinusoidal_table``).

Two PNGs: a few columns of the table as curves over the positions (the low dimensions
oscillate fast, the high ones slowly), and the whole table as a position x dimension
heatmap.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from seq2seq.common.atomic import output_folder
from seq2seq.common.errors import Seq2SeqError
from seq2seq.inspection.heatmap import save_figure
from seq2seq.transformer import sinusoidal_table


def curve_columns(dim: int) -> list[int]:
    """Up to eight columns spread over the dimensions: a sine and its cosine at each of four
    frequencies from the fastest (columns 0, 1) to the slowest."""
    starts = sorted({2 * round(k * (dim // 2 - 1) / 3) for k in range(4)})
    return [c for start in starts for c in (start, start + 1) if c < dim]


def positional_encoding_figures(dim: int, length: int) -> tuple[Figure, Figure]:
    """The encoding of ``length`` positions in ``dim`` dimensions: (selected columns as
    curves, the whole table as a heatmap)."""
    if dim < 2 or length < 1:
        raise Seq2SeqError(f"--dim must be at least 2 and --len at least 1 (got {dim}, {length})")
    table = sinusoidal_table(length, dim).numpy()  # [N, d]

    curves = Figure(figsize=(9, 4))
    ax = curves.subplots()
    for column in curve_columns(dim):
        kind = "sin" if column % 2 == 0 else "cos"
        ax.plot(table[:, column], label=f"dim {column} ({kind})", linewidth=1.2)
    ax.set_xlabel("position")
    ax.set_ylabel("value")
    ax.set_title(f"Sinusoidal positional encoding, d = {dim}: selected dimensions")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    curves.tight_layout()

    heatmap = Figure(figsize=(9, max(3.0, min(12.0, 2.0 + length * 0.05))))
    ax = heatmap.subplots()
    image = ax.imshow(table, cmap="RdBu", vmin=-1.0, vmax=1.0, aspect="auto", interpolation="none")
    ax.set_xlabel("dimension")
    ax.set_ylabel("position")
    ax.set_title(f"Sinusoidal positional encoding: {length} positions x {dim} dimensions")
    heatmap.colorbar(image, ax=ax, fraction=0.03, pad=0.02)
    heatmap.tight_layout()
    return curves, heatmap


def plot_positional_encoding(dim: int, length: int, out_dir: str | Path) -> list[Path]:
    """Draw the encoding of ``length`` positions in ``dim`` dimensions into ``out_dir``."""
    curves, heatmap = positional_encoding_figures(dim, length)
    out = output_folder(out_dir)
    return [
        save_figure(curves, out / "positional_encoding_curves.png"),
        save_figure(heatmap, out / "positional_encoding_heatmap.png"),
    ]
