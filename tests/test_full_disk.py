"""Outputs survive a full disk: every file is written beside its target and renamed when
complete, an existing file is replaced only by a complete new one, a failed write is one
line naming the file and what was kept, and leaves no temporary file behind."""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

import seq2seq.common.atomic
from seq2seq.commands.main import main
from seq2seq.common.atomic import atomic_output, remove_stale_temps, write_atomically
from seq2seq.common.errors import OutputError

ERROR = "seq2seq: error: "


class FullDisk(io.FileIO):
    """A file on a disk that has room for ``room`` bytes only."""

    room = 10

    def write(self, data) -> int:
        if self.tell() + len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(data)


def open_on_full_disk(path, mode="r", *args, **kwargs):
    assert mode == "wb"
    return io.BufferedWriter(FullDisk(path, "w"), buffer_size=4)


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every atomic write finds the disk full after 10 bytes."""
    monkeypatch.setattr(seq2seq.common.atomic, "open", open_on_full_disk, raising=False)


def only_file(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_full_disk_keeps_the_old_file_and_removes_the_temporary_one(tmp_path, full_disk):
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    with pytest.raises(OutputError) as failed:
        write_atomically(target, lambda file: file.write(b"new line\n" * 100))
    assert str(failed.value) == (
        f"cannot write {target}: No space left on device; {target} keeps its previous content"
    )
    assert target.read_text() == "old\n"
    assert only_file(tmp_path) == ["out.txt"]
    with pytest.raises(OutputError, match=r"; \S+new\.txt was not written$"):
        write_atomically(tmp_path / "new.txt", lambda file: file.write(b"x" * 1000))
    assert only_file(tmp_path) == ["out.txt"]


def test_an_error_that_is_no_write_failure_passes_through(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    with pytest.raises(ZeroDivisionError), atomic_output(target) as file:
        file.write(b"half")
        _ = 1 / 0
    assert target.read_text() == "old\n"
    assert only_file(tmp_path) == ["out.txt"]


def cli_error(capsys, *args: str) -> str:
    with pytest.raises(SystemExit) as stopped:
        main(list(args))
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if ERROR in line]
    assert len(errors) == 1 and "Traceback" not in err, err
    return errors[0].split(ERROR)[1]


def translate_over_old_output(
    capsys, ckpt: Path, folder: Path, source_text: bytes, *options: str
) -> tuple[str, Path, Path]:
    """``translate`` of ``source_text`` into an output file that holds old translations,
    failing: its one-line error, the source and the output; the output keeps its old
    content and no temporary file is left."""
    source, out = folder / "in.en", folder / "out.de"
    source.write_bytes(source_text)
    out.write_text("old translations\n")
    args = ["translate", "--ckpt", str(ckpt), *options, "--input", str(source)]
    error = cli_error(capsys, *args, "--output", str(out))
    assert out.read_text() == "old translations\n"
    assert only_file(folder) == ["in.en", "out.de"]
    return error, source, out


def test_translate_output_on_a_full_disk(trained_run, tmp_path, capsys, full_disk):
    text = b"twenty-one\n" * 200
    error, _, out = translate_over_old_output(
        capsys, trained_run["ckpt"], tmp_path, text, "--beam", "1"
    )
    assert error == f"cannot write {out}: No space left on device; {out} keeps its previous content"


def test_a_failure_while_streaming_keeps_the_old_output(trained_run, tmp_path, capsys):
    text = b"twenty-one\n" * 300 + b"\xff\n"
    error, source, _ = translate_over_old_output(
        capsys, trained_run["ckpt"], tmp_path, text, "--max-tokens", "8"
    )
    assert error == f"{source}: line 301 is not valid UTF-8 (invalid start byte)"


def test_average_on_a_full_disk(trained_run, tmp_path, capsys, full_disk):
    ckpt, out = str(trained_run["ckpt"]), tmp_path / "avg.ckpt"
    error = cli_error(capsys, "average", "--ckpts", ckpt, ckpt, "--out", str(out))
    assert error == f"cannot write {out}: No space left on device; {out} was not written"
    assert only_file(tmp_path) == []


def test_evaluate_output_on_a_full_disk(trained_run, tmp_path, capsys, full_disk):
    test = trained_run["corpus"]
    out = tmp_path / "hyp.de"
    out.write_text("old\n")
    error = cli_error(
        capsys, "evaluate", "--ckpt", str(trained_run["ckpt"]), "--beam", "1",
        "--src", str(test / "test.en"), "--ref", str(test / "test.de"), "--output", str(out),
    )  # fmt: skip
    assert error == f"cannot write {out}: No space left on device; {out} keeps its previous content"
    assert out.read_text() == "old\n"


def test_attention_on_a_full_disk(trained_run, tmp_path, capsys, full_disk):
    out = tmp_path / "attention"
    error = cli_error(
        capsys, "attention", "--ckpt", str(trained_run["ckpt"]),
        "--src", str(trained_run["corpus"] / "test.en"), "--out", str(out),
    )  # fmt: skip
    assert error.startswith(f"cannot write {out}/") and "No space left on device" in error
    assert only_file(out) == []


def test_fit_checkpoint_on_a_full_disk_is_one_line(trained_run, tmp_path, capsys, full_disk):
    from tiny_run import tiny_config, write_config

    config = tiny_config(tmp_path, trained_run["corpus"])
    config["trainer"]["max_epochs"] = 1
    config["data"]["cache_dir"] = str(trained_run["root"] / "cache")
    error = cli_error(capsys, "fit", "--config", str(write_config(tmp_path / "c.yaml", config)))
    assert error.startswith(f"cannot write {tmp_path}/run/checkpoints/")
    assert error.endswith(
        "No space left on device; " + error.split()[2].rstrip(":") + " was not written"
    )
    assert not any(p.name.endswith(".tmp") for p in (tmp_path / "run/checkpoints").iterdir())


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_temporary_files_of_killed_runs_are_removed_at_the_next_start(trained_run, tmp_path):
    out = tmp_path / "out.de"
    stale = tmp_path / f".out.de.{dead_pid()}.tmp"
    running = tmp_path / f".out.de.{os.getppid()}.tmp"  # a process that is still running
    other = tmp_path / f".other.de.{dead_pid()}.tmp"  # another target's
    for path in (stale, running, other):
        path.write_text("half a translation")
    with atomic_output(out) as file:
        assert not stale.exists()  # gone before the new output is written
        file.write(b"new\n")
    assert running.exists() and other.exists()
    assert out.read_text() == "new\n"


def test_the_first_checkpoint_save_removes_stale_checkpoint_temps(tmp_path):
    from seq2seq.training.checkpoint_io import SafeCheckpointIO

    stale = tmp_path / f".epoch03-bleu1.00.ckpt.{dead_pid()}.tmp"
    stale.write_bytes(b"PK")
    SafeCheckpointIO().save_checkpoint({"state_dict": {}}, tmp_path / "last.ckpt")
    assert only_file(tmp_path) == ["last.ckpt"]


def test_remove_stale_temps_ignores_other_files(tmp_path):
    keep = [tmp_path / "notes.tmp", tmp_path / ".hidden", tmp_path / f".x.{os.getpid()}.tmp"]
    for path in keep:
        path.write_text("")
    assert remove_stale_temps(tmp_path, lambda name: True) == []
    assert all(path.exists() for path in keep)


TMPFS_SIZE = "200k"


@pytest.fixture
def tiny_filesystem(tmp_path: Path):
    """A 200 kB tmpfs (needs root; skipped otherwise), unmounted afterwards."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(mount)],
        capture_output=True, text=True,
    )  # fmt: skip
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_translate_output_on_a_real_full_filesystem(trained_run, tiny_filesystem, capsys):
    out = tiny_filesystem / "out.de"
    out.write_text("old translations\n")
    with open(tiny_filesystem / "filler", "wb", buffering=0) as filler:  # fill every page
        try:
            while True:
                filler.write(b"\0" * 4096)
        except OSError:
            pass
    source = tiny_filesystem.parent / "in.en"
    source.write_text("twenty-one\n" * 5000)
    args = ["translate", "--ckpt", str(trained_run["ckpt"]), "--beam", "1", "--input"]
    error = cli_error(capsys, *args, str(source), "--output", str(out))
    assert error == f"cannot write {out}: No space left on device; {out} keeps its previous content"
    assert out.read_text() == "old translations\n"
    assert only_file(tiny_filesystem) == ["filler", "out.de"]
