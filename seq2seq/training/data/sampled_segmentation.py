"""Subword regularization: a fresh segmentation of each training pair every epoch.

A unigram SentencePiece model gives every segmentation of a sentence a likelihood. Kudo
(2018) trains on segmentations drawn from the ``nbest`` most likely ones, each with
probability proportional to its likelihood to the power ``alpha``: a model that sees many
segmentations of the same text leans less on any single one, which helps most on small
corpora. The training split is tokenized once, with the best segmentation
(``seq2seq.training.data.tokenized``); ``SampledSegmentations`` turns each row it reads back into
text and draws a segmentation of it.

The draws come from NumPy generators seeded with (seed, epoch, row), not from
SentencePiece's own sampler, whose draws differ from process to process whatever its
seed: so a run is reproduced exactly, resumes in the middle of an epoch exactly, and reads
the same pairs with or without loader workers. Drawn segmentations are longer than the
best one (about 1.09 times on Multi30k with the 64 best at alpha 0.1), so batches run over
``max_tokens`` by as much; a draw longer than ``max_len`` pieces is replaced by the best
segmentation, so the training filter's bound still holds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch.utils.data import Dataset

from seq2seq.inference.batching import LengthOrder
from seq2seq.text.tokenizer import Vocabulary
from seq2seq.training.data.tokenized import SIDES, TokenizedRows


class SampledSegmentations(Dataset):
    """The rows of ``rows`` (``{"id", "src_ids", "tgt_ids"}``), each side re-segmented at
    random as it is read.

    Args:
        rows: The training rows, tokenized with the best segmentation.
        vocab: The (unigram) vocabulary that tokenized them.
        nbest: How many of the most likely segmentations a draw chooses from (at least 1).
        alpha: The power of each one's likelihood in the draw: 0 draws uniformly from the
            ``nbest``, larger values favor the best (0.1 with 64, as Kudo, is usual).
        max_len: The most pieces a drawn side may have; a longer draw keeps the row's
            best segmentation.
        order: The batch sampler's ``LengthOrder``, whose epoch Lightning sets.
        seed: The run's data seed.
    """

    def __init__(
        self,
        rows: TokenizedRows,
        vocab: Vocabulary,
        nbest: int,
        alpha: float,
        max_len: int,
        order: LengthOrder,
        seed: int,
    ) -> None:
        self.rows, self.vocab, self.nbest, self.alpha = rows, vocab, nbest, alpha
        self.max_len, self.order, self.seed = max_len, order, seed

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: list[int]) -> list[dict[str, Any]]:
        examples = self.rows.__getitems__(indices)
        tokenizers = {"src": self.vocab.src, "tgt": self.vocab.tgt}
        for example in examples:
            rng = np.random.default_rng([self.seed, self.order.epoch, example["id"]])
            for side in SIDES:
                best = example[f"{side}_ids"]
                drawn = tokenizers[side].sample(best, self.nbest, self.alpha, rng)
                if len(drawn) <= self.max_len:
                    example[f"{side}_ids"] = np.asarray(drawn, dtype=np.int32)
        return examples
