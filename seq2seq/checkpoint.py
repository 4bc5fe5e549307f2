"""Loading a trained model from a Lightning checkpoint, safely.

A checkpoint carries everything needed to translate: the weights, the SentencePiece
models (``checkpoint["seq2seq"]["vocab"]``) and the run's YAML config
(``checkpoint["seq2seq"]["config"]``). Every load uses ``torch.load(weights_only=True)``,
so a checkpoint cannot run code while it is read.
"""

from __future__ import annotations

import pickle
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml
from jsonargparse import ArgumentParser

from seq2seq.errors import CheckpointError
from seq2seq.model import EncoderDecoder, VocabSpec
from seq2seq.task import CHECKPOINT_KEY
from seq2seq.tokenizer import Vocabulary

MODEL_PREFIX = "model."  # the task keeps its EncoderDecoder in `self.model`
CHECKPOINT_NAMES = ("last.ckpt", "best.ckpt")  # what a folder given as a checkpoint may hold


@dataclass
class Trained:
    """A model ready to translate, with its vocabulary and the config it was trained with."""

    model: EncoderDecoder
    vocab: Vocabulary
    config: dict[str, Any]

    @property
    def src_lang(self) -> str | None:
        return self.config.get("data", {}).get("src_lang")

    @property
    def tgt_lang(self) -> str | None:
        return self.config.get("data", {}).get("tgt_lang")

    @property
    def length_penalty(self) -> float:
        """The GNMT length penalty the run validated and tested with (1.0 if unset)."""
        return float(self.config.get("model", {}).get("length_penalty", 1.0))


def _first_sentence(message: str) -> str:
    """The first sentence of a torch error, without a C++ location tag like ``[enforce fail]``."""
    message = re.sub(r"^\[[^\]]*\][\s.]*", "", message.strip())
    return message.split("\n")[0].split(". ")[0].rstrip(".")


def _refusal_reason(message: str) -> str:
    """What torch's weights-only unpickler objected to, without its advice to load unsafely."""
    _, found, reason = message.partition("WeightsUnpickler error: ")
    return _first_sentence(reason) if found else "unsupported content"


def _archive_damage(path: Path) -> str | None:
    """Why ``path`` is not an intact torch.save archive (a zip whose records carry CRCs),
    or None if it is. torch.load itself would read a damaged tensor record silently."""
    if not zipfile.is_zipfile(path):  # a cut file has lost the zip's closing directory
        return "not a complete torch.save archive"
    try:
        with zipfile.ZipFile(path) as archive:
            bad_record = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        return str(error)
    return f"{bad_record} fails its CRC check" if bad_record else None


def _holds_a_pickle(path: Path) -> bool:
    """Whether an intact zip file has the ``<name>/data.pkl`` record of a torch.save archive."""
    with zipfile.ZipFile(path) as archive:
        return any(name.endswith("/data.pkl") for name in archive.namelist())


def check_checkpoint_path(path: str | Path) -> Path:
    """``path`` as a Path if it is a file; a CheckpointError if it is missing or a folder
    (naming the checkpoint inside, when there is one). Cheap: run it before any work."""
    path = Path(path)
    if path.is_dir():
        inside = [path / name / kind for name in ("", "checkpoints") for kind in CHECKPOINT_NAMES]
        found = [candidate for candidate in inside if candidate.is_file()]
        hint = f"did you mean {found[0]}?" if found else "it holds no last.ckpt or best.ckpt"
        raise CheckpointError(f"{path} is a folder, not a checkpoint ({hint})")
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    return path


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """The raw checkpoint dictionary, or a CheckpointError saying why it cannot be read."""
    path = check_checkpoint_path(path)
    damage = _archive_damage(path)
    if damage:
        raise CheckpointError(f"cannot read checkpoint {path}: truncated or corrupted ({damage})")
    if not _holds_a_pickle(path):
        raise CheckpointError(
            f"{path} is a zip archive but not a torch checkpoint (it has no data.pkl record)"
        )
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise CheckpointError(
            f"refusing to load {path}: it is not a plain-weights checkpoint and loading it "
            f"could run code ({_refusal_reason(str(error))})"
        ) from error
    except (RuntimeError, EOFError, ValueError, OSError) as error:
        raise CheckpointError(
            f"cannot read checkpoint {path}: truncated or corrupted ({_first_sentence(str(error))})"
        ) from error
    if not isinstance(checkpoint, dict) or CHECKPOINT_KEY not in checkpoint:
        raise CheckpointError(
            f"{path} is not a seq2seq checkpoint (no vocabulary and config inside)"
        )
    return checkpoint


def build_model(config: dict[str, Any], vocab: VocabSpec) -> EncoderDecoder:
    """Instantiate the ``model.model`` block of a run config for ``vocab``."""
    parser = ArgumentParser(exit_on_error=False)
    parser.add_argument("--network", type=Callable[[VocabSpec], EncoderDecoder])
    try:
        parsed = parser.parse_object({"network": config["model"]["model"]})
    except (KeyError, TypeError) as error:
        raise CheckpointError(f"the checkpoint's config has no model block ({error})") from error
    factory = parser.instantiate(parsed).network
    return factory(vocab)


def load_trained(path: str | Path) -> Trained:
    """Rebuild the model of a checkpoint, load its weights and put it in eval mode."""
    checkpoint = read_checkpoint(path)
    stored = checkpoint[CHECKPOINT_KEY]
    if not stored.get("config"):
        raise CheckpointError(f"{path} holds no run config; was it written by `seq2seq fit`?")
    config = yaml.safe_load(stored["config"])
    vocab = Vocabulary.from_state(stored["vocab"])
    model = build_model(config, vocab.spec)
    weights = {
        key[len(MODEL_PREFIX) :]: value
        for key, value in checkpoint["state_dict"].items()
        if key.startswith(MODEL_PREFIX)
    }
    try:
        model.load_state_dict(weights)
    except RuntimeError as error:
        raise CheckpointError(f"weights in {path} do not fit its model config: {error}") from error
    return Trained(model=model.eval(), vocab=vocab, config=config)
