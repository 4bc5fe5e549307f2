"""Where a run keeps its checkpoints, which one ``fit --ckpt_path last`` continues from, and
whether a new run may start there.

A run's checkpoints live in one folder per run root, ``<default_root_dir>/checkpoints``
unless the config names another (``checkpoint.dirpath``), so that a second ``fit`` of the
same config finds them. Runs of older versions kept them in ``<root>/logs/version_N/
checkpoints``; those are still found.

A ``fit`` that does not continue the run a folder holds would write its own ``last.ckpt``,
``best.ckpt`` and ``recent-*.ckpt`` over that run's: it is refused before any work
(``check_new_run``), unless ``--replace_checkpoints`` asks for the old checkpoints to be
deleted (``remove_checkpoints``, once the run holds the folder's lock).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from pathlib import Path

import torch

from seq2seq.common.errors import Seq2SeqError, UsageError

LAST_PATTERN = "last*.ckpt"  # last.ckpt, or last-v1.ckpt for a new run in a used folder
REPLACE_OPTION = "--replace_checkpoints"

log = logging.getLogger("seq2seq")


class NoCheckpointError(Seq2SeqError):
    """``--ckpt_path last`` was given but the run root holds no last checkpoint."""


class FolderHoldsARunError(UsageError):
    """A new run would write its checkpoints over those of the run a folder holds."""


def checkpoint_dir(root: str | None, dirpath: str | None) -> Path:
    """The run's checkpoint folder: ``dirpath`` if the config sets one, else
    ``<root>/checkpoints`` (root: ``trainer.default_root_dir``, default the current folder)."""
    return Path(dirpath) if dirpath else Path(root or ".") / "checkpoints"


def last_checkpoints(folder: Path, root: str | None) -> list[Path]:
    """Every last checkpoint of the run: in ``folder`` and in the version folders of older
    layouts (``<root>/logs/version_N/checkpoints``), oldest first by modification time."""
    found = set(folder.glob(LAST_PATTERN))
    found.update(Path(root or ".").glob(f"logs/version_*/checkpoints/{LAST_PATTERN}"))
    return sorted((path for path in found if path.is_file()), key=lambda p: p.stat().st_mtime)


def checkpoint_to_resume(folder: Path, root: str | None) -> Path:
    """The newest last checkpoint of the run, or a NoCheckpointError saying where it looked
    and how to start a new run instead."""
    candidates = last_checkpoints(folder, root)
    if not candidates:
        versions = Path(root or ".") / "logs" / "version_*" / "checkpoints"
        raise NoCheckpointError(
            f"--ckpt_path last: no checkpoint to resume from (no {LAST_PATTERN} in {folder} "
            f"or {versions}); to start a new run, leave out --ckpt_path"
        )
    return candidates[-1]


def held_checkpoints(folders: Iterable[Path]) -> list[Path]:
    """The checkpoints in ``folders`` (the run's checkpoint folders), oldest first."""
    found = {path for folder in folders for path in folder.glob("*.ckpt") if path.is_file()}
    return sorted(found, key=lambda path: path.stat().st_mtime)


def _saved_step(path: Path) -> str:
    """The training step a checkpoint was saved at, read without loading its tensors."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        return str(checkpoint["global_step"])
    except Exception:  # not a Lightning checkpoint, or damaged: the message does without
        return "unknown"


def check_new_run(
    folders: list[Path], root: str | None, ckpt_path: str | None, replace: bool
) -> list[Path]:
    """The checkpoints ``fit`` is about to replace: none when ``folders`` hold none or the
    fit continues one of them (``ckpt_path``); those held, with ``replace``. Otherwise a
    FolderHoldsARunError naming the run held and the three ways on."""
    held = held_checkpoints(folders)
    own = {path.resolve() for path in [*held, *last_checkpoints(folders[0], root)]}
    if not held or (ckpt_path and Path(ckpt_path).resolve() in own):
        return []
    if replace:
        return held
    lasts = [path for path in held if path.match(LAST_PATTERN)]
    newest = (lasts or held)[-1]
    saved = time.strftime("%Y-%m-%d %H:%M", time.localtime(newest.stat().st_mtime))
    raise FolderHoldsARunError(
        f"{newest.parent} holds the checkpoints of another run ({newest.name}: step "
        f"{_saved_step(newest)}, saved {saved}); continue that run with --ckpt_path last, "
        f"train into another folder with --trainer.default_root_dir DIR, or delete its "
        f"checkpoints and start over with {REPLACE_OPTION}"
    )


def remove_checkpoints(paths: list[Path]) -> None:
    """Delete the replaced run's checkpoints (``--replace_checkpoints``), and say so."""
    for path in paths:
        path.unlink(missing_ok=True)
    if paths:
        folders = ", ".join(sorted({str(path.parent) for path in paths}))
        log.info("%s: deleted the %d checkpoints of the earlier run in %s",
                 REPLACE_OPTION, len(paths), folders)  # fmt: skip
