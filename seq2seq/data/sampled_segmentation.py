"""Subword regularisation: a fresh segmentation of each training pair every epoch.

SentencePiece can draw a segmentation of a sentence at random instead of giving its best
one (Kudo, 2018, for unigram models; BPE-dropout for BPE models). A model trained on many
segmentations of the same text leans less on any single one, which helps most on small
corpora. The training split is tokenised once, with the best segmentation
(``seq2seq.data.tokenised``); ``SampledSegmentations`` turns each row it reads back into
text and draws a new segmentation of it.

A draw depends on (seed, epoch, row) alone, so a run is reproduced exactly, resumes in the
middle of an epoch exactly, and reads the same pairs with or without loader workers. Drawn
segmentations are longer than the best one (about 1.13 times on Multi30k at alpha 0.3),
so batches run over ``max_tokens`` by as much; a draw longer than ``max_len`` pieces is
replaced by the best segmentation, so the training filter's bound still holds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sentencepiece as spm
from torch.utils.data import Dataset

from seq2seq.data.batching import LengthOrder
from seq2seq.data.tokenised import SIDES, TokenisedRows
from seq2seq.tokenizer import Vocabulary


def draw_seed(seed: int, epoch: int, row: int) -> int:
    """SentencePiece's 32-bit random seed for one pair's draw in one epoch."""
    return int(np.random.SeedSequence([seed, epoch, row]).generate_state(1)[0])


class SampledSegmentations(Dataset):
    """The rows of ``rows`` (``{"id", "src_ids", "tgt_ids"}``), each side re-segmented at
    random as it is read.

    Args:
        rows: The training rows, tokenised with the best segmentation.
        vocab: The vocabulary that tokenised them.
        alpha: SentencePiece's sampling parameter. Unigram models: the smoothing of the
            distribution over every segmentation (smaller draws more varied ones; 0.1-0.5
            is usual). BPE models: the probability of dropping each merge (e.g. 0.1).
        max_len: The most pieces a drawn side may have; a longer draw keeps the row's
            best segmentation.
        order: The batch sampler's ``LengthOrder``, whose epoch Lightning sets.
        seed: The run's data seed.
    """

    def __init__(
        self,
        rows: TokenisedRows,
        vocab: Vocabulary,
        alpha: float,
        max_len: int,
        order: LengthOrder,
        seed: int,
    ) -> None:
        self.rows, self.vocab, self.alpha = rows, vocab, alpha
        self.max_len, self.order, self.seed = max_len, order, seed

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: list[int]) -> list[dict[str, Any]]:
        examples = self.rows.__getitems__(indices)
        tokenizers = {"src": self.vocab.src, "tgt": self.vocab.tgt}
        for example in examples:
            spm.set_random_generator_seed(draw_seed(self.seed, self.order.epoch, example["id"]))
            for side in SIDES:
                best = example[f"{side}_ids"]
                drawn = tokenizers[side].sample(best, self.alpha)
                if len(drawn) <= self.max_len:
                    example[f"{side}_ids"] = np.asarray(drawn, dtype=np.int32)
        return examples
