"""Padded batches with valid lengths, and length-bucketed batches under a token budget.

Every source sentence ends with EOS; the decoder reads BOS + target and predicts
target + EOS. So a pair of ``m`` source and ``n`` target pieces costs
``max(m, n) + 1`` positions, and a batch costs ``sentences * longest`` of those.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Sampler

from seq2seq.batch import Batch, SourceBatch


def pad(sequences: Sequence[Sequence[int]], pad_id: int) -> tuple[Tensor, Tensor]:
    """Id lists -> (padded [B, L] long tensor, L = the longest, and lengths [B])."""
    tensors = [torch.tensor(seq, dtype=torch.long) for seq in sequences]
    lengths = torch.tensor([len(seq) for seq in sequences], dtype=torch.long)
    return pad_sequence(tensors, batch_first=True, padding_value=pad_id), lengths


def collate(examples: Sequence[Mapping[str, Any]], pad_id: int, bos_id: int, eos_id: int) -> Batch:
    """Rows ``{"id": int, "src_ids": [...], "tgt_ids": [...]}`` (no specials) -> a Batch."""
    src, src_lens = pad([[*ex["src_ids"], eos_id] for ex in examples], pad_id)
    tgt_in, tgt_lens = pad([[bos_id, *ex["tgt_ids"]] for ex in examples], pad_id)
    tgt_out, _ = pad([[*ex["tgt_ids"], eos_id] for ex in examples], pad_id)
    ids = torch.tensor([ex["id"] for ex in examples], dtype=torch.long)
    target_tokens = sum(len(ex["tgt_ids"]) + 1 for ex in examples)  # EOS included
    return Batch(src, src_lens, ids, tgt_in, tgt_out, tgt_lens, target_tokens)


def source_batches(
    src_ids: Sequence[Sequence[int]], max_tokens: int, pad_id: int, eos_id: int
) -> Iterator[SourceBatch]:
    """Length-bucketed batches of source sentences (id lists without specials).

    ``batch.ids`` are positions in ``src_ids``: write results to ``out[batch.ids[i]]``
    to get them back in input order. Always one process: never sharded.
    """
    lengths = [len(ids) + 1 for ids in src_ids]
    sampler = TokenBucketBatchSampler(lengths, max_tokens, num_replicas=1, rank=0)
    for indices in sampler:
        src, src_lens = pad([[*src_ids[i], eos_id] for i in indices], pad_id)
        yield SourceBatch(src, src_lens, torch.tensor(indices, dtype=torch.long))


def cut_batches(sorted_lengths: np.ndarray, max_tokens: int) -> np.ndarray:
    """Batch boundaries over examples in ascending order of length: batch ``b`` holds
    positions ``bounds[b]:bounds[b + 1]`` of that order, ``bounds`` [num_batches + 1].

    Greedy, as filling batches one example at a time would: an example joins the open batch
    while ``(sentences + 1) * its length <= max_tokens``; an example longer than
    ``max_tokens`` alone makes a batch of its own. Works on runs of equal length, so the
    cost grows with the number of distinct lengths, not with the number of examples.
    """
    if not len(sorted_lengths):
        return np.zeros(1, dtype=np.int64)
    change = np.flatnonzero(np.diff(sorted_lengths)) + 1
    run_starts = np.concatenate([[0], change])
    run_sizes = np.diff(np.concatenate([run_starts, [len(sorted_lengths)]]))
    starts, end, count = [0], 0, 0  # count: examples in the open batch, which ends at `end`
    for length, n in zip(sorted_lengths[run_starts].tolist(), run_sizes.tolist(), strict=True):
        fits = max_tokens // length  # examples of this length one batch may hold
        if count:
            take = min(n, max(0, fits - count))
            count, end, n = count + take, end + take, n - take
            if not n:
                continue
            starts.append(end)
        size = max(1, fits)
        starts.extend(range(end + size, end + n, size))
        end += n
        count = n % size or size
    starts.append(end)
    return np.asarray(starts, dtype=np.int64)


class LengthOrder(Sampler[int]):
    """Indices sorted by length; with ``shuffle``, ties in an order set by (seed, epoch).

    Lightning calls ``set_epoch`` on ``dataloader.batch_sampler.sampler``, which is this.
    """

    def __init__(self, lengths: Sequence[int] | np.ndarray, shuffle: bool, seed: int) -> None:
        self.lengths = np.asarray(lengths, dtype=np.int32)
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def rng(self, stream: int) -> np.random.Generator:
        """Independent random streams for (seed, epoch): 0 breaks ties, 1 orders batches."""
        return np.random.default_rng([self.seed, self.epoch, stream])

    def order(self) -> np.ndarray:
        """The epoch's order [N] as an array (``__iter__`` yields the same indices)."""
        if not self.shuffle:
            return np.argsort(self.lengths, kind="stable")
        tie_break = self.rng(0).permutation(len(self.lengths))
        return np.lexsort((tie_break, self.lengths))

    def __iter__(self) -> Iterator[int]:
        return iter(self.order().tolist())

    def __len__(self) -> int:
        return len(self.lengths)


class TokenBucketBatchSampler(Sampler[list[int]]):
    """Batches of similar lengths under a token budget, sharded across processes.

    ``lengths[i]``: example i's longer side in positions, BOS/EOS included. A batch costs
    ``len(batch) * max(lengths[batch])`` and stays within ``max_tokens`` unless it is a
    single example over the budget (kept, never dropped). With ``shuffle``, batch
    contents vary in their tie-breaks and batch order is shuffled, both deterministic
    for (seed, epoch); without, batches come shortest first.

    The epoch's order and the batch boundaries are NumPy arrays (a few bytes per example);
    a batch becomes a list of indices only when it is drawn.

    With ``num_replicas`` processes (default: the ``torch.distributed`` world, else 1),
    process ``rank`` takes every ``num_replicas``-th batch; batches are repeated from the
    start so that every process gets ``len(self)`` of them, as ``DistributedSampler``
    does. Under Lightning with several devices, set ``use_distributed_sampler=False``
    on the Trainer: this sampler shards by itself.
    """

    def __init__(
        self,
        lengths: Sequence[int] | np.ndarray,
        max_tokens: int,
        shuffle: bool = False,
        seed: int = 0,
        num_replicas: int | None = None,
        rank: int | None = None,
    ) -> None:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        distributed = dist.is_available() and dist.is_initialized()
        if num_replicas is None:
            num_replicas = dist.get_world_size() if distributed else 1
        self.num_replicas = num_replicas
        self.rank = rank if rank is not None else (dist.get_rank() if distributed else 0)
        if num_replicas < 1 or not 0 <= self.rank < num_replicas:
            raise ValueError(f"rank {self.rank} is not in [0, {self.num_replicas})")
        self.max_tokens = max_tokens
        self.sampler = LengthOrder(lengths, shuffle, seed)
        # The sorted lengths, hence the cuts, do not depend on the tie-break: cut once.
        self._bounds = cut_batches(np.sort(self.sampler.lengths), max_tokens)
        self._skip = 0

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    def resume_at(self, batches_done: int) -> None:
        """Make the next iteration start after the first ``batches_done`` batches of its epoch."""
        self._skip = batches_done

    def __iter__(self) -> Iterator[list[int]]:
        order, bounds = self.sampler.order(), self._bounds
        num_batches = len(bounds) - 1
        if self.sampler.shuffle:
            batch_order = self.sampler.rng(1).permutation(num_batches)
        else:
            batch_order = np.arange(num_batches)
        total = len(self) * self.num_replicas
        if num_batches and total > num_batches:
            batch_order = np.resize(batch_order, total)  # repeated from the start
        skip, self._skip = self._skip, 0
        mine = batch_order[self.rank :: self.num_replicas][skip:].tolist()
        return (order[bounds[b] : bounds[b + 1]].tolist() for b in mine)

    def __len__(self) -> int:
        return math.ceil((len(self._bounds) - 1) / self.num_replicas)


class ResumableLoader(DataLoader):
    """A DataLoader over a ``TokenBucketBatchSampler`` that can stop mid-epoch and resume.

    Lightning saves ``state_dict()`` in checkpoints and hands it back through
    ``load_state_dict`` on resume; the epoch's order itself comes back from (seed, epoch).
    Lightning does not prefetch from loaders with a length, so the count of batches
    yielded is the count trained on. The loader draws its worker seed from a generator
    of its own, so starting an epoch leaves the global RNG (dropout) untouched. Workers
    live across epochs unless ``fresh_workers``, which starts them anew each epoch with a
    copy of the dataset as it is then (a dataset that reads the epoch needs it). With
    ``pin_memory`` batches come in page-locked memory, for training on a GPU.
    """

    batch_sampler: TokenBucketBatchSampler  # the one given, which DataLoader types loosely

    def __init__(
        self,
        dataset: Any,
        batch_sampler: TokenBucketBatchSampler,
        collate_fn: Callable[[list[Any]], Any],
        num_workers: int = 0,
        fresh_workers: bool = False,
        pin_memory: bool = False,
    ) -> None:
        super().__init__(
            dataset,
            batch_sampler=batch_sampler,
            collate_fn=collate_fn,
            num_workers=num_workers,
            persistent_workers=num_workers > 0 and not fresh_workers,
            generator=torch.Generator(),
            pin_memory=pin_memory,
        )
        self._yielded = 0

    # DataLoader declares its own private iterator class; any iterator serves its callers
    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        self._yielded = self.batch_sampler._skip
        for batch in super().__iter__():
            self._yielded += 1
            yield batch

    def state_dict(self) -> dict[str, int]:
        return {"batches_done": self._yielded}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.batch_sampler.resume_at(state["batches_done"] % max(len(self), 1))
