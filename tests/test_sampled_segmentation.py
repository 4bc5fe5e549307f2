"""Subword regularization (data.subword_nbest, data.subword_alpha): drawn segmentations of
the same text, a function of (seed, epoch, row), within max_len, for training only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_data import corpus, module

from seq2seq.common.errors import DataError
from seq2seq.inference.batching import ResumableLoader
from seq2seq.training.data.datamodule import TranslationDataModule

SAMPLED = {"subword_nbest": 16, "subword_alpha": 0.1}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sampled")
    for split, n, seed in [("train", 200, 1), ("val", 20, 2)]:
        src, tgt = corpus(n, seed)
        (root / f"{split}.en").write_text("\n".join(src) + "\n", encoding="utf-8")
        (root / f"{split}.de").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    return root


def pairs(loader: ResumableLoader) -> list[tuple[int, list[int], list[int]]]:
    """(row, source ids, target ids without EOS) of every pair, in the loader's order."""
    found = []
    for batch in loader:
        for index, src, src_len, tgt, tgt_len in zip(
            batch.ids.tolist(),
            batch.src,
            batch.src_lens,
            batch.tgt_out,
            batch.tgt_lens,
            strict=True,
        ):
            found.append((index, src[: src_len - 1].tolist(), tgt[: tgt_len - 1].tolist()))
    return found


def loader_at(data: TranslationDataModule, number: int) -> ResumableLoader:
    """The training loader set to epoch ``number``, as Lightning sets it at each epoch."""
    loader = data.train_dataloader()
    loader.batch_sampler.set_epoch(number)
    return loader


def epoch(data: TranslationDataModule, number: int, **state: int) -> list[tuple]:
    loader = loader_at(data, number)
    if state:
        loader.load_state_dict(state)
    return pairs(loader)


def best(data: TranslationDataModule) -> dict[int, tuple[list[int], list[int]]]:
    """Each training row's best segmentation, as the tokenized split holds it."""
    rows, _ = data.tokenized("train")
    examples = rows.__getitems__(list(range(len(rows))))
    return {e["id"]: (e["src_ids"].tolist(), e["tgt_ids"].tolist()) for e in examples}


def test_training_reads_other_segmentations_of_the_same_text(folder: Path, tmp_path: Path) -> None:
    data = module(folder, tmp_path, **SAMPLED)
    plain, drawn = best(data), epoch(data, 0)
    assert sorted(row for row, _, _ in drawn) == sorted(plain)
    vocab = data.vocab
    for row, src, tgt in drawn:
        assert vocab.src.decode(src) == vocab.src.decode(plain[row][0])
        assert vocab.tgt.decode(tgt) == vocab.tgt.decode(plain[row][1])
    changed = [row for row, src, tgt in drawn if (src, tgt) != plain[row]]
    assert len(changed) > len(drawn) // 2, f"only {len(changed)} of {len(drawn)} pairs drawn anew"


def test_a_draw_depends_on_seed_epoch_and_row_alone(folder: Path, tmp_path: Path) -> None:
    data = module(folder, tmp_path, **SAMPLED)
    first = epoch(data, 0)
    assert epoch(module(folder, tmp_path, **SAMPLED), 0) == first
    again = epoch(data, 1)
    assert sorted(again) != sorted(first)  # the same rows, drawn anew
    with_workers = module(folder, tmp_path, **SAMPLED, num_workers=2).train_dataloader()
    assert pairs(with_workers) == first
    with_workers.batch_sampler.set_epoch(1)  # the workers of epoch 0 must not serve epoch 1
    assert pairs(with_workers) == again
    assert epoch(module(folder, tmp_path, **SAMPLED, seed=2), 0) != first


def test_a_resumed_epoch_reads_what_the_whole_epoch_would_have(
    folder: Path, tmp_path: Path
) -> None:
    data = module(folder, tmp_path, **SAMPLED)
    whole, skipped = epoch(data, 3), 4
    loader = loader_at(data, 3)
    batches = [len(batch.ids) for _, batch in zip(range(skipped), loader, strict=False)]
    assert epoch(data, 3, batches_done=skipped) == whole[sum(batches) :]


def test_draws_stay_within_max_len(folder: Path, tmp_path: Path) -> None:
    data = module(folder, tmp_path, subword_nbest=16, subword_alpha=0.0, max_len=8)
    drawn = epoch(data, 0)
    assert max(max(len(src), len(tgt)) for _, src, tgt in drawn) <= 8
    plain = best(data)
    assert any((src, tgt) != plain[row] for row, src, tgt in drawn)


def test_validation_reads_the_best_segmentation(folder: Path, tmp_path: Path) -> None:
    sampled, plain = module(folder, tmp_path, **SAMPLED), module(folder, tmp_path)
    assert pairs(sampled.val_dataloader()) == pairs(plain.val_dataloader())
    assert epoch(plain, 0) == pairs(plain.train_dataloader())  # and nbest 0 draws nothing


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"subword_nbest": -1}, r"data.subword_nbest must be an integer >= 0, got -1"),
        ({**SAMPLED, "subword_alpha": -0.1}, r"data.subword_alpha must be a number >= 0, got -0.1"),
        ({**SAMPLED, "subword_alpha": float("nan")}, r"data.subword_alpha must be .*, got nan"),
        ({**SAMPLED, "spm_model_type": "bpe"}, r"only a unigram vocabulary .* \(not bpe\)"),
    ],
)
def test_bad_settings(tmp_path: Path, setting: dict[str, Any], message: str) -> None:
    with pytest.raises(DataError, match=message):
        module(tmp_path, tmp_path, **setting)
