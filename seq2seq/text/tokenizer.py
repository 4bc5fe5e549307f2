"""SentencePiece vocabularies: training, serialization, encode/decode, and an on-disk cache.

Every model reserves the same special ids (pad 0, unk 1, bos 2, eos 3) and falls back
to UTF-8 bytes for characters it never saw, so no text is lost: ``decode(encode(t))``
gives back ``t`` after SentencePiece's normalization (NFKC, runs of whitespace collapsed,
leading and trailing whitespace removed).

A trained ``Vocabulary`` is cached under ``cache_dir/spm/<key>/``, the key hashing the
training settings and what identifies the training text (never the text itself), so a
second run loads instead of training, whatever the corpus size.
"""

from __future__ import annotations

import functools
import hashlib
import io
import itertools
import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from operator import methodcaller
from pathlib import Path
from typing import Any, Literal

import numpy as np
import sentencepiece as spm

from seq2seq.common.atomic import write_atomically
from seq2seq.common.errors import CheckpointError, DataError
from seq2seq.common.interruptible import call_interruptibly
from seq2seq.text.marian_vocabulary import MARIAN_FORMAT, MarianVocabulary
from seq2seq.text.spec import VocabSpec

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
# "word": the text is segmented already (e.g. by subword-nmt); each whitespace-separated
# token of the training text is one piece
ModelType = Literal["unigram", "bpe", "word"]
STATE_FORMAT = 1  # version of ``Vocabulary.to_state``; also part of every cache key

log = logging.getLogger("seq2seq")


def _train_model(text: list[str], options: dict[str, Any]) -> bytes:
    """A SentencePiece model trained on ``text`` with ``options``, serialized."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_writer=model, **options)
    return model.getvalue()


@dataclass(frozen=True)
class VocabSettings:
    """How a SentencePiece vocabulary is made (the ``data.*`` options), passed whole.

    ``vocab_size`` is a soft limit: a tiny corpus yields fewer pieces (see ``Tokenizer.size``).
    ``max_piece_length`` caps a piece's characters (SentencePiece's
    ``max_sentencepiece_length``): a small cap splits long compounds into pieces.
    ``lowercase`` makes the model fold case when it encodes (SentencePiece's ``nmt_nfkc_cf``
    normalization, stored in the model): it reads and writes lowercased text, at training
    and at translation time alike. ``joint``: one model for both sides. The training split's
    vocabulary is trained on ``sample`` pairs drawn at random with ``seed`` (0, or a sample
    at least as large as the split: every pair, in order), with ``threads`` threads; the
    pieces depend on the thread count.
    """

    vocab_size: int = 8000
    model_type: ModelType = "unigram"
    joint: bool = True
    character_coverage: float = 1.0
    max_piece_length: int = 16
    lowercase: bool = False
    sample: int = 100_000
    seed: int = 1
    threads: int = 1


class Tokenizer:
    """One SentencePiece model. ``encode`` adds no BOS/EOS; ``decode`` skips special ids."""

    def __init__(self, model: bytes) -> None:
        """``model``: a serialized SentencePiece model proto (what ``to_bytes`` returns)."""
        try:
            self._sp = spm.SentencePieceProcessor(model_proto=model)
        except RuntimeError as error:
            raise ValueError("not a serialized SentencePiece model") from error
        specials = (self._sp.pad_id(), self._sp.unk_id(), self._sp.bos_id(), self._sp.eos_id())
        if specials != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise ValueError(
                f"SentencePiece model has special ids {specials}, expected (0, 1, 2, 3)"
            )
        self._model = model

    def __reduce__(self) -> tuple[type[Tokenizer], tuple[bytes]]:
        """Pickled as its model's bytes (a SentencePiece processor does not pickle)."""
        return Tokenizer, (self._model,)

    @classmethod
    def train(cls, sentences: Iterable[str], settings: VocabSettings) -> Tokenizer:
        """Train in memory on ``sentences`` (``settings.joint``, ``sample`` and ``seed`` are
        not its business). Empty sentences are skipped; the result is deterministic for a
        given ``settings.threads``. SentencePiece trains on a worker thread, so that Ctrl-C
        or SIGTERM ends the training at once (``seq2seq.common.interruptible``).
        """
        text = [s for s in sentences if s.strip()]
        if not text:
            raise DataError("cannot train a SentencePiece vocabulary: no non-empty sentences")
        options = {
            "vocab_size": settings.vocab_size,
            "model_type": settings.model_type,
            "character_coverage": settings.character_coverage,
            "max_sentencepiece_length": settings.max_piece_length,
            "normalization_rule_name": "nmt_nfkc_cf" if settings.lowercase else "nmt_nfkc",
            "byte_fallback": True,
            "hard_vocab_limit": False,
            "pad_id": PAD_ID,
            "unk_id": UNK_ID,
            "bos_id": BOS_ID,
            "eos_id": EOS_ID,
            "input_sentence_size": 0,  # every sentence given: the caller samples
            "num_threads": settings.threads,
            "minloglevel": 2,  # errors only: they become DataErrors
        }
        try:
            model = call_interruptibly(_train_model, text, options)
        except RuntimeError as error:
            reason = str(error).strip().rsplit("] ", 1)[-1]  # drop "INTERNAL: file.cc(1) [...]"
            raise DataError(
                f"SentencePiece cannot train a {settings.model_type} vocabulary of "
                f"{settings.vocab_size} pieces "
                f"on this text: {reason}"
            ) from error
        return cls(model)

    @classmethod
    def from_bytes(cls, model: bytes) -> Tokenizer:
        """The tokenizer of a serialized model (raises ValueError on anything else)."""
        return cls(model)

    def to_bytes(self) -> bytes:
        """The serialized model proto, as stored in checkpoints and in the cache."""
        return self._model

    @property
    def size(self) -> int:
        """Number of pieces, specials and byte pieces included."""
        return self._sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return self._sp.encode(text)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return self._sp.encode(list(texts))

    def decode(self, ids: Sequence[int]) -> str:
        return self._sp.decode([int(i) for i in ids])

    def sample(
        self, ids: Sequence[int], nbest: int, alpha: float, rng: np.random.Generator
    ) -> list[int]:
        """A segmentation of the text ``ids`` spell, drawn with ``rng`` from its ``nbest``
        most likely ones (unigram models), each with probability proportional to its
        likelihood to the power ``alpha`` (Kudo, 2018)."""
        candidates = self._sp.nbest_encode(self.decode(ids), nbest_size=nbest)
        lengths = [len(c) for c in candidates]
        if not sum(lengths):  # empty text: its one segmentation is empty
            return []
        pieces = np.fromiter(itertools.chain.from_iterable(candidates), np.int64, sum(lengths))
        starts = np.cumsum(lengths, dtype=np.int64) - lengths  # where each candidate starts
        log_p = alpha * np.add.reduceat(self.piece_scores[pieces], starts)  # [candidates]
        p = np.exp(log_p - log_p.max())
        return candidates[rng.choice(len(candidates), p=p / p.sum())]

    @functools.cached_property
    def piece_scores(self) -> np.ndarray:
        """Each piece's log probability in a unigram model, by id [size]."""
        return np.array([self._sp.get_score(i) for i in range(self.size)])

    def pieces(self, text: str) -> list[str]:
        """The pieces ``encode`` would give, as strings (e.g. ``['▁Hel', 'lo']``)."""
        return self._sp.encode(text, out_type=str)

    def id_to_piece(self, ids: Sequence[int]) -> list[str]:
        return [self._sp.id_to_piece(int(i)) for i in ids]


@dataclass(frozen=True)
class Vocabulary:
    """The source and target tokenizers; ``joint`` means one model (the same ids) for both."""

    src: Tokenizer
    tgt: Tokenizer
    joint: bool

    def __post_init__(self) -> None:
        if self.joint and self.src.to_bytes() != self.tgt.to_bytes():
            raise ValueError("a joint vocabulary needs the same model on both sides")

    @classmethod
    def train(
        cls, src_texts: Sequence[str], tgt_texts: Sequence[str], settings: VocabSettings
    ) -> Vocabulary:
        """One model on source+target text (``settings.joint``) or one model per side."""
        if settings.joint:
            both = Tokenizer.train([*src_texts, *tgt_texts], settings)
            return cls(both, both, joint=True)
        src = Tokenizer.train(src_texts, settings)
        tgt = Tokenizer.train(tgt_texts, settings)
        return cls(src, tgt, joint=False)

    @property
    def spec(self) -> VocabSpec:
        return VocabSpec(
            src_size=self.src.size,
            tgt_size=self.tgt.size,
            pad_id=PAD_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            joint=self.joint,
        )

    def to_state(self) -> dict[str, Any]:
        """Plain bytes/bool/int, safe for ``torch.load(weights_only=True)``.

        A joint vocabulary stores its model once, under ``"src"``.
        """
        state: dict[str, Any] = {
            "format": STATE_FORMAT,
            "joint": self.joint,
            "src": self.src.to_bytes(),
        }
        if not self.joint:
            state["tgt"] = self.tgt.to_bytes()
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Vocabulary:
        """Inverse of ``to_state``; a CheckpointError if the state is not one."""
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise CheckpointError(
                f"unknown vocabulary format in checkpoint (expected format {STATE_FORMAT})"
            )
        joint = bool(state.get("joint"))
        try:
            src = Tokenizer.from_bytes(state["src"])
            tgt = src if joint else Tokenizer.from_bytes(state["tgt"])
        except (KeyError, TypeError, ValueError) as error:
            raise CheckpointError(f"checkpoint vocabulary is damaged: {error}") from error
        return cls(src, tgt, joint=joint)

    @property
    def fingerprint(self) -> str:
        """A hash of the models: equal fingerprints, identical tokenization."""
        digest = hashlib.sha256(b"joint" if self.joint else b"separate")
        for model in (self.src.to_bytes(), self.tgt.to_bytes()):
            digest.update(len(model).to_bytes(8, "little"))
            digest.update(model)
        return digest.hexdigest()


def load_or_train_vocabulary(
    cache_dir: str | Path,
    settings: VocabSettings,
    text_key: str,
    sample: Callable[[int, int], tuple[Sequence[str], Sequence[str]]],
) -> Vocabulary:
    """The vocabulary of ``settings`` for the text ``text_key`` identifies, cached under
    ``cache_dir/spm/<key>/``; on a miss it trains on ``sample(settings.sample, settings.seed)``
    (source and target sentences). The key covers the settings and ``text_key``, never the
    text itself, so a hit reads nothing but the models.
    """
    key_fields = {"format": STATE_FORMAT, "text": text_key, **asdict(settings)}
    key = hashlib.sha256(json.dumps(key_fields, sort_keys=True).encode()).hexdigest()[:20]
    folder = Path(cache_dir) / "spm" / key
    names = ["joint.model"] if settings.joint else ["src.model", "tgt.model"]
    paths = [folder / name for name in names]
    if all(path.is_file() for path in paths):
        models = [Tokenizer.from_bytes(path.read_bytes()) for path in paths]
        log.info("loaded the SentencePiece vocabulary from %s", folder)
        return Vocabulary(models[0], models[-1], joint=settings.joint)
    started = time.perf_counter()
    src_texts, tgt_texts = sample(settings.sample, settings.seed)
    log.info(
        "training a %s SentencePiece vocabulary on %d sentence pairs (drawn in %.1f s) "
        "with %d threads",
        settings.model_type,
        len(src_texts),
        time.perf_counter() - started,
        settings.threads,
    )
    started = time.perf_counter()
    vocab = Vocabulary.train(src_texts, tgt_texts, settings)
    folder.mkdir(parents=True, exist_ok=True)
    for path, tokenizer in zip(paths, (vocab.src, vocab.tgt), strict=False):
        write_atomically(path, methodcaller("write", tokenizer.to_bytes()))
    log.info(
        "trained the vocabulary (%s) in %.1f s, saved in %s",
        f"{vocab.src.size} pieces" if vocab.joint else f"{vocab.src.size}/{vocab.tgt.size} pieces",
        time.perf_counter() - started,
        folder,
    )
    return vocab


# What a model's text goes through: seq2seq's own SentencePiece models, or the tokenizer of
# a MarianMT model it was opened from (its own piece table: text/marian_vocabulary.py).
AnyVocabulary = Vocabulary | MarianVocabulary


def vocabulary_from_state(state: dict[str, Any]) -> AnyVocabulary:
    """The vocabulary a checkpoint stored (``to_state`` of either kind)."""
    if isinstance(state, dict) and state.get("format") == MARIAN_FORMAT:
        return MarianVocabulary.from_state(state)
    return Vocabulary.from_state(state)
