"""Guided alignment (Garg et al. 2019): one cross-attention head learns given word links.

The training pairs come with word links (``data.train_alignments``: a Pharaoh file, one
line per training pair, ``i-j`` joining source word i and target word j, 0-indexed over
the whitespace-separated words of each side, as eflomal or fast_align write them). Each
batch then carries a guide ``[B, T, S]``: for the decoder step that has target piece k as
its input (step k + 1: Shift-Att's step, which aligns better than the step that predicts
k), a distribution spread evenly over the source pieces of the words that k's word links
to; rows of pieces without links, and of padding, are zero. The loss adds

    weight * -sum(guide * log attention) / (rows with links)

for the attention of one head (``layer``, ``head``) of the decoder, so that the model
translates and aligns at once; read its links back with that layer, head and ``shift``
(``model.align(..., layer=, head=, shift=True)``).

Shapes: B pairs, T = target pieces + 1 (the decoder's steps), S = source pieces + 1 (EOS).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from seq2seq.batch import Batch
from seq2seq.common.errors import DataError, Seq2SeqError, UsageError
from seq2seq.inference.batching import collate
from seq2seq.text.pharaoh import Link, read_links
from seq2seq.text.tokenizer import AnyVocabulary
from seq2seq.text.words import word_spans


def check_guided_settings(weight: float | None, links: str | None) -> None:
    """Guided alignment's weight and the links it learns come together, or not at all:
    refused in one line before any data is read."""
    if weight and not links:
        raise UsageError(
            "model.guided_alignment needs the word links of the training pairs: set "
            "data.train_alignments"
        )
    if links and not weight:
        raise UsageError(
            f"data.train_alignments {links} is given but model.guided_alignment is 0: give "
            "the guided head's weight (0.05, say), or leave the links out"
        )


def read_training_links(path: str | Path, pairs: int) -> list[list[Link]]:
    """The links of each training pair, from a Pharaoh file of exactly ``pairs`` lines."""
    links = [sorted(line) for line in read_links(path)]
    if len(links) != pairs:
        raise DataError(
            f"{path} has {len(links)} lines of links but the training split has {pairs} pairs"
        )
    return links


def piece_guide(
    links: Sequence[Link], src_pieces: Sequence[str], tgt_pieces: Sequence[str]
) -> Tensor:
    """One pair's guide [T, S] (T = len(tgt_pieces) + 1, S = len(src_pieces) + 1): row k + 1
    spread over the source pieces that target piece k's word links to. Links that point past
    a sentence's words are left out."""
    src_words, tgt_words = word_spans(src_pieces), word_spans(tgt_pieces)
    guide = torch.zeros(len(tgt_pieces) + 1, len(src_pieces) + 1)
    for i, j in links:
        if i < len(src_words) and j < len(tgt_words):
            source = src_words[i]
            for k in tgt_words[j]:
                guide[k + 1, source.start : source.stop] = 1.0
    total = guide.sum(dim=1, keepdim=True)
    return guide / total.clamp(min=1.0)


@dataclasses.dataclass
class GuidedCollate:
    """``collate`` of training rows, with each pair's guide (``Batch.guide``) from its word
    links, found by the row's number in its split. Picklable: DataLoader workers run it."""

    links: list[list[Link]]
    vocab: AnyVocabulary

    def __call__(self, examples: Sequence[Mapping[str, Any]]) -> Batch:
        spec = self.vocab.spec
        batch = collate(examples, spec.pad_id, spec.bos_id, spec.eos_id)
        guide = torch.zeros(*batch.tgt_in.shape, batch.src.size(1))  # [B, T, S]
        for row, example in enumerate(examples):
            src_pieces = self.vocab.src.id_to_piece(list(map(int, example["src_ids"])))
            tgt_pieces = self.vocab.tgt.id_to_piece(list(map(int, example["tgt_ids"])))
            one = piece_guide(self.links[example["id"]], src_pieces, tgt_pieces)
            guide[row, : one.size(0), : one.size(1)] = one
        return dataclasses.replace(batch, guide=guide)


def head_weights(attention: Tensor, layer: int, head: int) -> Tensor:
    """[B, *heads, T, S] -> [B, T, S]: one head of one layer (a Transformer's (L, H) heads);
    RNN attention without layers has its head (or its one map) taken as it is."""
    if attention.dim() == 5:
        layers, heads = attention.shape[1:3]
        if not (-layers <= layer < layers and 0 <= head < heads):
            raise Seq2SeqError(
                f"model.guided_layer {layer} and model.guided_head {head}: the decoder has "
                f"{layers} layers of {heads} heads"
            )
        return attention[:, layer, head]
    if attention.dim() == 4:
        return attention[:, head]
    return attention


def guided_alignment_loss(weights: Tensor, guide: Tensor) -> Tensor:
    """The cross-entropy of ``weights`` [B, T, S] against ``guide`` [B, T, S], per guided row
    (a row with any links); 0 when no row has links."""
    rows = (guide.sum(dim=-1) > 0).sum()
    cross_entropy = -(guide * weights.float().clamp(min=1e-9).log()).sum()
    return cross_entropy / rows.clamp(min=1)
