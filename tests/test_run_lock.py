"""One run per checkpoint folder: a second run is refused, a dead run's lock is taken over,
and version folders are never shared."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from cli_errors import cli_error
from tiny_run import tiny_config, write_config

from seq2seq.common.folder_lock import FolderLock, RunLockedError, claim_version

pytestmark = pytest.mark.slow  # fits in several processes

HOLD = "import sys, time; from seq2seq.common.folder_lock import FolderLock; FolderLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(120)"  # noqa: E501


def shipped_layout_config(tmp_path: Path, corpus: Path) -> Path:
    """The tiny config without a checkpoint folder of its own, as the shipped configs."""
    settings = tiny_config(tmp_path, corpus)
    del settings["checkpoint"]
    settings["trainer"]["max_epochs"] = 1
    return write_config(tmp_path / "tiny.yaml", settings)


def test_a_second_run_in_a_running_runs_folder_is_refused_in_one_line(
    trained_run, tmp_path, capsys
):
    config = shipped_layout_config(tmp_path, trained_run["corpus"])
    folder = tmp_path / "run/checkpoints"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "held\n"
        status, error = cli_error(capsys, "fit", "--config", str(config))
    finally:
        holder.kill()
        holder.wait()
    assert status == 1
    assert error.startswith(f"{folder} is in use by another run (pid {holder.pid} on "), error
    assert not (tmp_path / "run/logs").exists()  # refused before making any log folder


def test_the_lock_of_a_killed_run_is_taken_over_with_a_message(trained_run, tmp_path, run_here):
    config = shipped_layout_config(tmp_path, trained_run["corpus"])
    folder = tmp_path / "run/checkpoints"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE)
    holder.stdout.readline()
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    first = run_here("fit", "--config", str(config))
    assert first.returncode == 0, first.stderr[-2000:]
    assert f"taking over the lock on {folder} from pid {holder.pid} on " in first.stderr
    assert (folder / "last.ckpt").is_file()
    # a run that ended normally leaves no holder behind: the next one takes over silently
    again = run_here("fit", "--config", str(config), "--ckpt_path", "last")
    assert again.returncode == 0 and "taking over" not in again.stderr


def test_a_lock_is_refused_while_held_and_free_after_release(tmp_path):
    first, second = FolderLock(tmp_path / "ckpt"), FolderLock(tmp_path / "ckpt")
    first.acquire()
    with pytest.raises(RunLockedError, match=f"pid {os.getpid()} on "):
        second.acquire()
    first.release()
    second.acquire()
    second.release()


def test_runs_started_together_never_share_a_version_folder(tmp_path):
    with ThreadPoolExecutor(8) as pool:
        versions = list(pool.map(lambda _: claim_version(tmp_path / "logs"), range(32)))
    assert sorted(versions) == list(range(32))


def test_two_runs_in_one_root_started_together_do_not_clobber(trained_run, tmp_path):
    """Whichever run takes the lock first pauses at its first step (tests/pause_at.py) until
    the other has been refused, so the two always overlap however slowly either starts."""
    config = shipped_layout_config(tmp_path, trained_run["corpus"])
    marker = tmp_path / "paused"
    settings = yaml.safe_load(config.read_text())
    settings["trainer"]["callbacks"] = [
        {"class_path": "pause_at.PauseAt", "init_args": {"step": 1, "marker": str(marker)}}
    ]
    write_config(config, settings)
    tests = str(Path(__file__).parent)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": f"{tests}:{os.getcwd()}"}
    command = [sys.executable, "-m", "seq2seq", "fit", "--config", str(config)]
    runs = [subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env) for _ in "ab"]
    deadline = time.monotonic() + 300
    while all(run.poll() is None for run in runs):
        assert time.monotonic() < deadline, "neither run ended"
        time.sleep(0.1)
    refused = next(run for run in runs if run.poll() is not None)
    winner = next(run for run in runs if run is not refused)
    refusal = refused.stderr.read()
    assert refused.returncode == 1, refusal[-2000:]
    assert "is in use by another run" in refusal and "Traceback" not in refusal
    while not marker.exists():  # the winner holds the lock until its first step is done
        assert winner.poll() is None, winner.stderr.read()[-2000:]
        time.sleep(0.1)
    marker.unlink()
    _, err = winner.communicate(timeout=300)
    assert winner.returncode == 0, err[-2000:]
    # the winner's logs: one version folder, its own
    assert [p.name for p in (tmp_path / "run/logs").iterdir()] == ["version_0"]
