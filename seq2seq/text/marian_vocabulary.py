"""A MarianMT model's own tokenizer, read with SentencePiece alone.

A MarianMT folder (an OPUS-MT model saved by ``save_pretrained``) tokenizes with two
SentencePiece models (``source.spm``, ``target.spm``) whose pieces it numbers by its own
table (``vocab.json``; ``target_vocab.json`` too when the sides do not share one), not by
SentencePiece's ids. ``MarianVocabulary`` encodes and decodes as transformers'
``MarianTokenizer`` does (a leading ``>>lang<<`` code kept whole, a piece missing from the
table read as ``<unk>``, special ids dropped when decoding), so that a model opened from
transformers translates, and trains under ``fit``, on the ids it was trained with. It keeps
the files' bytes: a checkpoint stores them (``to_state``), and ``export --to huggingface``
writes them back unchanged (``write``). Nothing here imports transformers.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sentencepiece as spm

from seq2seq.common.errors import CheckpointError, UsageError
from seq2seq.text.spec import VocabSpec
from seq2seq.text.words import WORD_START

MARIAN_FORMAT = "marian-1"  # version of ``MarianVocabulary.to_state``
SENTENCEPIECE_FILES = ("source.spm", "target.spm")
SHARED_TABLE, TARGET_TABLE, SETTINGS = "vocab.json", "target_vocab.json", "tokenizer_config.json"
# transformers' clean_up_tokenization, applied where the tokenizer's settings ask for it
CLEAN_UP = [(" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
            (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")]  # fmt: skip


class MarianSide:
    """One side of a Marian tokenizer: a SentencePiece model and the table numbering its
    pieces. ``encode`` adds no EOS; ``decode`` skips the special ids."""

    def __init__(
        self,
        model: bytes,
        table: dict[str, int],
        special: frozenset[int],
        decoder: bytes,
        clean_up: bool = False,
    ) -> None:
        """``decoder``: the SentencePiece model that joins pieces back into text (Marian's
        source model when the sides share a table, as transformers decodes); ``clean_up``:
        spaces before punctuation removed, where the tokenizer's settings ask for it."""
        self._model, self._decoder_model, self.clean_up = model, decoder, clean_up
        self._sp = spm.SentencePieceProcessor(model_proto=model)
        self._joiner = spm.SentencePieceProcessor(model_proto=decoder)
        self.table, self.special = table, special
        self._pieces = {i: piece for piece, i in table.items()}
        self._special_pieces = {self._pieces[i] for i in special if i in self._pieces}
        longest_first = sorted(self._special_pieces, key=len, reverse=True)
        # a split around the special tokens written in a text (None: the table has none)
        self._specials = (
            re.compile("(" + "|".join(map(re.escape, longest_first)) + ")")
            if longest_first
            else None
        )
        self._unk = table["<unk>"]

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled as its bytes and table (a SentencePiece processor does not pickle)."""
        args = (self._model, self.table, self.special, self._decoder_model, self.clean_up)
        return MarianSide, args

    @property
    def size(self) -> int:
        return len(self.table)

    def pieces(self, text: str) -> list[str]:
        """The pieces of ``text``: a special token written in it (``</s>``) whole, and in
        each stretch between them a leading ``>>lang<<`` code whole, then SentencePiece's."""
        pieces: list[str] = []
        for stretch in self._specials.split(text) if self._specials else [text]:
            if stretch in self._special_pieces:
                pieces.append(stretch)
                continue
            end = stretch.find("<<") if stretch.startswith(">>") else -1
            if end != -1:
                pieces.append(stretch[: end + 2])
                stretch = stretch[end + 2 :]
            pieces += self._sp.encode(stretch, out_type=str)
        return pieces

    def encode(self, text: str) -> list[int]:
        return [self.table.get(piece, self._unk) for piece in self.pieces(text)]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(text) for text in texts]

    def id_to_piece(self, ids: Sequence[int]) -> list[str]:
        return [self._pieces.get(int(i)) or self._sp.id_to_piece(int(i)) for i in ids]

    def decode(self, ids: Sequence[int]) -> str:
        """``ids`` as text, as the tokenizer's ``decode(ids, skip_special_tokens=True)``."""
        kept = [int(i) for i in ids if int(i) not in self.special]
        text = self._joiner.decode_pieces(self.id_to_piece(kept)).replace(WORD_START, " ")
        text = text.strip()
        for spaced, joined in CLEAN_UP if self.clean_up else []:
            text = text.replace(spaced, joined)
        return text

    def to_bytes(self) -> bytes:
        """Its SentencePiece model (the ids of which are not the model's: see ``table``)."""
        return self._model


def _token(setting: str | dict[str, Any]) -> str:
    """A special token as a tokenizer's settings name it (text, or an AddedToken's fields)."""
    return setting["content"] if isinstance(setting, dict) else setting


@dataclass(frozen=True)
class MarianVocabulary:
    """A MarianMT tokenizer's two sides, the ids the model takes, and the files it was
    read from (``files``: name -> bytes)."""

    src: MarianSide
    tgt: MarianSide
    spec: VocabSpec
    files: dict[str, bytes]

    @property
    def joint(self) -> bool:
        return self.spec.joint

    @classmethod
    def from_files(cls, files: dict[str, bytes], spec: VocabSpec) -> MarianVocabulary:
        """The tokenizer of a MarianMT folder's files, for a model of ``spec``."""
        try:
            source, target = (files[name] for name in SENTENCEPIECE_FILES)
            shared = json.loads(files[SHARED_TABLE])
            settings = json.loads(files.get(SETTINGS, b"{}"))
            separate = bool(settings.get("separate_vocabs"))
            targets = json.loads(files[TARGET_TABLE]) if separate else shared
            special_names = [_token(settings.get(key, default)) for key, default in
                             [("eos_token", "</s>"), ("unk_token", "<unk>"),
                              ("pad_token", "<pad>")]]  # fmt: skip
            clean_up = bool(settings.get("clean_up_tokenization_spaces"))
            sides = []
            for model, table, joiner in [
                (source, shared, source),
                (target, targets, target if separate else source),
            ]:
                special = frozenset(table[name] for name in special_names if name in table)
                sides.append(MarianSide(model, table, special, joiner, clean_up))
        except (KeyError, ValueError, RuntimeError) as error:
            why = f"{type(error).__name__}: {error}"
            raise UsageError(f"not a MarianMT tokenizer ({why})") from None
        return cls(sides[0], sides[1], spec, dict(files))

    @classmethod
    def from_folder(cls, folder: str | Path, spec: VocabSpec) -> MarianVocabulary:
        """The tokenizer ``save_pretrained`` wrote into ``folder``."""
        names = [*SENTENCEPIECE_FILES, SHARED_TABLE, TARGET_TABLE, SETTINGS]
        files = {n: (Path(folder) / n).read_bytes() for n in names if (Path(folder) / n).is_file()}
        return cls.from_files(files, spec)

    def write(self, folder: str | Path) -> None:
        """The tokenizer's files, byte for byte, into ``folder``."""
        for name, content in self.files.items():
            (Path(folder) / name).write_bytes(content)

    def to_state(self) -> dict[str, Any]:
        """Plain bytes, ints and bools, for a checkpoint (``torch.load(weights_only=True)``)."""
        spec = self.spec
        return {"format": MARIAN_FORMAT, "files": dict(self.files),
                "spec": [spec.src_size, spec.tgt_size, spec.pad_id, spec.bos_id, spec.eos_id,
                         spec.joint]}  # fmt: skip

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> MarianVocabulary:
        """Inverse of ``to_state``; a CheckpointError if it is damaged."""
        try:
            src_size, tgt_size, pad, bos, eos, joint = state["spec"]
            spec = VocabSpec(src_size, tgt_size, pad, bos, eos, bool(joint))
            return cls.from_files(state["files"], spec)
        except (KeyError, TypeError, ValueError, UsageError) as error:
            raise CheckpointError(f"checkpoint's MarianMT tokenizer is damaged: {error}") from None

    @property
    def fingerprint(self) -> str:
        """A hash of the files: equal fingerprints, identical tokenization."""
        digest = hashlib.sha256(MARIAN_FORMAT.encode())
        for name in sorted(self.files):
            digest.update(f"{name}:{len(self.files[name])}".encode())
            digest.update(self.files[name])
        return digest.hexdigest()
