"""The checkpoint: its format, its payload, loading a trained model from it, and averaging.

A checkpoint is a ``torch.save`` archive of Lightning's dictionary (``state_dict``,
``epoch``, ``global_step``, optimizer states...) plus the toolkit's ``Payload`` under
``CHECKPOINT_KEY``: the SentencePiece models, the run's YAML config and the search it was
configured to test with, so that a checkpoint alone is enough to translate. Every load uses
``torch.load(weights_only=True)``, so a checkpoint cannot run code while it is read; every
save is atomic.

This module sits below the training code: it imports nothing from Lightning, torchmetrics
or ``datasets``, and the task (which fills the payload) imports it, never the reverse.
"""

from __future__ import annotations

import pickle
import re
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import torch
import yaml
from jsonargparse import ArgumentParser

from seq2seq.common.atomic import remove_stale_temps, write_atomically
from seq2seq.common.errors import CheckpointError
from seq2seq.inference.search import SearchSettings
from seq2seq.inference.upgrade import upgraded_payload
from seq2seq.model import EncoderDecoder, VocabSpec
from seq2seq.text.tokenizer import AnyVocabulary, vocabulary_from_state

CHECKPOINT_KEY = "seq2seq"  # where a checkpoint keeps the toolkit's Payload


class Payload(TypedDict, total=False):
    """What a checkpoint keeps under ``CHECKPOINT_KEY``, beside Lightning's own entries."""

    vocab: dict[str, Any]  # the vocabulary's to_state()
    config: str | None  # the run's YAML config, as LightningCLI dumped it
    search: dict[str, Any]  # asdict(SearchSettings): the run's test search, the commands' default
    rng: dict[str, Any]  # torch and Python random states, to resume a run where it stopped
    skipped_batches: int  # training batches skipped for a non-finite loss so far
    precision: str  # what the run trained in (Lightning's name, e.g. 32-true, bf16-mixed)
    averaged_from: list[str]  # the checkpoints `seq2seq average` took the mean of


MODEL_PREFIX = "model."  # the task keeps its EncoderDecoder in `self.model`
CHECKPOINT_NAMES = ("last.ckpt", "best.ckpt")  # what a folder given as a checkpoint may hold


@dataclass
class Trained:
    """A model ready to translate, with its vocabulary, the config it was trained with and
    the search that config set for its test (what the commands start from)."""

    model: EncoderDecoder
    vocab: AnyVocabulary
    config: dict[str, Any]
    search: SearchSettings = SearchSettings()

    @property
    def src_lang(self) -> str | None:
        return self.config.get("data", {}).get("src_lang")

    @property
    def tgt_lang(self) -> str | None:
        return self.config.get("data", {}).get("tgt_lang")


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
    """Instantiate the ``model.network`` block of a run config for ``vocab``."""
    parser = ArgumentParser(exit_on_error=False)
    parser.add_argument("--network", type=Callable[[VocabSpec], EncoderDecoder])
    try:
        parsed = parser.parse_object({"network": config["model"]["network"]})
    except (KeyError, TypeError) as error:
        raise CheckpointError(f"the checkpoint's config has no model block ({error})") from error
    factory = parser.instantiate(parsed).network
    return factory(vocab)


def load_trained(path: str | Path) -> Trained:
    """Rebuild the model of a checkpoint, load its weights and put it in eval mode (a
    checkpoint of an earlier version read as this version writes it: ``upgrade.py``)."""
    checkpoint = read_checkpoint(path)
    stored = upgraded_payload(checkpoint[CHECKPOINT_KEY])
    if not stored.get("config"):
        raise CheckpointError(f"{path} holds no run config; was it written by `seq2seq fit`?")
    config = yaml.safe_load(stored["config"])
    vocab = vocabulary_from_state(stored["vocab"])
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
    search = SearchSettings(**stored["search"])
    return Trained(model=model.eval(), vocab=vocab, config=config, search=search)


def save_checkpoint(checkpoint: dict[str, Any], path: str | Path) -> Path:
    """Write ``checkpoint`` to ``path`` atomically (a killed process leaves the previous file,
    never half of one), first removing the temporary checkpoint files that killed
    processes left in its folder."""
    path = Path(path)
    remove_stale_temps(path.parent, lambda name: name.endswith(".ckpt"))
    return write_atomically(path, lambda file: torch.save(checkpoint, file))


def tie_like(averaged: dict[str, torch.Tensor], original: dict[str, torch.Tensor]) -> None:
    """Weights that share storage in ``original`` (tied embeddings: source, target and output
    are one matrix) share it in ``averaged`` too, so the averaged checkpoint is saved with one
    copy of each, as the checkpoints it averages are."""
    owner: dict[tuple[int, int], str] = {}
    for key, value in original.items():
        place = (value.untyped_storage().data_ptr(), int(value.storage_offset()))
        if place in owner and original[owner[place]].shape == value.shape:
            averaged[key] = averaged[owner[place]]
        else:
            owner.setdefault(place, key)


def average_checkpoints(paths: Sequence[str | Path]) -> dict[str, Any]:
    """A checkpoint whose floating-point weights are the element-wise mean over ``paths``.

    Averaging the last few checkpoints of a run usually scores a little higher than any of
    them (Vaswani et al., 2017, average the last 5 or 20). The result keeps the payload of
    the checkpoints (whose vocabularies must agree) and drops optimizer state, so it is a
    checkpoint to translate with, not to resume from.
    """
    if not paths:
        raise CheckpointError("no checkpoints to average")
    first = read_checkpoint(paths[0])
    total = {k: v.double() if v.is_floating_point() else v for k, v in first["state_dict"].items()}
    for path in paths[1:]:
        checkpoint = read_checkpoint(path)
        if checkpoint[CHECKPOINT_KEY]["vocab"] != first[CHECKPOINT_KEY]["vocab"]:
            raise CheckpointError(f"{path} has another vocabulary than {paths[0]}")
        weights = checkpoint["state_dict"]
        if weights.keys() != total.keys():
            raise CheckpointError(f"{path} holds other weights than {paths[0]}")
        for key, value in weights.items():
            if value.is_floating_point():
                total[key] += value.double()
    state_dict = {
        key: (value / len(paths)).to(first["state_dict"][key].dtype)
        if value.is_floating_point()
        else value
        for key, value in total.items()
    }
    tie_like(state_dict, first["state_dict"])
    payload: Payload = {**first[CHECKPOINT_KEY], "averaged_from": [str(p) for p in paths]}
    return {
        "state_dict": state_dict,
        CHECKPOINT_KEY: payload,
        "epoch": first.get("epoch"),
        "global_step": first.get("global_step"),
    }
