"""What a training corpus of millions of pairs costs: start-up time, memory, disk, speed.

Corpora of 100k, 1M and 5M pairs (``--sizes``) are built from Multi30k En-De with every
line different and WMT-like lengths: line i of ``train.en`` is ``en[a] + " " + en[b]`` and
of ``train.de`` ``de[a] + " " + de[b]`` for a random pair (a, b), a != b, of Multi30k
training lines, no pair drawn twice (about 24 words a line instead of 12). Multi30k's
val and test_2016_flickr files are copied beside them, so each folder is a
``--data.source`` for the shipped config.

For each size, the real ``seq2seq fit`` of the En-De Transformer recipe
(configs/multi30k/base/transformer.yaml, then configs/multi30k/en-de/transformer.yaml) runs
``--steps`` optimiser steps with a probe callback (``FirstStepProbe``, below; the learning
rate is the config's own within its 500 warm-up steps, ``--model.schedule constant`` only
because a cosine over 60 steps is refused) and reports, besides each run's whole wall
time and exit status:

- ``first``: cache removed beforehand: wall time from launch to the end of the first
  optimiser step (reading, SentencePiece training, tokenising, caching included);
- ``second``: the same command again, cache kept: time to the first step;
- peak RSS (VmHWM) of every process of the run, polled from /proc every 0.2 s: the
  ``seq2seq`` process, its tokenising workers, DDP's second rank (a process that lives
  less than 0.2 s may be missed), and the largest RssAnon seen (memory of the process's
  own, as against pages of mapped files and libraries);
- the cache folder's size on disk after the first run;
- training target tokens/s between step ``--warmup`` and the last step, against the
  same figure on Multi30k itself (whose first, second and DDP runs are the reference);
- ``ddp``: at the size nearest 1M (``--ddp-at``), 2 CPU processes
  (``--trainer.strategy ddp --trainer.devices 2``) with the cache present, each
  process's peak reported on its own.

Targets (at 5M pairs): peak RSS of every process within 0.5 GB of the same command on
Multi30k; first run to first step within 20 minutes, later runs within 60 s; training
tokens/s within 5% of Multi30k's. A run that fails is recorded with the tail of its
stderr (and tried again next time). Resumable: ``<out>/corpus.json`` keeps each (size,
run) measured; corpora are built once under ``<out>/data`` (``--only-build``: nothing
else). Writes ``<out>/table.md`` and ``<out>/corpus.png``.

    python scripts/bench_corpus.py --out runs/bench/corpus     # make bench-corpus
    python scripts/bench_corpus.py --sizes 20000 60000 --steps 12 --out /tmp/corpus-quick
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import gzip
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from pytorch_lightning import Callback, LightningModule, Trainer

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = Path(__file__).resolve().parent
FIT_CONFIGS = [
    ROOT / "configs" / "multi30k" / "base" / "transformer.yaml",
    ROOT / "configs" / "multi30k" / "en-de" / "transformer.yaml",
]
LANGS = ("en", "de")
COPIED_SPLITS = ("val", "test_2016_flickr")
MANIFEST = "built.json"  # written last into a corpus folder: the build is complete
REFERENCE = "multi30k"  # the results' key of the runs on Multi30k itself
RUNS = ("first", "second", "ddp")
PROBE_OUT = "BENCH_CORPUS_PROBE"  # the child's environment: where the probe writes
PROBE_WARMUP = "BENCH_CORPUS_WARMUP"  # and the step after which tokens/s is measured
GB = 2**30
TARGET_RSS_GB = 0.5  # above Multi30k's, every process
TARGET_FIRST_S = 20 * 60
TARGET_SECOND_S = 60  # the second run, with the cache
TARGET_SPEED = 0.95  # of Multi30k's tokens/s


# -- the corpora -----------------------------------------------------------------------------
def read_gz_lines(path: Path) -> list[str]:
    """The lines of a gzipped UTF-8 file, split on ``\\n`` only, as seq2seq reads them."""
    text = gzip.decompress(path.read_bytes()).decode("utf-8").removeprefix("\ufeff")
    return [line.removesuffix("\r") for line in text.removesuffix("\n").split("\n")]


def word_prefixes(lines: list[str]) -> set[str]:
    """The lines s such that ``s + " "`` begins another line."""
    ordered = sorted(set(lines))
    found = set()
    for line in ordered:
        after = bisect.bisect_left(ordered, line + " ")
        if after < len(ordered) and ordered[after].startswith(line + " "):
            found.add(line)
    return found


def usable_lines(en: list[str], de: list[str]) -> np.ndarray:
    """Indices of the training pairs whose sides are non-empty, unique on their side, and
    no word-prefix of another line there. Then two joined pairs ``x[a] + " " + x[b]`` are
    equal only if (a, b) is the same: the shorter first half would be a word-prefix of the
    longer one's, or the two equal."""
    keep = np.ones(len(en), dtype=bool)
    for lines in (en, de):
        counts: dict[str, int] = {}
        for line in lines:
            counts[line] = counts.get(line, 0) + 1
        prefixes = word_prefixes(lines)
        bad = [not line.strip() or counts[line] > 1 or line in prefixes for line in lines]
        keep &= ~np.array(bad, dtype=bool)
    return np.flatnonzero(keep)


def draw_pairs(usable: int, pairs: int, seed: int) -> np.ndarray:
    """``pairs`` distinct codes ``a * usable + b`` (a != b), in the order drawn."""
    if pairs > usable * (usable - 1):
        raise ValueError(f"{usable} lines make at most {usable * (usable - 1)} pairs")
    rng = np.random.default_rng(seed)
    codes = np.empty(0, dtype=np.int64)
    while len(codes) < pairs:
        fresh = rng.integers(0, usable * usable, size=pairs - len(codes) + 1024, dtype=np.int64)
        codes = np.concatenate([codes, fresh[fresh // usable != fresh % usable]])
        _, first = np.unique(codes, return_index=True)
        codes = codes[np.sort(first)]  # drop repeats, keep the drawing order
    return codes[:pairs]


def joined_lines(lines: list[str], first: np.ndarray, second: np.ndarray) -> list[str]:
    return [f"{lines[a]} {lines[b]}" for a, b in zip(first.tolist(), second.tolist(), strict=True)]


def write_corpus(multi30k: Path, folder: Path, pairs: int, seed: int, chunk: int) -> dict:
    """Write train.en/train.de into ``folder`` chunk by chunk, copy val and test; return the
    manifest (not written: the caller writes it once the folder is complete)."""
    train = {lang: read_gz_lines(multi30k / f"train.{lang}.gz") for lang in LANGS}
    usable = usable_lines(train["en"], train["de"])
    codes = draw_pairs(len(usable), pairs, seed)
    words = dict.fromkeys(LANGS, 0)
    folder.mkdir(parents=True)
    files = {lang: (folder / f"train.{lang}").open("w", encoding="utf-8") for lang in LANGS}
    try:
        for start in range(0, pairs, chunk):
            part = codes[start : start + chunk]
            first, second = usable[part // len(usable)], usable[part % len(usable)]
            for lang in LANGS:
                lines = joined_lines(train[lang], first, second)
                words[lang] += sum(line.count(" ") + 1 for line in lines)
                files[lang].write("\n".join(lines) + "\n")
    finally:
        for file in files.values():
            file.close()
    for split in COPIED_SPLITS:
        for lang in LANGS:
            shutil.copyfile(multi30k / f"{split}.{lang}.gz", folder / f"{split}.{lang}.gz")
    return {
        "pairs": pairs,
        "seed": seed,
        "multi30k": str(multi30k.resolve()),
        "usable_multi30k_lines": len(usable),
        "mean_words": {lang: words[lang] / pairs for lang in LANGS},
        "train_bytes": sum((folder / f"train.{lang}").stat().st_size for lang in LANGS),
    }


def build_corpus(multi30k: Path, out: Path, pairs: int, seed: int, chunk: int = 100_000) -> Path:
    """``<out>/data/pairs-<pairs>``, built unless complete (under a temporary name first)."""
    folder = out / "data" / f"pairs-{pairs}"
    if (folder / MANIFEST).exists():
        built = json.loads((folder / MANIFEST).read_text())
        if built["seed"] != seed:
            raise SystemExit(f"{folder} was built with seed {built['seed']}: remove it first")
        return folder
    partial = folder.with_name(folder.name + ".part")
    shutil.rmtree(partial, ignore_errors=True)
    start = time.perf_counter()
    manifest = write_corpus(multi30k, partial, pairs, seed, chunk)
    manifest["build_seconds"] = time.perf_counter() - start
    (partial / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    print(f"built {folder}: {manifest['mean_words']['en']:.1f} En words a line", flush=True)
    return folder


# -- the probe, run inside seq2seq fit (scripts/ on its PYTHONPATH) -------------------------
class FirstStepProbe(Callback):
    """On rank 0: writes to the JSON file ``out`` (default: $BENCH_CORPUS_PROBE) the
    time.time() at the end of the first optimiser step, and the target tokens/s of the
    steps after ``warmup`` (default: $BENCH_CORPUS_WARMUP, else 10) up to the last."""

    def __init__(self, out: str | None = None, warmup: int | None = None) -> None:
        self.out = out or os.environ.get(PROBE_OUT)
        self.warmup = warmup if warmup is not None else int(os.environ.get(PROBE_WARMUP, "10"))
        self.record: dict[str, Any] = {"warmup_steps": self.warmup}
        self.since: float | None = None
        self.tokens = 0

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if trainer.global_rank != 0 or not self.out:
            return
        now, step = time.time(), trainer.global_step
        if step == 1 and "first_step_time" not in self.record:
            self.record.update(first_step_time=now, world_size=trainer.world_size)
            self.save()
        if step == self.warmup:
            self.since = time.perf_counter()
        elif self.since is not None and step > self.warmup:
            self.tokens += int(batch.tgt_lens.sum())
            seconds = time.perf_counter() - self.since
            steps = step - self.warmup
            self.record.update(tokens=self.tokens, seconds=seconds, measured_steps=steps)
            self.record["target_tokens_per_s"] = self.tokens / seconds
            if step == trainer.max_steps:
                self.save()

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.global_rank == 0 and self.out:
            self.save()

    def save(self) -> None:
        path = Path(self.out)  # type: ignore[arg-type]
        partial = path.with_name(path.name + ".part")
        partial.write_text(json.dumps(self.record, indent=2) + "\n")
        os.replace(partial, path)


# -- peak RSS of a process tree, from /proc ---------------------------------------------------
def proc_text(pid: int, name: str) -> str | None:
    """/proc/<pid>/<name>, or None once the process is gone (or a zombie's empty file)."""
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes().decode("utf-8", "replace")
    except OSError:
        return None


def stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat from field 3 (state) on: the name before it may hold spaces."""
    text = proc_text(pid, "stat")
    return text[text.rindex(")") + 2 :].split() if text else None


def parent_table() -> dict[int, list[int]]:
    """Every process's children, from each /proc/<pid>/stat's ppid."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = stat_fields(int(entry.name))
            if fields:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def child_pids(pid: int, table: dict[int, list[int]] | None) -> list[int]:
    if table is not None:
        return table.get(pid, [])
    found = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):  # the thread has ended
            found += [int(child) for child in children.read_text().split()]
    return found


def process_tree(root: int, scan: bool | None = None) -> list[int]:
    """``root`` and all its descendants now: from /proc/<pid>/task/*/children, or with
    ``scan`` (by default when the kernel has no such files) from every process's ppid."""
    if scan is None:
        scan = not Path(f"/proc/{root}/task/{root}/children").exists()
    table = parent_table() if scan else None
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += child_pids(pid, table)
    return tree


def environment_rank(pid: int) -> str | None:
    """LOCAL_RANK in the environment the process was started with (as DDP launches ranks)."""
    text = proc_text(pid, "environ") or ""
    return next((v[11:] for v in text.split("\0") if v.startswith("LOCAL_RANK=")), None)


class Seen:
    """One process of the tree: what it was last seen running, its largest VmHWM."""

    def __init__(self, pid: int, ppid: int) -> None:
        self.pid, self.ppid = pid, ppid
        self.name = self.cmdline = ""
        self.local_rank: str | None = None
        self.peak_kb = 0
        self.peak_anon_kb = 0  # RssAnon, polled: memory of its own, not mapped file pages


class TreePeaks:
    """Polls the tree under ``root``, keeping each process's largest VmHWM (a process is
    (pid, start time): a reused pid is another process)."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.seen: dict[tuple[int, str], Seen] = {}

    def poll(self) -> None:
        for pid in process_tree(self.root):
            fields, status = stat_fields(pid), proc_text(pid, "status")
            if not fields or not status:
                continue
            values = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if "VmHWM" not in values:  # a zombie, or a kernel thread
                continue
            process = self.seen.setdefault((pid, fields[19]), Seen(pid, int(fields[1])))
            process.name = values["Name"].strip()  # as of the latest exec
            process.cmdline = (proc_text(pid, "cmdline") or "").replace("\0", " ").strip()
            process.local_rank = environment_rank(pid)
            process.peak_kb = max(process.peak_kb, int(values["VmHWM"].split()[0]))
            anon_kb = int(values.get("RssAnon", "0 kB").split()[0])
            process.peak_anon_kb = max(process.peak_anon_kb, anon_kb)

    def role(self, process: Seen) -> str:
        """``rank k`` for the command itself (rank 0) and each process DDP launched anew
        (the same command line, LOCAL_RANK=k, not inherited from its parent); ``worker``
        for the rest (forked data workers and the like)."""
        if process.pid == self.root:
            return f"rank {process.local_rank or 0}"
        parents = [p for p in self.seen.values() if p.pid == process.ppid]
        root = next((p for p in self.seen.values() if p.pid == self.root), None)
        inherited = bool(parents) and parents[0].local_rank == process.local_rank
        launched = root is not None and process.cmdline == root.cmdline and not inherited
        return f"rank {process.local_rank}" if process.local_rank and launched else "worker"

    def processes(self) -> list[dict[str, Any]]:
        """Each process seen: pid, role, name, command line (cut), peak RSS in GB."""
        return [
            {
                "pid": p.pid,
                "role": self.role(p),
                "name": p.name,
                "cmdline": p.cmdline[:200],
                "peak_rss_gb": p.peak_kb / 2**20,
                "peak_anon_gb": p.peak_anon_kb / 2**20,
            }
            for p in sorted(self.seen.values(), key=lambda p: p.pid)
        ]


def run_watched(
    command: list[str], env: dict[str, str], log: Path, timeout: float, interval: float = 0.2
) -> dict[str, Any]:
    """Run ``command`` (stdout and stderr into ``log``.out/.err), polling its process tree;
    killed after ``timeout`` seconds. Its start time (time.time()), exit status, wall-clock
    seconds, and every process's peak RSS."""
    with log.with_suffix(".out").open("w") as out, log.with_suffix(".err").open("w") as err:
        start = time.time()
        child = subprocess.Popen(command, stdout=out, stderr=err, env=env, start_new_session=True)
        tree = TreePeaks(child.pid)
        timed_out = False
        try:
            while child.poll() is None:
                tree.poll()
                if time.time() - start > timeout:
                    timed_out = True
                    os.killpg(child.pid, signal.SIGKILL)  # its own session: the whole run
                    child.wait()
                    break
                time.sleep(interval)
        finally:
            if child.poll() is None:  # interrupted: do not leave a training behind
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
    processes = tree.processes()
    return {
        "start_time": start,
        "status": child.returncode,
        "seconds": time.time() - start,
        "timed_out": timed_out,
        "peak_rss_gb": max((p["peak_rss_gb"] for p in processes), default=None),
        "peak_anon_gb": max((p["peak_anon_gb"] for p in processes), default=None),
        "processes": processes,
    }


# -- the measured runs ---------------------------------------------------------------------
def disk_usage(folder: Path) -> int:
    """Bytes allocated on disk under ``folder`` (du's figure), 0 when it does not exist."""
    total = 0
    for directory, _, files in os.walk(folder):
        for name in files:
            path = Path(directory) / name
            if not path.is_symlink():
                total += path.stat().st_blocks * 512
    return total


def fit_command(source: Path, cache: Path, run_dir: Path, args: argparse.Namespace) -> list[str]:
    seq2seq = Path(sys.executable).with_name("seq2seq")
    launcher = [str(seq2seq)] if seq2seq.exists() else [sys.executable, "-m", "seq2seq.cli"]
    # enable_checkpointing false is refused: the command always adds its ModelCheckpoint.
    # A cosine over a few steps is refused too (shorter than its warm-up); a constant rate
    # after the warm-up is the very same learning rate within the warm-up's 500 steps.
    return [
        *launcher, "fit", *(arg for path in args.fit_config for arg in ("--config", str(path))),
        "--data.source", str(source), "--data.cache_dir", str(cache),
        "--trainer.default_root_dir", str(run_dir), "--trainer.max_steps", str(args.steps),
        "--trainer.max_time", "null", "--trainer.enable_progress_bar", "false",
        "--model.schedule", "constant",
        "--trainer.callbacks+=bench_corpus.FirstStepProbe",
    ]  # fmt: skip


def child_env(probe: Path, warmup: int) -> dict[str, str]:
    python_path = [str(SCRIPTS), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {
        **os.environ,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(python_path),
        PROBE_OUT: str(probe),
        PROBE_WARMUP: str(warmup),
    }


def stderr_tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def measure(key: str, run: str, source: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One run of ``seq2seq fit`` on ``source``: ``first`` without its cache, ``second``
    and ``ddp`` with it."""
    cache = args.out / "cache" / key
    run_dir = args.out / "runs" / f"{key}-{run}"
    if run == "first":
        shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    probe = run_dir / "probe.json"
    warmup = max(1, min(args.warmup, args.steps // 2))
    command = fit_command(source.resolve(), cache.resolve(), run_dir.resolve(), args)
    if run == "ddp":
        command += ["--trainer.strategy", "ddp", "--trainer.devices", "2"]
        command += ["--trainer.accelerator", "cpu"]
    cache_present = cache.exists()
    print(f"[{key} {run}] {' '.join(command[1:])}", flush=True)
    record = run_watched(command, child_env(probe, warmup), run_dir / "fit", args.timeout * 60)
    probed = json.loads(probe.read_text()) if probe.exists() else {}
    first = probed.get("first_step_time")
    record.update(
        {
            "run": run,
            "pairs": args.pairs_of[key],
            "steps": args.steps,
            "cache_present_at_start": cache_present,
            "cache_bytes": disk_usage(cache),
            "first_step_seconds": first - record["start_time"] if first else None,
            "target_tokens_per_s": probed.get("target_tokens_per_s"),
            "probe": probed,
            "command": command,
        }
    )
    if record["status"] != 0:
        record["stderr_tail"] = stderr_tail(run_dir / "fit.err")
    for checkpoints in [*run_dir.glob("logs/version_*/checkpoints"), run_dir / "checkpoints"]:
        shutil.rmtree(checkpoints, ignore_errors=True)  # 170 MB a run, of no use here
    return record


def run_line(key: str, run: str, record: dict[str, Any]) -> str:
    if record["status"] != 0:
        return f"[{key} {run}] FAILED (exit {record['status']}):\n{record.get('stderr_tail', '')}"
    first = record["first_step_seconds"]
    shown = f"{first:.1f} s" if first is not None else "no step"
    return (
        f"[{key} {run}] first step after {shown}, whole run {record['seconds']:.1f} s, "
        f"peak RSS {record['peak_rss_gb']:.2f} GB over {len(record['processes'])} processes, "
        f"cache {cell(record, 'cache_bytes', 'GB')}"
    )


# -- the report -----------------------------------------------------------------------------
def ok(results: dict[str, Any], key: str, run: str) -> dict[str, Any] | None:
    """The record of a successful run, else None."""
    record = results.get("runs", {}).get(key, {}).get(run)
    return record if record and record["status"] == 0 else None


def rank_peaks(record: dict[str, Any] | None) -> dict[str, float]:
    """The peak RSS of each rank process of a run (``rank 0``, ``rank 1``)."""
    peaks: dict[str, float] = {}
    for process in (record or {}).get("processes", []):
        if process["role"].startswith("rank"):
            peaks[process["role"]] = max(peaks.get(process["role"], 0.0), process["peak_rss_gb"])
    return peaks


def mean_speed(results: dict[str, Any], key: str) -> float | None:
    """Tokens/s of the single-process runs (first and second), averaged."""
    rates = [
        record["target_tokens_per_s"]
        for run in ("first", "second")
        if (record := ok(results, key, run)) and record["target_tokens_per_s"]
    ]
    return sum(rates) / len(rates) if rates else None


def cell(record: dict[str, Any] | None, field_name: str, unit: str) -> str:
    value = record.get(field_name) if record else None
    if value is None:
        return "–"
    if unit == "s":
        return f"{value:,.1f} s"
    if field_name == "cache_bytes":
        return f"{value / GB:.2f} GB" if value >= GB else f"{value / 2**20:.1f} MB"
    return f"{value:.2f} GB"


def failed_or(results: dict[str, Any], key: str, run: str, text: str) -> str:
    record = results.get("runs", {}).get(key, {}).get(run)
    return f"failed (exit {record['status']})" if record and record["status"] != 0 else text


def table(results: dict[str, Any], keys: list[str]) -> list[str]:
    reference_speed = mean_speed(results, REFERENCE)
    lines = [
        "| pairs | first run to first step | peak RSS first (anon) | second run to first step "
        "| peak RSS second (anon) | cache on disk | tokens/s vs Multi30k |",
        "|---|---|---|---|---|---|---|",
    ]
    for key in keys:
        first, second = ok(results, key, "first"), ok(results, key, "second")
        speed = mean_speed(results, key)
        ratio = f" ({speed / reference_speed:.2f}×)" if speed and reference_speed else ""
        pairs = f"{results['pairs'][key]:,}" + (" (Multi30k)" if key == REFERENCE else "")
        cells = [
            pairs,
            failed_or(results, key, "first", cell(first, "first_step_seconds", "s")),
            f"{cell(first, 'peak_rss_gb', 'GB')} ({cell(first, 'peak_anon_gb', 'GB')})",
            failed_or(results, key, "second", cell(second, "first_step_seconds", "s")),
            f"{cell(second, 'peak_rss_gb', 'GB')} ({cell(second, 'peak_anon_gb', 'GB')})",
            cell(first, "cache_bytes", "GB"),
            f"{speed:,.0f}{ratio}" if speed else "–",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def ddp_table(results: dict[str, Any], keys: list[str]) -> list[str]:
    """The DDP runs: time to the first step and each process's peak."""
    rows = []
    for key in keys:
        record = results.get("runs", {}).get(key, {}).get("ddp")
        if not record:
            continue
        if record["status"] != 0:
            rows.append(f"| {results['pairs'][key]:,} | failed (exit {record['status']}) |||||")
            continue
        peaks = rank_peaks(record)
        workers = [p["peak_rss_gb"] for p in record["processes"] if p["role"] == "worker"]
        cells = [
            f"{results['pairs'][key]:,}" + (" (Multi30k)" if key == REFERENCE else ""),
            cell(record, "first_step_seconds", "s"),
            *(f"{peaks[r]:.2f} GB" if r in peaks else "–" for r in ("rank 0", "rank 1")),
            f"{len(workers)}, largest {max(workers):.2f} GB" if workers else "none",
            f"{record['target_tokens_per_s']:,.0f}" if record["target_tokens_per_s"] else "–",
        ]
        rows.append("| " + " | ".join(cells) + " |")
    if not rows:
        return []
    return [
        "",
        "DDP, 2 CPU processes, cache present (tokens/s: rank 0's batches only):",
        "",
        "| pairs | run to first step | peak RSS rank 0 | peak RSS rank 1 | other processes "
        "| tokens/s |",
        "|---|---|---|---|---|---|",
        *rows,
    ]


def verdict(met: bool | None) -> str:
    return "not measured" if met is None else ("met" if met else "missed")


def targets(results: dict[str, Any], keys: list[str]) -> list[str]:
    """The targets, checked at the largest size measured (they are set at 5M pairs)."""
    sizes = [key for key in keys if key != REFERENCE and ok(results, key, "first")]
    if not sizes:
        return []
    key = max(sizes, key=lambda k: results["pairs"][k])
    first, second = ok(results, key, "first"), ok(results, key, "second")
    ours = [r["peak_rss_gb"] for r in (first, second) if r]
    base = [r["peak_rss_gb"] for run in ("first", "second") if (r := ok(results, REFERENCE, run))]
    lines = ["", f"Targets at {results['pairs'][key]:,} pairs (set for 5,000,000):", ""]
    if base:
        rise = max(ours) - max(base)
        lines.append(
            f"- peak RSS, largest process: {rise:+.2f} GB over Multi30k's "
            f"(≤ {TARGET_RSS_GB} GB): {verdict(rise <= TARGET_RSS_GB)}"
        )
    ddp, ddp_base = ok(results, key, "ddp"), ok(results, REFERENCE, "ddp")
    if ddp and ddp_base:
        ranks, base_ranks = rank_peaks(ddp), rank_peaks(ddp_base)
        for rank in sorted(set(ranks) & set(base_ranks)):
            rise = ranks[rank] - base_ranks[rank]
            lines.append(
                f"- peak RSS, DDP {rank}: {rise:+.2f} GB over Multi30k's "
                f"(≤ {TARGET_RSS_GB} GB): {verdict(rise <= TARGET_RSS_GB)}"
            )
    limits = {"first": TARGET_FIRST_S, "second": TARGET_SECOND_S}
    for (name, limit), record in zip(limits.items(), (first, second), strict=True):
        seconds = record.get("first_step_seconds") if record else None
        met = None if seconds is None else seconds <= limit
        shown = f"{seconds:,.1f} s" if seconds is not None else "–"
        lines.append(f"- {name} run to first step: {shown} (≤ {limit} s): {verdict(met)}")
    speed, reference = mean_speed(results, key), mean_speed(results, REFERENCE)
    ratio = speed / reference if speed and reference else None
    met = None if ratio is None else ratio >= TARGET_SPEED
    shown = f"{ratio:.3f}×" if ratio is not None else "–"
    lines.append(f"- training tokens/s: {shown} Multi30k's (≥ {TARGET_SPEED}×): {verdict(met)}")
    return lines


def report(results: dict[str, Any], keys: list[str]) -> str:
    machine = results.get("machine", {})
    lines = [
        f"# Corpus size: {results.get('steps')} steps of the En-De Transformer recipe",
        "",
        f"{machine.get('cpus')} CPUs, OMP_NUM_THREADS={machine.get('omp_threads')}; "
        "peak RSS is the largest process's (VmHWM, every process polled).",
        "",
        *table(results, keys),
        *ddp_table(results, keys),
        *targets(results, keys),
    ]
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], keys: list[str], out: Path) -> None:
    import matplotlib  # here, not at the top: the probe's child process loads this module

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    pairs = results["pairs"]

    def series(run: str, value: Any) -> tuple[list[int], list[float]]:
        points = [(pairs[k], value(r)) for k in keys if (r := ok(results, k, run))]
        points = [(x, y) for x, y in sorted(points) if y is not None]
        return [x for x, _ in points], [y for _, y in points]

    for run in ("first", "second"):
        left.plot(*series(run, lambda r: r["first_step_seconds"]), "o-", label=f"{run} run")
        right.plot(*series(run, lambda r: r["peak_rss_gb"]), "o-", label=f"{run} run")
    for rank in ("rank 0", "rank 1"):
        xs, ys = series("ddp", lambda r, rank=rank: rank_peaks(r).get(rank))
        right.plot(xs, ys, "s--", label=f"DDP {rank}")
    left.axhline(TARGET_FIRST_S, color="C0", ls=":", lw=1, label="targets (20 min, 60 s)")
    left.axhline(TARGET_SECOND_S, color="C1", ls=":", lw=1)
    base = ok(results, REFERENCE, "first")
    if base:
        right.axhline(base["peak_rss_gb"] + TARGET_RSS_GB, color="gray", ls=":", lw=1,
                      label="Multi30k + 0.5 GB")  # fmt: skip
    ticks = sorted({pairs[k] for k in keys})
    for axis in (left, right):
        axis.set_xscale("log")
        axis.set_xticks(ticks, [f"{x:,}" + ("\nMulti30k" if x == pairs[REFERENCE] else "")
                                for x in ticks])  # fmt: skip
        axis.minorticks_off()
        axis.set_xlabel("training pairs")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    left.set(yscale="log", ylabel="seconds", title="Launch to the end of the first step")
    right.set(ylabel="GB", title="Peak RSS (largest process; DDP: each rank)")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


# -- main ------------------------------------------------------------------------------------
def nearest_million(sizes: list[int]) -> int:
    """The size closest to 1M pairs on a log scale: where the DDP run goes by default."""
    return min(sizes, key=lambda n: abs(math.log(n / 1_000_000)))


def jobs(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(results key, run) in order: Multi30k's first, then each size's."""
    ddp = args.ddp_at in args.sizes
    yield from ((REFERENCE, run) for run in RUNS if run != "ddp" or ddp)
    for size in args.sizes:
        yield from ((str(size), run) for run in RUNS if run != "ddp" or size == args.ddp_at)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--multi30k", type=Path, default=Path("data/multi30k"))
    parser.add_argument("--out", type=Path, default=Path("runs/bench/corpus"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 5_000_000])
    parser.add_argument("--steps", type=int, default=60, help="optimiser steps of each run")
    parser.add_argument("--warmup", type=int, default=10, help="steps before tokens/s counts")
    parser.add_argument("--ddp-at", type=int, help="size of the DDP run (default: nearest 1M)")
    parser.add_argument("--seed", type=int, default=1, help="of the corpora's pairs")
    parser.add_argument("--timeout", type=float, default=90, help="minutes, for each run")
    parser.add_argument(
        "--fit-config", type=Path, nargs="+", default=FIT_CONFIGS, help="merged in order"
    )
    parser.add_argument("--only-build", action="store_true", help="build the corpora, no runs")
    args = parser.parse_args()
    args.sizes = sorted(set(args.sizes))
    args.ddp_at = args.ddp_at or nearest_million(args.sizes)
    corpora = {str(n): build_corpus(args.multi30k, args.out, n, args.seed) for n in args.sizes}
    if args.only_build:
        return
    corpora[REFERENCE] = args.multi30k
    args.pairs_of = {REFERENCE: len(read_gz_lines(args.multi30k / "train.en.gz"))}
    args.pairs_of.update({str(n): n for n in args.sizes})

    record = args.out / "corpus.json"
    results = json.loads(record.read_text()) if record.exists() else {}
    results.setdefault("runs", {})
    results["pairs"] = {**results.get("pairs", {}), **args.pairs_of}
    results["steps"] = args.steps
    omp = os.environ.get("OMP_NUM_THREADS", "2")
    results["machine"] = {"cpus": os.cpu_count(), "omp_threads": omp, "node": platform.node()}
    for key, run in jobs(args):
        done = results["runs"].setdefault(key, {})
        if run in done and done[run]["status"] == 0:
            continue  # measured; a failed run is tried again
        done[run] = measure(key, run, corpora[key], args)
        print(run_line(key, run, done[run]), flush=True)
        record.write_text(json.dumps(results, indent=2) + "\n")  # a finished run survives
    keys = [REFERENCE, *(str(n) for n in args.sizes)]
    text = report(results, keys)
    (args.out / "table.md").write_text(text)
    plot(results, keys, args.out / "corpus.png")
    print(text)
    print(f"wrote {record}, {args.out / 'table.md'} and {args.out / 'corpus.png'}")


if __name__ == "__main__":
    main()
