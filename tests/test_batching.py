"""Padding, collation and the token-budget batch sampler (alone, sharded, under Lightning)."""

from __future__ import annotations

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from lightning_utilities.core.apply_func import apply_to_collection
from pytorch_lightning.utilities import move_data_to_device
from torch import Tensor
from torch.utils.data import DataLoader

from seq2seq.batch import Batch, SourceBatch
from seq2seq.inference import batching
from seq2seq.inference.batching import (
    TokenBucketBatchSampler,
    collate,
    source_batches,
)

PAD, BOS, EOS = 0, 2, 3


def random_lengths(n: int, seed: int, high: int = 40) -> np.ndarray:
    return np.random.default_rng(seed).integers(1, high, size=n)


def all_batches(sampler: TokenBucketBatchSampler) -> list[list[int]]:
    batches = list(sampler)
    assert len(batches) == len(sampler)
    return batches


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_example_once_and_budget_kept(shuffle: bool, seed: int) -> None:
    lengths = random_lengths(500, seed)
    lengths[[7, 99]] = 300  # over the budget on their own
    sampler = TokenBucketBatchSampler(lengths, max_tokens=200, shuffle=shuffle, seed=seed)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        batches = all_batches(sampler)
        assert sorted(i for batch in batches for i in batch) == list(range(500))
        for batch in batches:
            cost = len(batch) * int(lengths[batch].max())
            assert cost <= 200 or len(batch) == 1
        assert [7] in batches and [99] in batches


def test_unshuffled_batches_are_shortest_first_and_fixed() -> None:
    lengths = random_lengths(300, seed=4)
    sampler = TokenBucketBatchSampler(lengths, max_tokens=120)
    batches = all_batches(sampler)
    longest = [int(lengths[b].max()) for b in batches]
    assert longest == sorted(longest)
    sampler.set_epoch(5)
    assert all_batches(sampler) == batches


def test_epochs_reshuffle_and_seed_epoch_fix_the_order() -> None:
    lengths = random_lengths(400, seed=5, high=10)
    sampler = TokenBucketBatchSampler(lengths, max_tokens=64, shuffle=True, seed=7)
    sampler.set_epoch(0)
    epoch0 = all_batches(sampler)
    sampler.set_epoch(1)
    epoch1 = all_batches(sampler)
    assert epoch0 != epoch1
    assert sorted(map(sorted, epoch0)) != sorted(map(sorted, epoch1))  # new tie-breaks too
    again = TokenBucketBatchSampler(lengths, max_tokens=64, shuffle=True, seed=7)
    again.sampler.set_epoch(1)  # where Lightning calls it: dataloader.batch_sampler.sampler
    assert all_batches(again) == epoch1
    other_seed = TokenBucketBatchSampler(lengths, max_tokens=64, shuffle=True, seed=8)
    other_seed.set_epoch(1)
    assert all_batches(other_seed) != epoch1


@pytest.mark.parametrize("replicas", [2, 3, 4])
def test_distributed_shares_are_disjoint_and_cover_everything(replicas: int) -> None:
    lengths = random_lengths(301, seed=6)
    whole = TokenBucketBatchSampler(lengths, 150, shuffle=True, seed=3, num_replicas=1, rank=0)
    whole.set_epoch(2)
    reference = all_batches(whole)
    shares = []
    for rank in range(replicas):
        share = TokenBucketBatchSampler(
            lengths, 150, shuffle=True, seed=3, num_replicas=replicas, rank=rank
        )
        share.set_epoch(2)
        shares.append(all_batches(share))
    assert {len(share) for share in shares} == {-(-len(reference) // replicas)}
    padding = len(shares[0]) * replicas - len(reference)
    # Together the shares are the whole epoch plus its first batches repeated as padding.
    pooled = sorted(tuple(batch) for share in shares for batch in share)
    assert pooled == sorted(tuple(batch) for batch in reference + reference[:padding])
    distinct = [{tuple(batch) for batch in share} for share in shares]
    overlap = sum(len(a & b) for i, a in enumerate(distinct) for b in distinct[i + 1 :])
    assert overlap <= padding


def test_more_processes_than_batches_still_get_one_each() -> None:
    shares = [list(TokenBucketBatchSampler([3, 3], 100, num_replicas=3, rank=r)) for r in range(3)]
    assert shares == [[[0, 1]]] * 3


def test_rank_and_world_size_come_from_torch_distributed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batching.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(batching.dist, "get_world_size", lambda: 2)
    monkeypatch.setattr(batching.dist, "get_rank", lambda: 1)
    lengths = random_lengths(100, seed=8)
    sampler = TokenBucketBatchSampler(lengths, 100)
    assert (sampler.num_replicas, sampler.rank) == (2, 1)
    explicit = TokenBucketBatchSampler(lengths, 100, num_replicas=2, rank=1)
    assert all_batches(sampler) == all_batches(explicit)
    with pytest.raises(ValueError, match="rank 2"):
        TokenBucketBatchSampler(lengths, 100, num_replicas=2, rank=2)


def test_collate_pads_and_places_specials() -> None:
    examples = [
        {"id": 4, "src_ids": [10, 11, 12], "tgt_ids": [20]},
        {"id": 9, "src_ids": [13], "tgt_ids": [21, 22, 23, 24]},
        {"id": 1, "src_ids": [], "tgt_ids": []},
    ]
    batch = collate(examples, pad_id=PAD, bos_id=BOS, eos_id=EOS)
    assert batch.src.tolist() == [[10, 11, 12, EOS], [13, EOS, PAD, PAD], [EOS, PAD, PAD, PAD]]
    assert batch.src_lens.tolist() == [4, 2, 1]
    assert batch.tgt_in.tolist() == [
        [BOS, 20, PAD, PAD, PAD],
        [BOS, 21, 22, 23, 24],
        [BOS, PAD, PAD, PAD, PAD],
    ]
    assert batch.tgt_out.tolist() == [
        [20, EOS, PAD, PAD, PAD],
        [21, 22, 23, 24, EOS],
        [EOS, PAD, PAD, PAD, PAD],
    ]
    assert batch.tgt_lens.tolist() == [2, 5, 1]
    assert batch.ids.tolist() == [4, 9, 1]
    assert all(t.dtype == torch.long for t in (batch.src, batch.tgt_in, batch.src_lens))


def test_pad_ids_inside_a_sentence_are_kept_by_the_lengths() -> None:
    batch = collate([{"id": 0, "src_ids": [PAD, 5], "tgt_ids": [PAD]}], PAD, BOS, EOS)
    assert batch.src_lens.tolist() == [3] and batch.tgt_lens.tolist() == [2]


def test_source_batches_restore_input_order() -> None:
    rng = np.random.default_rng(9)
    inputs = [rng.integers(4, 50, size=int(n)).tolist() for n in rng.integers(0, 30, size=200)]
    restored: list[list[int] | None] = [None] * len(inputs)
    for batch in source_batches(inputs, max_tokens=100, pad_id=PAD, eos_id=EOS):
        assert isinstance(batch, SourceBatch)
        assert batch.src.size(0) * batch.src.size(1) <= 100 or batch.src.size(0) == 1
        for row, length, index in zip(batch.src, batch.src_lens, batch.ids, strict=True):
            assert row[length - 1] == EOS and (row[length:] == PAD).all()
            restored[index] = row[: length - 1].tolist()
    assert restored == inputs


def test_lightning_moves_and_maps_batches() -> None:
    batch = collate([{"id": 0, "src_ids": [5, 6], "tgt_ids": [7]}], PAD, BOS, EOS)
    moved = move_data_to_device(batch, torch.device("cpu"))
    assert isinstance(moved, Batch) and torch.equal(moved.tgt_out, batch.tgt_out)
    assert moved.target_tokens == batch.target_tokens == 2  # counted on the host: 7, EOS
    halved = apply_to_collection(batch, Tensor, lambda t: t.to(torch.int32))
    assert isinstance(halved, Batch)
    assert all(getattr(halved, f).dtype == torch.int32 for f in ("src", "ids", "tgt_lens"))
    source = next(source_batches([[5]], 10, PAD, EOS))
    assert apply_to_collection(source, Tensor, lambda t: t + 1).src.tolist() == [[6, EOS + 1]]


def test_a_pinned_batch_is_the_same_batch_in_page_locked_memory(monkeypatch) -> None:
    """DataLoader(pin_memory=True) calls ``pin_memory`` on each batch: every tensor is pinned
    (here a stand-in, this machine may have no GPU) and the batch stays a Batch."""
    pinned = []
    monkeypatch.setattr(Tensor, "pin_memory", lambda t: pinned.append(t) or t.clone())
    batch = collate([{"id": 0, "src_ids": [5, 6], "tgt_ids": [7]}], PAD, BOS, EOS)
    out = batch.pin_memory()
    assert isinstance(out, Batch) and len(pinned) == 6 and out.target_tokens == 2
    for name in ("src", "src_lens", "ids", "tgt_in", "tgt_out", "tgt_lens"):
        assert torch.equal(getattr(out, name), getattr(batch, name))
        assert getattr(out, name) is not getattr(batch, name)
    source = next(source_batches([[5]], 10, PAD, EOS))
    assert isinstance(source.pin_memory(), SourceBatch) and len(pinned) == 9


class _RecordOrder(pl.LightningModule):
    """Records the examples of each training batch; learns nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.seen: list[list[int]] = []

    def training_step(self, batch: Tensor, batch_idx: int) -> Tensor:
        self.seen.append(batch.tolist())
        return (self.weight * 0).sum()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_lightning_reshuffles_every_epoch() -> None:
    lengths = random_lengths(60, seed=10, high=5)
    sampler = TokenBucketBatchSampler(lengths, max_tokens=20, shuffle=True, seed=1)
    module = _RecordOrder()
    trainer = pl.Trainer(
        max_epochs=2,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, DataLoader(range(60), batch_sampler=sampler))
    expected = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        expected += list(sampler)
    assert module.seen == expected
    assert module.seen[: len(sampler)] != module.seen[len(sampler) :]


def greedy_batches(order: list[int], lengths: np.ndarray, max_tokens: int) -> list[list[int]]:
    """The rule ``cut_batches`` implements, one example at a time."""
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        if current and (len(current) + 1) * int(lengths[index]) > max_tokens:
            batches.append(current)
            current = []
        current.append(index)
    return batches + ([current] if current else [])


@pytest.mark.parametrize("seed", range(6))
def test_cutting_runs_of_equal_length_equals_the_greedy_rule(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, [5, 40, 300][seed % 3], size=int(rng.integers(1, 800)))
    max_tokens = int(rng.choice([1, 7, 64, 200, 1000]))
    order = np.argsort(lengths, kind="stable").tolist()
    bounds = batching.cut_batches(lengths[order], max_tokens)
    cut = [order[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    assert cut == greedy_batches(order, lengths, max_tokens)
    assert batching.cut_batches(np.zeros(0, dtype=np.int64), 10).tolist() == [0]
