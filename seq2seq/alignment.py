"""Looking at what the decoder attends to: attention heatmaps.

A heatmap has the source pieces along the x axis and the target pieces (one row per
decoder step, the last being end-of-sentence) along the y axis.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display

import matplotlib.pyplot as plt  # noqa: E402
from torch import Tensor  # noqa: E402

EOS_LABEL = "</s>"


def plot_attention(
    weights: Tensor,
    src_pieces: Sequence[str],
    tgt_pieces: Sequence[str],
    path: str | Path,
    title: str | None = None,
) -> Path:
    """Draw one sentence's attention and save it as a PNG.

    weights: [T, S] with T = len(tgt_pieces) and S = len(src_pieces).
    """
    T, S = weights.shape
    if (len(tgt_pieces), len(src_pieces)) != (T, S):
        raise ValueError(
            f"attention is {T}x{S} but there are {len(tgt_pieces)} target and "
            f"{len(src_pieces)} source labels"
        )
    # About a quarter inch per piece keeps labels of ~60-piece sentences readable.
    width, height = 2.0 + 0.26 * S, 1.5 + 0.26 * T
    fig, ax = plt.subplots(figsize=(max(width, 4.0), max(height, 3.0)))
    image = ax.imshow(
        weights.float().cpu().numpy(), cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto"
    )
    ax.set_xticks(range(S), labels=list(src_pieces), rotation=90, fontsize=9)
    ax.set_yticks(range(T), labels=list(tgt_pieces), fontsize=9)
    ax.set_xlabel("source")
    ax.set_ylabel("target")
    ax.xaxis.set_label_position("top")
    ax.xaxis.tick_top()
    if title:
        ax.set_title(title, fontsize=10, pad=12)
    fig.colorbar(image, ax=ax, fraction=0.03, pad=0.02)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
