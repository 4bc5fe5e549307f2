"""scripts/bench/benchkit.py: a command's peak memory and stopping, contenders in turn, JSON
records."""

from __future__ import annotations

import gzip
import json
import signal
import sys
from pathlib import Path
from types import ModuleType

import pytest
from test_bench_scripts import load_script

# writes ``mb`` MB, frees them, then sleeps: a peak that a poll after the write never sees
ALLOCATE = "import time; block = bytearray({mb} << 20); del block; time.sleep(1.5)"


@pytest.fixture(scope="module")
def kit() -> ModuleType:
    return load_script("bench/benchkit")


def test_the_peak_of_a_child_is_its_own_not_its_parents(kit: ModuleType, tmp_path: Path):
    """The peak is the child's VmHWM: 150 MB it wrote and freed between two polls, and not
    the 300 MB this process holds when it starts the child (which getrusage's ru_maxrss
    would count)."""
    command = [sys.executable, "-c", ALLOCATE.format(mb=150)]
    run = kit.run(command, tmp_path / "out", interval=1.0)
    assert run.status == 0 and not run.timed_out and run.seconds > 1.5
    assert 150 < run.peak_rss_mb < 150 + 100
    ballast = bytearray(300 << 20)
    small = kit.run([sys.executable, "-c", ALLOCATE.format(mb=1)], tmp_path / "out")
    assert small.peak_rss_mb < 100 < len(ballast) >> 20


def test_every_process_of_the_tree_is_measured(kit: ModuleType, tmp_path: Path):
    grandchild = ALLOCATE.format(mb=120)
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}])"
    run = kit.run([sys.executable, "-c", child], tmp_path / "out", tmp_path / "err")
    (root,) = [p for p in run.processes if p.pid == run.pid]
    (grand,) = [p for p in run.processes if p.ppid == run.pid]
    assert len(run.processes) == 2 and grand.cmdline.endswith(grandchild)
    assert grand.peak_rss_mb > 120 > root.peak_rss_mb
    assert run.peak_rss_mb == grand.peak_rss_mb


def test_a_command_past_its_time_gets_each_signal_in_turn(kit: ModuleType, tmp_path: Path):
    """SIGINT first, which it may catch (Joey NMT saves its weights then), then SIGKILL to
    its whole session."""
    stubborn = "trap 'echo interrupted' INT; echo started; while true; do sleep 0.05; done"
    log = tmp_path / "log"
    stop = (signal.SIGINT, signal.SIGKILL)
    run = kit.run(["sh", "-c", stubborn], log, timeout=1, stop=stop, grace=0.5)
    assert run.timed_out and run.status == -signal.SIGKILL
    assert log.read_text().split() == ["started", "interrupted"]
    assert 1.5 <= run.seconds < 10


def test_contenders_alternate_and_a_recorded_run_is_not_redone(kit: ModuleType):
    calls, saves = [], []

    def measure(name: str, index: int) -> str:
        calls.append(f"{name}{index}")
        return f"{name}{index}"

    rounds = kit.alternate([], 2, ["A", "B"], measure, lambda: saves.append(len(calls)))
    assert calls == ["A0", "B0", "A1", "B1"] and saves == [1, 2, 3, 4]
    rounds[1].pop("B")  # a benchmark stopped before B's second run
    kit.alternate(rounds, 3, ["A", "B"], measure)
    assert calls[4:] == ["B1", "A2", "B2"]
    assert rounds == [{"A": "A0", "B": "B0"}, {"A": "A1", "B": "B1"}, {"A": "A2", "B": "B2"}]
    records = [{"x": 1.0, "y": 9.0}, {"x": 3.0, "y": 7.0}, {"x": 2.0, "y": 8.0}]
    assert kit.medians(records) == {"x": 2.0, "y": 8.0}


def test_a_record_is_written_whole_or_not_at_all(kit: ModuleType, tmp_path: Path):
    path = tmp_path / "deep" / "result.json"
    assert kit.load_json(path) == {} and kit.load_json(path, []) == []
    kit.save_json(path, {"rounds": [1, 2]})
    assert path.read_text() == json.dumps({"rounds": [1, 2]}, indent=2) + "\n"
    with pytest.raises(TypeError):  # not JSON: nothing of it reaches the file
        kit.save_json(path, {"rounds": [1, 2], "later": object()})
    assert kit.load_json(path) == {"rounds": [1, 2]}
    assert [p.name for p in path.parent.iterdir()] == ["result.json"]  # no temporary left


def test_a_split_is_cut_to_its_first_lines(kit: ModuleType, tmp_path: Path):
    for lang in ("en", "de"):
        text = "".join(f"{lang} {i}\n" for i in range(5))
        (tmp_path / f"val.{lang}.gz").write_bytes(gzip.compress(text.encode()))
    assert kit.split_files(tmp_path, "val", "en-de") == (
        tmp_path / "val.en.gz", tmp_path / "val.de.gz"
    )  # fmt: skip
    (scratch := tmp_path / "scratch").mkdir()
    src, ref = kit.split_files(tmp_path, "val", "de-en", 2, scratch)
    assert (src.read_text(), ref.read_text()) == ("de 0\nde 1\n", "en 0\nen 1\n")


def test_logged_rates_are_read_in_step_order_from_every_version(kit: ModuleType, tmp_path):
    for version, body in enumerate(["0,49,3000.0\n0,49,\n0,99,3500.0\n", "1,149,3600.0\n"]):
        folder = tmp_path / "logs" / f"version_{version}"
        folder.mkdir(parents=True)
        (folder / "metrics.csv").write_text(f"epoch,step,{kit.RATE}\n{body}")
    assert kit.logged_rates(tmp_path) == [3000.0, 3500.0, 3600.0]
