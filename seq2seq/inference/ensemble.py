"""Several trained models decoding as one, on the encoder-decoder contract.

At every target position the ensemble's log-probabilities are the mean of its members'
(each member normalizes its own distribution first), or their weighted mean with
``weights`` (e.g. chosen on a validation set, to lean on the stronger member). Since
``Ensemble`` implements ``EncoderDecoder`` itself, greedy and beam search, n-best lists,
the length penalty and attention inspection run on it unchanged. Members may be of any
family (RNN and Transformer together); they must share the vocabularies, so that one source
encoding feeds them all and their target ids mean the same pieces.

Attention: members return maps of different shapes (``[B, S]`` for an RNN, ``[B, L, H, S]``
for a Transformer). The ensemble's map is each member's mean over its heads and layers,
then the mean over members, weighted as the log-probabilities: ``[B, S]`` (``[B, T, S]``
teacher forced). With ``ensemble_attention=i`` it is member i's own map, heads and layers kept.

Shapes: B sentences, S source positions, T target positions, V target vocabulary,
M members.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import torch
from torch import Tensor, nn

from seq2seq.common.errors import CheckpointError
from seq2seq.inference.checkpoint import Trained, load_trained
from seq2seq.model import EncoderDecoder, Memory, State


@dataclass
class EnsembleMemory(Memory):
    """The members' encoder outputs; ``states``/``lens``/``final`` are the first member's."""

    members: list[Memory] | None = None


@dataclass
class EnsembleState(State):
    """The members' decoder states, one per member, each for the same B rows."""

    members: list[State]


def _mean_over_heads(maps: Tensor, query_dims: int) -> Tensor:
    """A member's map [B, *heads, *query, S] -> [B, *query, S] (``query_dims`` is 0 for a
    step's map, 1 for teacher forcing's [..., T, S])."""
    head_dims = tuple(range(1, maps.dim() - 1 - query_dims))
    return maps.mean(dim=head_dims) if head_dims else maps


def normalized_weights(weights: Sequence[float] | None, members: int) -> list[float] | None:
    """``weights`` scaled to sum to 1 (None: equal weights), or ValueError saying what is
    wrong with them: one per member, each finite and >= 0, not all 0."""
    if weights is None:
        return None
    if len(weights) != members:
        raise ValueError(f"{len(weights)} weights given for {members} members; give one per member")
    if any(not math.isfinite(w) or w < 0 for w in weights):
        raise ValueError(f"ensemble weights must be finite and >= 0, got {list(weights)}")
    total = sum(weights)
    if total == 0:
        raise ValueError("ensemble weights are all 0; at least one member must count")
    return [w / total for w in weights]


class Ensemble(EncoderDecoder):
    """The (weighted) mean of ``members``' log-probabilities at every step.

    Args:
        members: trained models with the same vocabularies (checked by the loader, which
            knows their pieces; here only the sizes and special ids are compared).
        ensemble_attention: None for the members' mean attention (over heads, layers and
            members: [B, S]), or the index of the member whose own maps to return.
        weights: one per member, >= 0, scaled to sum to 1; None: equal weights.
    """

    def __init__(
        self,
        members: Sequence[EncoderDecoder],
        ensemble_attention: int | None = None,
        weights: Sequence[float] | None = None,
    ):
        if not members:
            raise ValueError("an ensemble needs at least one member")
        scaled = normalized_weights(weights, len(members))
        vocab = members[0].vocab
        for member in members[1:]:
            if member.vocab != vocab:
                raise ValueError(f"members have different vocabularies: {vocab} and {member.vocab}")
        if ensemble_attention is not None and not 0 <= ensemble_attention < len(members):
            raise ValueError(
                f"ensemble_attention must name one of the {len(members)} members (0 to "
                f"{len(members) - 1}), got {ensemble_attention}"
            )
        super().__init__(vocab)
        self.members = nn.ModuleList(members)
        self.ensemble_attention = ensemble_attention
        self.weights = scaled  # None: equal

    @property
    def _models(self) -> Iterable[EncoderDecoder]:
        """The members as models (their ModuleList types them Module)."""
        return cast("Iterable[EncoderDecoder]", self.members)

    def _combine_maps(self, maps: list[Tensor | None], query_dims: int) -> Tensor | None:
        if maps[0] is None:
            return None
        if self.ensemble_attention is not None:
            return maps[self.ensemble_attention]
        # every member honours need_weights: one returned maps, so all did
        return self._mean([_mean_over_heads(m, query_dims) for m in cast("list[Tensor]", maps)])

    def _mean(self, tensors: list[Tensor]) -> Tensor:
        """Members' tensors [B, ...] each (log-probabilities, maps) -> their (weighted)
        mean [B, ...]."""
        if len(tensors) == 1:
            return tensors[0]
        if self.weights is None:
            return torch.stack(tensors).mean(dim=0)
        # a member of weight 0 is left out, not multiplied: 0 * -inf would be NaN; the
        # weights are not all 0, so the sum is a tensor
        return cast(Tensor, sum(w * t for w, t in zip(self.weights, tensors, strict=True) if w > 0))

    def encode(self, src: Tensor, src_lens: Tensor) -> EnsembleMemory:
        memories = [member.encode(src, src_lens) for member in self._models]
        first = memories[0]
        return EnsembleMemory(first.states, first.lens, first.final, members=memories)

    def start(self, memory: Memory) -> EnsembleState:
        assert isinstance(memory, EnsembleMemory) and memory.members is not None
        return EnsembleState(
            [member.start(m) for member, m in zip(self._models, memory.members, strict=True)]
        )

    def step(
        self, prev_tokens: Tensor, state: State, need_weights: bool = True
    ) -> tuple[Tensor, EnsembleState, Tensor | None]:
        assert isinstance(state, EnsembleState)
        steps = [
            member.step(prev_tokens, member_state, need_weights)
            for member, member_state in zip(self._models, state.members, strict=True)
        ]
        logprobs = self._mean([logprobs for logprobs, _, _ in steps])
        maps = self._combine_maps([maps for _, _, maps in steps], query_dims=0)
        return logprobs, EnsembleState([next_state for _, next_state, _ in steps]), maps

    def decode(
        self, memory: Memory, tgt_in: Tensor, need_weights: bool = True
    ) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing; the "logits" are the mean log-probabilities [B, T, V] (a
        log-softmax of them gives the same distribution)."""
        assert isinstance(memory, EnsembleMemory) and memory.members is not None
        outputs = [
            member.decode(m, tgt_in, need_weights)
            for member, m in zip(self._models, memory.members, strict=True)
        ]
        logprobs = self._mean([torch.log_softmax(logits, -1) for logits, _ in outputs])
        return logprobs, self._combine_maps([maps for _, maps in outputs], query_dims=1)


def _differs(a: Trained, b: Trained) -> str | None:
    """How b's vocabularies differ from a's, or None if they are the same."""
    for side in ("tgt", "src"):
        ours, theirs = getattr(a.vocab, side), getattr(b.vocab, side)
        if ours.to_bytes() != theirs.to_bytes():
            sizes = f"{ours.size} and {theirs.size} pieces"
            same = " of the same size" if ours.size == theirs.size else ""
            return f"{'target' if side == 'tgt' else 'source'} vocabularies differ{same} ({sizes})"
    return None


def load_ensemble(
    paths: Sequence[str | Path],
    ensemble_attention: int | None = None,
    weights: Sequence[float] | None = None,
) -> Trained:
    """The checkpoints at ``paths`` as one model (one path: that model itself), their
    log-probabilities averaged with ``weights`` (None: equally). The first checkpoint
    supplies the defaults (languages, search)."""
    normalized_weights(weights, len(paths))  # before loading anything
    members = [load_trained(path) for path in paths]
    if len(members) == 1 and ensemble_attention in (None, 0):
        return members[0]
    for path, member in zip(paths[1:], members[1:], strict=True):
        difference = _differs(members[0], member)
        if difference:
            raise CheckpointError(
                f"cannot ensemble {paths[0]} and {path}: their {difference}; members must "
                "be trained with the same vocabulary"
            )
    model = Ensemble([m.model for m in members], ensemble_attention, weights).eval()
    first = members[0]
    return Trained(model=model, vocab=first.vocab, config=first.config, search=first.search)
