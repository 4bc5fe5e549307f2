"""The data module: lazy vocabulary, filtering, loaders, and the on-disk caches."""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from seq2seq.batch import Batch
from seq2seq.common.errors import DataError
from seq2seq.text.tokenizer import Tokenizer, VocabSettings
from seq2seq.training.data import datamodule as data_module
from seq2seq.training.data import encode_pool, sources, tokenized
from seq2seq.training.data.datamodule import TranslationDataModule
from seq2seq.training.data.tokenized import TokenizedRows

WORDS = ["the", "dog", "cat", "runs", "sleeps", "red", "small", "on", "a", "house", "street"]
WÖRTER = ["der", "Hund", "Katze", "läuft", "schläft", "rot", "klein", "auf", "ein", "Haus"]
MAX_LEN = 20


def sentence(rng: random.Random, words: list[str], n: int) -> str:
    return " ".join(rng.choices(words, k=n))


def corpus(n: int, seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    pairs = [
        (sentence(rng, WORDS, k), sentence(rng, WÖRTER, k)) for k in rng.choices(range(2, 9), k=n)
    ]
    return [s for s, _ in pairs], [t for _, t in pairs]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """train: 300 pairs, 2 with an empty side, 3 far over MAX_LEN; val: 40 with both kinds."""
    root = tmp_path_factory.mktemp("corpus")
    for split, n, seed in [("train", 300, 1), ("val", 40, 2), ("test", 30, 3)]:
        src, tgt = corpus(n, seed)
        src[5], tgt[9] = "", "   "
        if split == "train":
            for i in (20, 21, 22):
                src[i] = " ".join(["dog"] * 3 * MAX_LEN)
        else:
            tgt[3] = " ".join(["Hund"] * 3 * MAX_LEN)
        (root / f"{split}.en").write_text("\n".join(src) + "\n", encoding="utf-8")
        (root / f"{split}.de").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    return root


def column(rows: TokenizedRows, name: str) -> list:
    """One field of every row, ids as lists."""
    values = [row[name] for row in rows.__getitems__(list(range(len(rows))))]
    return [v.tolist() if hasattr(v, "tolist") else v for v in values]


def module(source: str | Path, cache: Path, **settings: Any) -> TranslationDataModule:
    options = {"src_lang": "en", "tgt_lang": "de", "vocab_size": 400, "max_tokens": 200}
    options.update(max_len=MAX_LEN, cache_dir=str(cache))
    return TranslationDataModule(str(source), **{**options, **settings})


def test_vocab_is_ready_before_setup(folder: Path, tmp_path: Path) -> None:
    data = module(folder, tmp_path, joint_vocab=False)
    spec = data.vocab.spec  # what the CLI links into the model right after __init__
    assert spec.joint is False and spec.src_size > 260 and spec.tgt_size > 260
    assert (spec.pad_id, spec.bos_id, spec.eos_id) == (0, 2, 3)
    assert "▁Hund" in data.vocab.tgt.pieces("Hund") and "▁Hund" not in data.vocab.src.pieces("Hund")


def test_training_pairs_are_filtered_and_reported(
    folder: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = module(folder, tmp_path)
    with caplog.at_level(logging.INFO, logger="seq2seq"):
        data.setup("fit")
    assert "train: kept 295 of 300 pairs (2 empty, 3 over max_len=20)" in caplog.messages
    assert "val: 40 pairs" in caplog.messages
    rows, _ = data.tokenized("train")
    assert len(rows) == 295
    assert not {5, 9, 20, 21, 22} & set(column(rows, "id"))


def test_loaders_cover_their_splits(folder: Path, tmp_path: Path) -> None:
    data = module(folder, tmp_path, eval_max_tokens=150)
    data.setup("fit")
    data.setup("test")
    train_ids = []
    for batch in data.train_dataloader():
        assert isinstance(batch, Batch)
        assert batch.src.numel() <= 200 and batch.tgt_in.numel() <= 200
        assert batch.tgt_lens.max() == batch.tgt_in.size(1) == batch.tgt_out.size(1)
        train_ids += batch.ids.tolist()
    assert sorted(train_ids) == sorted(column(data.tokenized("train")[0], "id"))
    for split, loader in [("val", data.val_dataloader()), ("test", data.test_dataloader())]:
        batches = list(loader)
        ids = [i for batch in batches for i in batch.ids.tolist()]
        assert sorted(ids) == list(range(len(data.references(split))))  # nothing filtered
        over = [b for b in batches if b.src.numel() > 150 or b.tgt_in.numel() > 150]
        assert all(b.src.size(0) == 1 for b in over)


def test_batches_are_pinned_only_for_a_cuda_device(folder: Path, tmp_path: Path) -> None:
    """Page-locked batches let Lightning's non-blocking copy to a GPU run asynchronously;
    on the CPU pinning would only cost."""
    data = module(folder, tmp_path)
    data.setup("fit")
    for device, pinned in [(None, False), ("cpu", False), ("cuda", True)]:
        root = SimpleNamespace(root_device=torch.device(device)) if device else None
        data.trainer = SimpleNamespace(strategy=root) if root else None
        assert data.train_dataloader().pin_memory is pinned
        assert data.val_dataloader().pin_memory is pinned


def test_batches_hold_the_tokenized_text(folder: Path, tmp_path: Path) -> None:
    data = module(folder, tmp_path)
    batch = next(iter(data.val_dataloader()))
    vocab, eos = data.vocab, data.vocab.spec.eos_id
    for row, length, tgt_out, tgt_len, index in zip(
        batch.src, batch.src_lens, batch.tgt_out, batch.tgt_lens, batch.ids.tolist(), strict=True
    ):
        assert row[: length - 1].tolist() == vocab.src.encode(data.sources("val")[index])
        assert tgt_out[tgt_len - 1] == eos
        reference = " ".join(data.references("val")[index].split())
        assert vocab.tgt.decode(tgt_out[: tgt_len - 1].tolist()) == reference


def test_second_run_reads_both_caches(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded: list[int] = []
    encode = encode_pool.encode_pairs

    def counting(pairs: tuple[list[str], list[str]], *models: Any) -> Any:
        encoded.append(len(pairs[0]))
        return encode(pairs, *models)

    monkeypatch.setattr(encode_pool, "encode_pairs", counting)
    first = module(folder, tmp_path)
    first.setup("fit")
    assert sum(encoded) == 300 + 40  # train and val
    expected = {split: column(first.tokenized(split)[0], "src_ids") for split in ("train", "val")}

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("tokenized or trained again")

    monkeypatch.setattr(Tokenizer, "train", fail)
    monkeypatch.setattr(encode_pool, "encode_pairs", fail)
    second = module(folder, tmp_path)
    second.setup("fit")
    assert second.vocab.fingerprint == first.vocab.fingerprint
    for split, src_ids in expected.items():
        assert column(second.tokenized(split)[0], "src_ids") == src_ids


def test_tokenizing_on_worker_processes_gives_the_same_rows(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = module(folder, tmp_path / "one", num_proc=1)
    rows, lengths = one.tokenized("train")
    monkeypatch.setattr(data_module, "PARALLEL_MIN_PAIRS", 1)
    monkeypatch.setattr(tokenized, "BATCH_PAIRS", 7)  # many batches in flight, in order
    monkeypatch.setattr(sources, "RECORD_BATCH_ROWS", 13)  # text read over many record batches
    two = module(folder, tmp_path / "two", num_proc=2)
    two_rows, two_lengths = two.tokenized("train")
    for name in ("id", "src_ids", "tgt_ids"):
        assert column(two_rows, name) == column(rows, name)
    assert two_lengths.tolist() == lengths.tolist()
    assert len(two.text("train").rows.data.to_batches()) > 20


def test_changing_one_line_invalidates_the_caches(folder: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for path in folder.iterdir():
        (corpus / path.name).write_bytes(path.read_bytes())
    first = module(corpus, tmp_path / "cache")
    first.setup("fit")
    lines = (corpus / "train.de").read_text(encoding="utf-8").split("\n")
    lines[0] = "Haus Haus Haus"
    (corpus / "train.de").write_text("\n".join(lines), encoding="utf-8")
    os.utime(corpus / "train.de", ns=(1, 1))  # even with a time that goes back
    second = module(corpus, tmp_path / "cache")
    second.setup("fit")
    assert second.text("train").key != first.text("train").key
    assert second.text("val").key == first.text("val").key
    assert second.text("train").rows[0]["tgt"] == "Haus Haus Haus"
    rows, _ = second.tokenized("train")
    assert rows[0]["tgt_ids"].tolist() == second.vocab.tgt.encode("Haus Haus Haus")
    assert len(list((tmp_path / "cache" / "spm").iterdir())) == 2  # trained again


def test_sentencepiece_trains_on_a_sample_of_the_size_asked(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given: list[int] = []
    train = Tokenizer.train.__func__

    def counting(cls: type[Tokenizer], sentences: list[str], *args: Any) -> Tokenizer:
        given.append(len(sentences))
        return train(cls, sentences, *args)

    monkeypatch.setattr(Tokenizer, "train", classmethod(counting))
    sampled = module(folder, tmp_path / "a", spm_sample=120, joint_vocab=False)
    assert sampled.vocab.spec.joint is False and given == [120, 120]  # per side
    seed_two = module(folder, tmp_path / "b", spm_sample=120, joint_vocab=False, seed=2)
    assert seed_two.vocab.fingerprint != sampled.vocab.fingerprint  # another sample
    everything = module(folder, tmp_path / "c", spm_sample=10_000)  # more than the corpus
    assert everything.vocab.spec.joint and given[-1] == 2 * 300  # both sides, every pair
    assert module(folder, tmp_path / "d", spm_sample=0).vocab.fingerprint == (
        everything.vocab.fingerprint
    )


def test_empty_or_fully_filtered_training_split(tmp_path: Path) -> None:
    (tmp_path / "train.en").write_text("")
    (tmp_path / "train.de").write_text("")
    with pytest.raises(DataError, match=r"train split is empty: .*train\.en \+ .*train\.de"):
        _ = module(tmp_path, tmp_path / "cache").vocab
    (tmp_path / "train.en").write_text("a b c d e\n\n")
    (tmp_path / "train.de").write_text("f g h i j\nk\n")
    data = module(tmp_path, tmp_path / "cache", max_len=2)
    with pytest.raises(DataError, match=r"no training pairs left .*\(1 empty, 1 over max_len=2\)"):
        data.setup("fit")


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"max_tokens": 0}, "data.max_tokens must be an integer >= 1, got 0"),
        ({"eval_max_tokens": -5}, "data.eval_max_tokens must be an integer >= 1, got -5"),
        ({"spm_model_type": "wordpiece"}, "unigram, bpe or word"),
        ({"character_coverage": 1.5}, r"character_coverage must be a number in \(0, 1\], got 1.5"),
        ({"character_coverage": 0.0}, r"character_coverage must be a number in \(0, 1\], got 0.0"),
        ({"spm_sample": -1}, "data.spm_sample must be an integer >= 0, got -1"),
        ({"num_proc": 0}, "data.num_proc must be an integer >= 1, got 0"),
    ],
)
def test_bad_settings(tmp_path: Path, setting: dict[str, Any], message: str) -> None:
    with pytest.raises(DataError, match=message):
        module(tmp_path, tmp_path, **setting)


def test_loader_workers_read_the_same_rows(folder: Path, tmp_path: Path) -> None:
    in_process = module(folder, tmp_path)
    with_workers = module(folder, tmp_path, num_workers=2)
    batches = [(b.ids.tolist(), b.src.tolist()) for b in in_process.train_dataloader()]
    assert [(b.ids.tolist(), b.src.tolist()) for b in with_workers.train_dataloader()] == batches
    rows, _ = in_process.tokenized("train")
    with pytest.raises(IndexError):
        rows.select(np.array([10_000]))[0]


def test_an_interrupted_tokenizing_leaves_no_files(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: Any) -> Any:
        raise KeyboardInterrupt

    data = module(folder, tmp_path)
    _ = data.vocab
    monkeypatch.setattr(encode_pool, "encode_pairs", interrupted)
    with pytest.raises(KeyboardInterrupt):
        data.tokenized("train")
    assert not list((tmp_path / "tokens").iterdir())
    monkeypatch.undo()
    rows, _ = data.tokenized("train")  # and the next run starts afresh
    assert len(rows) == 295


def test_the_data_options_users_write_make_the_vocabulary_settings(tmp_path: Path) -> None:
    """The config keys map onto VocabSettings, whose fields make the vocabulary's cache key
    (pinned in test_tokenizer): the same data.* options find the same cached vocabulary."""
    options = {"vocab_size": 500, "spm_model_type": "bpe", "joint_vocab": False,
               "character_coverage": 0.9995, "max_piece_length": 8, "lowercase": True,
               "spm_sample": 0, "seed": 3, "spm_threads": 2}  # fmt: skip
    data = TranslationDataModule("corpus", "en", "de", cache_dir=str(tmp_path), **options)
    assert data.vocab_settings == VocabSettings(500, "bpe", False, 0.9995, 8, True, 0, 3, 2)


@pytest.mark.parametrize("model_type", ["unigram", "bpe", "word"])
def test_every_sentencepiece_model_type_is_accepted(model_type: str, tmp_path: Path) -> None:
    data = TranslationDataModule("corpus", "en", "de", cache_dir=str(tmp_path),
                                 spm_model_type=model_type)  # fmt: skip
    assert data.vocab_settings.model_type == model_type


def test_the_same_language_on_both_sides_is_refused_unless_asked_for(
    folder: Path, tmp_path: Path
) -> None:
    with pytest.raises(DataError, match="both 'en': .* set data.allow_same_language true"):
        TranslationDataModule(str(folder), "en", "en", cache_dir=str(tmp_path))
    data = module(folder, tmp_path, tgt_lang="en", allow_same_language=True)
    data.setup("fit")
    rows, _ = data.tokenized("train")
    assert column(rows, "src_ids") == column(rows, "tgt_ids")


def test_a_token_budget_below_the_longest_pair_warns_once_with_the_batch_size(
    folder: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = module(folder, tmp_path, max_tokens=1)
    with caplog.at_level(logging.WARNING, logger="seq2seq"):
        data.setup("fit")
        loader = data.train_dataloader()
        data.train_dataloader()  # Lightning may ask again (reload_dataloaders_every_n_epochs)
    assert [m for m in caplog.messages if "max_tokens" in m] == [
        "data.max_tokens=1 is below the 21 positions of the longest training pair "
        "data.max_len=20 allows: every pair over 1 positions is a batch of its own; the 295 "
        "training pairs make 295 batches of 1.0 pairs on average"
    ]
    assert {len(batch.ids) for batch in loader} == {1}
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="seq2seq"):
        module(folder, tmp_path, max_tokens=21).train_dataloader()  # holds the longest
    assert not [m for m in caplog.messages if "max_tokens" in m]
