"""The batches every model, search and training step reads: padded ids and valid lengths.

Source and target ids are padded with ``pad_id`` to the longest sequence in the batch;
``src_lens`` and ``tgt_lens`` are the valid lengths. Nothing downstream reads past a valid
length: masks come from the lengths (``masking.py``), never from comparing ids to
``pad_id``. How batches are made (length buckets under a token budget) is
``inference/batching.py``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TypeVar

from torch import Tensor

BatchT = TypeVar("BatchT", bound="SourceBatch")


@dataclass
class SourceBatch:
    """Source sentences only, for translation.

    src: [B, S] ids (EOS last, then pad_id); src_lens: [B] valid lengths (EOS included);
    ids: [B] the index of each sentence in its split or input, to restore the order.
    """

    src: Tensor
    src_lens: Tensor
    ids: Tensor

    def pin_memory(self: BatchT) -> BatchT:
        """The batch in page-locked memory (a DataLoader with ``pin_memory`` calls this), from
        which a non-blocking copy to a GPU runs while the host goes on."""
        tensors = [
            f.name for f in dataclasses.fields(self) if isinstance(getattr(self, f.name), Tensor)
        ]
        return dataclasses.replace(
            self, **{name: getattr(self, name).pin_memory() for name in tensors}
        )


@dataclass
class Batch(SourceBatch):
    """Sentence pairs, for training and scoring.

    tgt_in: [B, T] BOS + target ids; tgt_out: [B, T] target ids + EOS (both padded with
    pad_id); tgt_lens: [B] valid lengths, the number of target ids + 1; target_tokens:
    their sum, counted on the host when the batch is made, so that a training step on a GPU
    need not wait for the GPU to read it back; guide: [B, T, S] or None, what guided
    alignment teaches one attention head (``training.guided_alignment``).
    """

    tgt_in: Tensor
    tgt_out: Tensor
    tgt_lens: Tensor
    target_tokens: int
    guide: Tensor | None = None
