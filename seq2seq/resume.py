"""Where a run keeps its checkpoints, and which one ``fit --ckpt_path last`` continues from.

A run's checkpoints live in one folder per run root, ``<default_root_dir>/checkpoints``
unless the config names another (``checkpoint.dirpath``), so that a second ``fit`` of the
same config finds them. Runs of older versions kept them in ``<root>/logs/version_N/
checkpoints``; those are still found.
"""

from __future__ import annotations

from pathlib import Path

from seq2seq.errors import Seq2SeqError

LAST_PATTERN = "last*.ckpt"  # last.ckpt, or last-v1.ckpt for a new run in a used folder


class NoCheckpointError(Seq2SeqError):
    """``--ckpt_path last`` was given but the run root holds no last checkpoint."""


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
