"""One trained model as a user names it: a checkpoint, a released model's name, or a
transformers MarianMT model (a ``save_pretrained`` folder or a Hub id). What ``fit
--init_from`` starts from; ``seq2seq.load`` opens the same kinds for translating."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from seq2seq.common.errors import UsageError
from seq2seq.inference.checkpoint import Trained, check_checkpoint_path, load_trained
from seq2seq.inference.huggingface import is_huggingface_model, looks_like_hub_id
from seq2seq.inference.released import MODEL_FILE, looks_like_a_name, resolve, sha256

Kind = Literal["checkpoint", "released", "huggingface"]


@dataclass(frozen=True)
class Opened:
    """A trained model and what it was opened from: ``source`` as given, its ``kind``, and
    the sha256 of a released model's file (checked against its manifest first)."""

    trained: Trained
    source: str
    kind: Kind
    sha256: str | None = None

    def describe(self) -> str:
        """``multi30k-en-de (released, sha256 68ccce6e...)``: what a run started from."""
        digest = f", sha256 {self.sha256}" if self.sha256 else ""
        return f"{self.source} ({self.kind}{digest})"


def open_trained(source: str) -> Opened:
    """The model ``source`` names, opened once per process and file (the CLI, the data and
    the task of one ``fit`` read the same object; a file changed since is opened again). A
    CTranslate2 export is refused: it holds no weights that train."""
    path = Path(source)
    if path.is_dir() and (path / "model.bin").is_file():
        raise UsageError(
            f"{source} is a CTranslate2 export, which cannot be trained further: start from "
            "the checkpoint it was exported from"
        )
    if is_huggingface_model(path) or (not path.exists() and looks_like_hub_id(source)):
        return _opened(source, "huggingface", _identity(path / "config.json"))
    if looks_like_a_name(source):
        released = resolve(source)
        return _opened(source, "released", _identity(released.folder / MODEL_FILE))
    return _opened(source, "checkpoint", _identity(check_checkpoint_path(path)))


def _identity(path: Path) -> tuple[str, int, int]:
    """Which file this is now: its resolved path, size and modification time (0s: none)."""
    if not path.is_file():
        return str(path), 0, 0
    stat = path.stat()
    return str(path.resolve()), stat.st_size, stat.st_mtime_ns


@functools.cache
def _opened(source: str, kind: Kind, identity: tuple[str, int, int]) -> Opened:
    """``open_trained``'s work, once per file (``identity``)."""
    if kind == "huggingface":
        from seq2seq.inference.huggingface import load_huggingface

        return Opened(load_huggingface(source), source, kind)
    if kind == "released":
        checkpoint = resolve(source).checkpoint  # its sha256 checked against the manifest
        return Opened(load_trained(checkpoint), source, kind, sha256(checkpoint))
    return Opened(load_trained(identity[0]), source, kind)
