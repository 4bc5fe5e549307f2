"""Writing files so that a reader, a killed process or a full disk never leaves half of one.

Every output is written to a temporary file beside its target, ``.NAME.PID.tmp``, flushed to
disk and renamed over the target only when complete: the target holds either its old content
or all of the new. A write that fails removes its temporary file and raises an OutputError
naming the file and what was kept. A process killed mid-write cannot remove its temporary
file: the next write of the same target removes it (``remove_stale_temps``), once no running
process owns it.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from seq2seq.common.errors import OutputError, Seq2SeqError

log = logging.getLogger("seq2seq")

TEMP_NAME = re.compile(r"^\.(?P<target>.+)\.(?P<pid>\d+)\.tmp$")


def temp_path(path: Path) -> Path:
    """The temporary file this process writes ``path`` through."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale_temps(folder: Path, target: Callable[[str], bool]) -> list[Path]:
    """Remove the temporary files in ``folder`` left by processes that are gone, for the
    targets whose names ``target`` accepts; the removed paths."""
    if not folder.is_dir():
        return []
    removed = []
    for entry in folder.iterdir():
        match = TEMP_NAME.match(entry.name)
        if match is None or not target(match["target"]):
            continue
        pid = int(match["pid"])
        if pid == os.getpid() or _running(pid):
            continue
        if entry.is_dir() and not entry.is_symlink():  # a folder of atomic_folder
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed.append(entry)
    if removed:
        log.info(
            "removed %d temporary file(s) left by an interrupted run: %s",
            len(removed), ", ".join(str(p) for p in removed),
        )  # fmt: skip
    return removed


def _os_error(error: BaseException) -> OSError | None:
    """The OSError behind ``error``: itself, or one it was raised from or while handling
    (torch.save reports a failed write as a RuntimeError raised while handling it)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, OSError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def write_failure(path: Path, error: OSError, existed: bool) -> OutputError:
    """The one-line error for a failed write of ``path``, saying what was kept."""
    reason = error.strerror or str(error)
    kept = f"{path} keeps its previous content" if existed else f"{path} was not written"
    return OutputError(f"cannot write {path}: {reason}; {kept}")


@contextmanager
def atomic_output(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into: on success it replaces ``path``;
    on any failure it is removed and ``path`` is left as it was (an OSError, such as a
    full disk, becomes an OutputError)."""
    path = Path(path)
    existed = path.exists()
    tmp = temp_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(path.parent, lambda name: name == path.name)
        with open(tmp, "wb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException as error:
        tmp.unlink(missing_ok=True)
        cause = None if isinstance(error, Seq2SeqError | KeyboardInterrupt) else _os_error(error)
        if cause is not None:
            raise write_failure(path, cause, existed) from error
        raise


@contextmanager
def atomic_folder(path: str | Path) -> Iterator[Path]:
    """A new folder to fill in place of ``path`` (which must not exist, or be empty): on
    success it is renamed to ``path``, every file in it flushed to disk first; on any
    failure it is removed and ``path`` is left as it was. A reader never finds a folder
    half written under ``path``'s name (an OSError, such as a full disk, becomes an
    OutputError)."""
    path = Path(path)
    tmp = temp_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(path.parent, lambda name: name == path.name)
        tmp.mkdir()
        yield tmp
        for file in tmp.rglob("*"):
            if file.is_file():
                with open(file, "rb") as written:
                    os.fsync(written.fileno())
        os.replace(tmp, path)  # rename(2): onto a missing or empty folder only
    except BaseException as error:
        shutil.rmtree(tmp, ignore_errors=True)
        cause = None if isinstance(error, Seq2SeqError | KeyboardInterrupt) else _os_error(error)
        if cause is not None:
            raise write_failure(path, cause, existed=False) from error
        raise


def write_atomically(path: str | Path, write: Callable[[BinaryIO], object]) -> Path:
    """Call ``write`` on a temporary file beside ``path``, flush it to disk, then rename it
    into place: ``path`` holds either its old content or all of the new."""
    with atomic_output(path) as file:
        write(file)
    return Path(path)


def output_folder(path: str | Path) -> Path:
    """Create the folder ``path`` (with its parents) for a command's outputs, removing the
    temporary files that killed runs left in it; a failure is an OutputError."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputError(f"cannot create the folder {path}: {error.strerror or error}") from error
    remove_stale_temps(path, lambda name: True)
    return path
