"""SentencePiece tokenizers and vocabularies: round trips, special ids, state, caching."""

from __future__ import annotations

import io
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm
import torch

from seq2seq.common.errors import CheckpointError, DataError
from seq2seq.text.tokenizer import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    Tokenizer,
    VocabSettings,
    Vocabulary,
    load_or_train_vocabulary,
)

ENGLISH = ["the dog runs", "a small cat sits", "on the red house", "under a big blue street"]
RUSSIAN = ["собака бежит", "маленькая кошка сидит", "на красном доме", "под большой синей улицей"]


def sentences(phrases: list[str], n: int = 200, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(phrases, k=rng.randint(1, 3))) for _ in range(n)]


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer.train(sentences(ENGLISH), VocabSettings(vocab_size=300, model_type="unigram"))


UNSEEN = [
    "The quick brown fox jumps over the lazy dog.",
    "Съешь же ещё этих мягких французских булок",
    "我爱自然语言处理。東京タワーに行きました",
    "🚀 launch 🎉🎉 ok 👍🏽 ⚖️",
    "Ünïcödé façade — “quotes” ∑ ∞ ẞ",
]


@pytest.mark.parametrize("text", UNSEEN)
def test_round_trip_keeps_any_script(tokenizer: Tokenizer, text: str) -> None:
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text
    assert UNK_ID not in ids  # byte fallback instead of <unk>


def test_text_is_nfkc_normalized_with_single_spaces(tokenizer: Tokenizer) -> None:
    assert tokenizer.decode(tokenizer.encode("  ½ of  ﬁve\tcats ")) == "1⁄2 of five cats"


def test_unseen_characters_fall_back_to_bytes(tokenizer: Tokenizer) -> None:
    byte_pieces = [p for p in tokenizer.pieces("dog 犬") if p.startswith("<0x")]
    assert byte_pieces == [f"<0x{byte:02X}>" for byte in "犬".encode()]


def test_special_ids_and_no_implicit_bos_eos(tokenizer: Tokenizer) -> None:
    assert tokenizer.id_to_piece([PAD_ID, UNK_ID, BOS_ID, EOS_ID]) == [
        "<pad>",
        "<unk>",
        "<s>",
        "</s>",
    ]
    ids = tokenizer.encode("the dog runs")
    assert ids and not {PAD_ID, BOS_ID, EOS_ID} & set(ids)
    assert tokenizer.decode([BOS_ID, *ids, EOS_ID, PAD_ID, PAD_ID]) == "the dog runs"
    assert tokenizer.id_to_piece(ids) == tokenizer.pieces("the dog runs")
    assert tokenizer.encode_batch(["the dog", "", "red"]) == [
        tokenizer.encode("the dog"),
        [],
        tokenizer.encode("red"),
    ]


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_both_model_types_train_on_a_tiny_corpus(model_type: str) -> None:
    tok = Tokenizer.train(
        sentences(ENGLISH, n=50), VocabSettings(vocab_size=2000, model_type=model_type)
    )
    assert 260 < tok.size <= 2000  # specials + 256 bytes + pieces; the limit is soft
    assert tok.decode(tok.encode(UNSEEN[2])) == UNSEEN[2]


def test_a_word_vocabulary_keeps_a_segmented_corpus_as_it_is() -> None:
    """subword-nmt's output read as it is: each whitespace-separated token one piece."""
    segmented = ["ein@@ e gruppe män@@ ner .", "zwei hund@@ e spielen ."] * 20
    tok = Tokenizer.train(segmented, VocabSettings(vocab_size=300, model_type="word"))
    assert tok.pieces("zwei män@@ ner spielen .") == ["▁zwei", "▁män@@", "▁ner", "▁spielen", "▁."]
    assert tok.decode(tok.encode(segmented[0])) == segmented[0]


def test_training_is_deterministic() -> None:
    text = sentences(ENGLISH + RUSSIAN, seed=3)
    first = Tokenizer.train(text, VocabSettings(vocab_size=400, model_type="unigram")).to_bytes()
    assert (
        Tokenizer.train(text, VocabSettings(vocab_size=400, model_type="unigram")).to_bytes()
        == first
    )


def test_bytes_round_trip(tokenizer: Tokenizer) -> None:
    copy = Tokenizer.from_bytes(tokenizer.to_bytes())
    assert copy.size == tokenizer.size
    assert copy.encode(UNSEEN[0]) == tokenizer.encode(UNSEEN[0])
    with pytest.raises(ValueError, match="SentencePiece"):
        Tokenizer.from_bytes(b"not a model")


def test_too_small_a_vocabulary_is_a_data_error() -> None:
    with pytest.raises(DataError, match="vocabulary of 50 pieces"):
        Tokenizer.train(sentences(ENGLISH), VocabSettings(vocab_size=50, model_type="unigram"))
    with pytest.raises(DataError, match="no non-empty sentences"):
        Tokenizer.train(["", "  "], VocabSettings(vocab_size=300, model_type="unigram"))


@pytest.fixture(scope="module")
def english_russian() -> tuple[list[str], list[str]]:
    return sentences(ENGLISH, seed=1), sentences(RUSSIAN, seed=2)


@pytest.mark.parametrize("joint", [True, False])
def test_vocabulary_state_survives_torch_save(
    english_russian: tuple[list[str], list[str]], joint: bool
) -> None:
    vocab = Vocabulary.train(
        *english_russian, VocabSettings(vocab_size=400, model_type="unigram", joint=joint)
    )
    buffer = io.BytesIO()
    torch.save({"vocab": vocab.to_state()}, buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)["vocab"]
    assert ("tgt" in state) is not joint  # a joint vocabulary stores its model once
    restored = Vocabulary.from_state(state)
    assert restored.spec == vocab.spec
    assert restored.fingerprint == vocab.fingerprint
    assert restored.tgt.encode("синий дом") == vocab.tgt.encode("синий дом")


def test_joint_and_separate_vocabularies(english_russian: tuple[list[str], list[str]]) -> None:
    joint = Vocabulary.train(
        *english_russian, VocabSettings(vocab_size=400, model_type="unigram", joint=True)
    )
    separate = Vocabulary.train(
        *english_russian, VocabSettings(vocab_size=400, model_type="unigram", joint=False)
    )
    spec = joint.spec
    assert (spec.pad_id, spec.bos_id, spec.eos_id, spec.joint) == (0, 2, 3, True)
    assert spec.src_size == spec.tgt_size == joint.src.size
    assert joint.src.encode("дом dog") == joint.tgt.encode("дом dog")
    assert separate.spec.joint is False
    # The separate source model never saw Cyrillic, the target model never saw Latin.
    assert any(p.startswith("<0x") for p in separate.src.pieces("дом"))
    assert not any(p.startswith("<0x") for p in separate.tgt.pieces("дом"))
    assert not any(p.startswith("<0x") for p in joint.src.pieces("дом dog"))
    assert joint.fingerprint != separate.fingerprint


def test_damaged_state_is_a_checkpoint_error(tokenizer: Tokenizer) -> None:
    state = Vocabulary(tokenizer, tokenizer, joint=True).to_state()
    with pytest.raises(CheckpointError, match="format"):
        Vocabulary.from_state({**state, "format": 99})
    with pytest.raises(CheckpointError, match="damaged"):
        Vocabulary.from_state({**state, "src": b"garbage"})
    with pytest.raises(CheckpointError, match="damaged"):
        Vocabulary.from_state({**state, "joint": False})  # no "tgt" model


def test_cache_loads_instead_of_training(
    tmp_path, monkeypatch: pytest.MonkeyPatch, english_russian: tuple[list[str], list[str]]
) -> None:
    calls = []
    train = spm.SentencePieceTrainer.train

    def counting_train(*args, **kwargs):
        calls.append(kwargs["vocab_size"])
        return train(*args, **kwargs)

    monkeypatch.setattr(spm.SentencePieceTrainer, "train", counting_train)
    samples = []

    def sample(size: int, seed: int) -> tuple[list[str], list[str]]:
        samples.append((size, seed))
        return english_russian

    settings = VocabSettings(vocab_size=400, model_type="unigram", joint=False, sample=50)
    first = load_or_train_vocabulary(tmp_path, settings, "text-A", sample)
    assert len(calls) == 2 and samples == [(50, 1)]  # one model per side, one sample
    second = load_or_train_vocabulary(tmp_path, settings, "text-A", sample)
    assert len(calls) == 2 and len(samples) == 1  # the text is not even sampled
    assert second.fingerprint == first.fingerprint and second.joint is False
    (folder,) = (tmp_path / "spm").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["src.model", "tgt.model"]  # no temp files

    load_or_train_vocabulary(tmp_path, settings, "text-B", sample)  # other text: other key
    assert len(calls) == 4
    changes = [{"joint": True}, {"lowercase": True}, {"sample": 0}, {"seed": 2}, {"threads": 2}]
    for change in changes:
        load_or_train_vocabulary(tmp_path, replace(settings, **change), "text-A", sample)
    assert len(calls) == 4 + 1 + 2 * 4  # every setting is part of the key
    assert len(list((tmp_path / "spm").iterdir())) == 7


def test_a_vocabulary_cached_by_an_earlier_version_is_found_again(
    tmp_path: Path, tokenizer: Tokenizer
) -> None:
    """The key of the default settings (one thread) is pinned: changing VocabSettings or
    how the key is made would leave every cached vocabulary behind and train it again."""
    folder = tmp_path / "spm" / "b0dcd0c5d8c6668e0316"  # as the key was made at 96fae3d
    folder.mkdir(parents=True)
    (folder / "joint.model").write_bytes(tokenizer.to_bytes())

    def sample(size: int, seed: int) -> tuple[list[str], list[str]]:
        raise AssertionError("the cached vocabulary was not found: training again")

    vocab = load_or_train_vocabulary(tmp_path, VocabSettings(threads=1), "text-A", sample)
    assert vocab.joint and vocab.src.to_bytes() == tokenizer.to_bytes()


def test_lowercase_model_folds_case_when_encoding_and_keeps_it_after_a_reload() -> None:
    cased_text = [s.capitalize() for s in sentences(ENGLISH)]
    folded = Tokenizer.train(
        cased_text, VocabSettings(vocab_size=300, model_type="unigram", lowercase=True)
    )
    cased = Tokenizer.train(cased_text, VocabSettings(vocab_size=300, model_type="unigram"))
    assert folded.encode("The Dog RUNS") == folded.encode("the dog runs")
    assert folded.decode(folded.encode("On The Red House")) == "on the red house"
    assert cased.decode(cased.encode("On The Red House")) == "On The Red House"
    reloaded = Tokenizer.from_bytes(folded.to_bytes())  # the rule travels inside the model
    assert reloaded.decode(reloaded.encode("A Small Cat")) == "a small cat"


@pytest.mark.parametrize("text", [*UNSEEN, "the dog runs on the red house"])
def test_a_drawn_segmentation_spells_the_same_text(tokenizer: Tokenizer, text: str) -> None:
    ids = tokenizer.encode(text)
    rng = np.random.default_rng(0)
    for _ in range(5):
        assert tokenizer.decode(tokenizer.sample(ids, 16, 0.1, rng)) == text
    assert tokenizer.sample(ids, 1, 0.1, rng) == ids  # the best alone
    assert tokenizer.sample([], 16, 0.1, rng) == []


def test_draws_follow_the_likelihoods_to_the_power_alpha(tokenizer: Tokenizer) -> None:
    """Among the two best segmentations, each is drawn in proportion to its likelihood to
    the power alpha (the sum of its pieces' log probabilities, times alpha)."""
    text = "the dog runs on the red house"
    best, second = tokenizer._sp.nbest_encode(text, nbest_size=2)
    scores = [sum(tokenizer.piece_scores[i] for i in ids) for ids in (best, second)]
    rng, alpha, draws = np.random.default_rng(1), 0.5, 4000
    drawn = [tokenizer.sample(best, 2, alpha, rng) for _ in range(draws)]
    expected = 1 / (1 + np.exp(alpha * (scores[1] - scores[0])))
    assert drawn.count(best) / draws == pytest.approx(expected, abs=0.03)
    assert drawn.count(best) + drawn.count(second) == draws
