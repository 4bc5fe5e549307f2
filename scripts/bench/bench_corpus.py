"""What a training corpus of millions of pairs costs: start-up time, memory, disk, speed.

Corpora of ``--sizes`` pairs, each line two Multi30k En-De training pairs joined (no pair
twice), with val and test beside them. On Multi30k and each size, ``seq2seq fit`` of the
En-De Transformer recipe runs ``--steps`` steps with ``FirstStepProbe``: ``first`` without
its cache, ``second`` with it, ``ddp`` (2 processes, at the size nearest 1M) with it: launch
to the first step, every process's peak RSS, the cache on disk, tokens/s after ``--warmup``
steps, against the targets set for 5M pairs. Resumable (``corpus.json``); writes
``table.md`` and ``corpus.png``. Results: docs/benchmarks/corpus-scale.md.

    python -m scripts.bench.bench_corpus --out runs/bench/corpus     # make bench-corpus
    python -m scripts.bench.bench_corpus --sizes 20000 60000 --steps 12 --out /tmp/corpus-quick
"""

from __future__ import annotations

import argparse
import bisect
import math
import os
import platform
import shutil
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from pytorch_lightning import Callback, LightningModule, Trainer

from scripts.bench.benchkit import (
    REPO,
    Process,
    figure,
    fit_command,
    load_json,
    markdown_table,
    recipe_configs,
    run,
    save_json,
)
from seq2seq.text.lines import read_lines

FIT_CONFIGS = recipe_configs("en-de", REPO)["transformer"]
LANGS = ("en", "de")
MANIFEST = "built.json"  # written last into a corpus folder: the build is complete
REFERENCE = "multi30k"  # the results' key of the runs on Multi30k itself
RUNS = ("first", "second", "ddp")
PROBE_OUT, PROBE_WARMUP = "BENCH_CORPUS_PROBE", "BENCH_CORPUS_WARMUP"  # the probe's settings
GB = 2**30
TARGET_RSS_GB = 0.5  # above Multi30k's, every process
TARGET_FIRST_S, TARGET_SECOND_S = 20 * 60, 60  # launch to the first step, without and with cache
TARGET_SPEED = 0.95  # of Multi30k's tokens/s


# -- the corpora -----------------------------------------------------------------------------
def usable_lines(en: list[str], de: list[str]) -> np.ndarray:
    """Indices of the training pairs whose sides are non-empty, unique on their side, and no
    word-prefix of another line there. Then two joined pairs ``x[a] + " " + x[b]`` are equal
    only if (a, b) is the same."""
    keep = np.ones(len(en), dtype=bool)
    for lines in (en, de):
        counts, ordered = Counter(lines), sorted(set(lines))
        prefixes = set()
        for line in ordered:
            after = bisect.bisect_left(ordered, line + " ")
            if after < len(ordered) and ordered[after].startswith(line + " "):
                prefixes.add(line)
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


def write_corpus(multi30k: Path, folder: Path, pairs: int, seed: int, chunk: int) -> dict:
    """Write train.en/train.de into ``folder`` chunk by chunk, copy val and test; return the
    manifest (written by the caller once the folder is complete)."""
    train = {lang: read_lines(multi30k / f"train.{lang}.gz") for lang in LANGS}
    usable = usable_lines(train["en"], train["de"])
    codes = draw_pairs(len(usable), pairs, seed)
    words = dict.fromkeys(LANGS, 0)
    folder.mkdir(parents=True)
    for lang in LANGS:
        with (folder / f"train.{lang}").open("w", encoding="utf-8") as file:
            for start in range(0, pairs, chunk):
                part = codes[start : start + chunk]
                halves = zip(usable[part // len(usable)], usable[part % len(usable)], strict=True)
                lines = [f"{train[lang][a]} {train[lang][b]}" for a, b in halves]
                words[lang] += sum(line.count(" ") + 1 for line in lines)
                file.write("\n".join(lines) + "\n")
        for split in ("val", "test_2016_flickr"):
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
        if (built := load_json(folder / MANIFEST))["seed"] != seed:
            raise SystemExit(f"{folder} was built with seed {built['seed']}: remove it first")
        return folder
    partial = folder.with_name(folder.name + ".part")
    shutil.rmtree(partial, ignore_errors=True)
    start = time.perf_counter()
    manifest = write_corpus(multi30k, partial, pairs, seed, chunk)
    manifest["build_seconds"] = time.perf_counter() - start
    save_json(partial / MANIFEST, manifest)
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    print(f"built {folder}: {manifest['mean_words']['en']:.1f} En words a line", flush=True)
    return folder


# -- the probe, run inside seq2seq fit (the repository on its PYTHONPATH) --------------------
class FirstStepProbe(Callback):
    """On rank 0: writes to the JSON file $BENCH_CORPUS_PROBE the time.time() at the end of
    the first optimizer step, and the target tokens/s of the steps after $BENCH_CORPUS_WARMUP
    (else 10) up to the last."""

    def __init__(self) -> None:
        self.out = os.environ.get(PROBE_OUT)
        self.warmup = int(os.environ.get(PROBE_WARMUP, "10"))
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
            save_json(Path(self.out), self.record)
        if step == self.warmup:
            self.since = time.perf_counter()
        elif self.since is not None and step > self.warmup:
            self.tokens += batch.target_tokens
            seconds = time.perf_counter() - self.since
            self.record.update(
                tokens=self.tokens, seconds=seconds, measured_steps=step - self.warmup
            )
            self.record["target_tokens_per_s"] = self.tokens / seconds
            if step == trainer.max_steps:
                save_json(Path(self.out), self.record)

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.global_rank == 0 and self.out:
            save_json(Path(self.out), self.record)


# -- the measured runs -----------------------------------------------------------------------
def role(process: Process, processes: list[Process], root: int) -> str:
    """``rank k`` for the command itself (rank 0) and each process DDP launched anew (the
    same command line, LOCAL_RANK=k, not inherited from its parent); ``worker`` for the rest
    (forked data workers and the like)."""
    if process.pid == root:
        return f"rank {process.rank or 0}"
    parent = next((p for p in processes if p.pid == process.ppid), None)
    command = next((p.cmdline for p in processes if p.pid == root), None)
    inherited = parent is not None and parent.rank == process.rank
    launched = process.cmdline == command and not inherited
    return f"rank {process.rank}" if process.rank and launched else "worker"


def disk_usage(folder: Path) -> int:
    """Bytes allocated on disk under ``folder`` (du's figure), 0 when it does not exist."""
    files = (Path(top) / name for top, _, names in os.walk(folder) for name in names)
    return sum(path.stat().st_blocks * 512 for path in files if not path.is_symlink())


def measure(key: str, run_name: str, source: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One run of ``seq2seq fit`` on ``source``: ``first`` without its cache, ``second``
    and ``ddp`` with it."""
    cache = (args.out / "cache" / key).resolve()
    run_dir = (args.out / "runs" / f"{key}-{run_name}").resolve()
    if run_name == "first":
        shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    probe = run_dir / "probe.json"
    # A cosine over a few steps is refused (shorter than its warm-up); a constant rate after
    # the warm-up is the very same learning rate within the warm-up's 500 steps.
    command = fit_command(
        args.fit_config, source.resolve(), run_dir, "--data.cache_dir", str(cache),
        "--trainer.max_steps", str(args.steps), "--trainer.max_time", "null",
        "--model.schedule", "constant",
        "--trainer.callbacks+=scripts.bench.bench_corpus.FirstStepProbe",
    )  # fmt: skip
    if run_name == "ddp":
        command += ["--trainer.strategy", "ddp", "--trainer.devices", "2"]
        command += ["--trainer.accelerator", "cpu"]
    cache_present = cache.exists()
    print(f"[{key} {run_name}] {' '.join(command[1:])}", flush=True)
    env = {
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        PROBE_OUT: str(probe),
        PROBE_WARMUP: str(max(1, min(args.warmup, args.steps // 2))),
    }  # fmt: skip
    usage = run(command, run_dir / "fit.out", run_dir / "fit.err", env, args.timeout * 60)
    processes = [{
        "pid": p.pid, "role": role(p, usage.processes, usage.pid), "name": p.name,
        "cmdline": p.cmdline[:200], "peak_rss_gb": p.peak_rss_mb / 1024,
        "peak_anon_gb": p.peak_anon_mb / 1024,
    } for p in usage.processes]  # fmt: skip
    probed = load_json(probe)
    first = probed.get("first_step_time")
    record = {
        "start_time": usage.start,
        "status": usage.status,
        "seconds": usage.seconds,
        "timed_out": usage.timed_out,
        "peak_rss_gb": max((p["peak_rss_gb"] for p in processes), default=None),
        "peak_anon_gb": max((p["peak_anon_gb"] for p in processes), default=None),
        "processes": processes,
        "run": run_name,
        "pairs": args.pairs_of[key],
        "steps": args.steps,
        "cache_present_at_start": cache_present,
        "cache_bytes": disk_usage(cache),
        "first_step_seconds": first - usage.start if first else None,
        "target_tokens_per_s": probed.get("target_tokens_per_s"),
        "probe": probed,
        "command": command,
    }
    if usage.status != 0:
        errors = (run_dir / "fit.err").read_text(errors="replace").splitlines()
        record["stderr_tail"] = "\n".join(errors[-30:])
    for checkpoints in [*run_dir.glob("logs/version_*/checkpoints"), run_dir / "checkpoints"]:
        shutil.rmtree(checkpoints, ignore_errors=True)  # 170 MB a run, of no use here
    return record


def run_line(key: str, run_name: str, record: dict[str, Any]) -> str:
    if record["status"] != 0:
        return (
            f"[{key} {run_name}] FAILED (exit {record['status']}):\n{record.get('stderr_tail', '')}"
        )
    first = record["first_step_seconds"]
    shown = f"{first:.1f} s" if first is not None else "no step"
    return (
        f"[{key} {run_name}] first step after {shown}, whole run {record['seconds']:.1f} s, "
        f"peak RSS {record['peak_rss_gb']:.2f} GB over {len(record['processes'])} processes, "
        f"cache {cell(record, 'cache_bytes', 'GB')}"
    )


# -- the report -----------------------------------------------------------------------------
def ok(results: dict[str, Any], key: str, run_name: str) -> dict[str, Any] | None:
    """The record of a successful run, else None."""
    record = results.get("runs", {}).get(key, {}).get(run_name)
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
    records = [ok(results, key, run_name) for run_name in ("first", "second")]
    rates = [r["target_tokens_per_s"] for r in records if r and r["target_tokens_per_s"]]
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


def failed_or(results: dict[str, Any], key: str, run_name: str, text: str) -> str:
    record = results.get("runs", {}).get(key, {}).get(run_name)
    return f"failed (exit {record['status']})" if record and record["status"] != 0 else text


def pairs_cell(results: dict[str, Any], key: str) -> str:
    return f"{results['pairs'][key]:,}" + (" (Multi30k)" if key == REFERENCE else "")


def table(results: dict[str, Any], keys: list[str]) -> list[str]:
    reference_speed = mean_speed(results, REFERENCE)
    rows = []
    for key in keys:
        first, second = ok(results, key, "first"), ok(results, key, "second")
        speed = mean_speed(results, key)
        ratio = f" ({speed / reference_speed:.2f}×)" if speed and reference_speed else ""
        cells = [pairs_cell(results, key)]
        for name, record in (("first", first), ("second", second)):
            cells.append(failed_or(results, key, name, cell(record, "first_step_seconds", "s")))
            cells.append(
                f"{cell(record, 'peak_rss_gb', 'GB')} ({cell(record, 'peak_anon_gb', 'GB')})"
            )
        cells += [cell(first, "cache_bytes", "GB"), f"{speed:,.0f}{ratio}" if speed else "–"]
        rows.append(cells)
    runs = [(f"{run} run to first step", f"peak RSS {run} (anon)") for run in ("first", "second")]
    header = ["pairs", *runs[0], *runs[1], "cache on disk", "tokens/s vs Multi30k"]
    return markdown_table(header, rows)


def ddp_table(results: dict[str, Any], keys: list[str]) -> list[str]:
    """The DDP runs: time to the first step and each process's peak."""
    rows = []
    for key in keys:
        if not (record := results.get("runs", {}).get(key, {}).get("ddp")):
            continue
        if record["status"] != 0:
            failed = f"failed (exit {record['status']})"
            rows.append([f"{results['pairs'][key]:,}", failed, *[""] * 4])
            continue
        peaks = rank_peaks(record)
        workers = [p["peak_rss_gb"] for p in record["processes"] if p["role"] == "worker"]
        cells = [
            pairs_cell(results, key),
            cell(record, "first_step_seconds", "s"),
            *(f"{peaks[r]:.2f} GB" if r in peaks else "–" for r in ("rank 0", "rank 1")),
            f"{len(workers)}, largest {max(workers):.2f} GB" if workers else "none",
            f"{record['target_tokens_per_s']:,.0f}" if record["target_tokens_per_s"] else "–",
        ]
        rows.append(cells)
    if not rows:
        return []
    peaks = [f"peak RSS rank {rank}" for rank in (0, 1)]
    header = ["pairs", "run to first step", *peaks, "other processes", "tokens/s"]
    title = "DDP, 2 CPU processes, cache present (tokens/s: rank 0's batches only):"
    return ["", title, "", *markdown_table(header, rows)]


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
    base = [r["peak_rss_gb"] for name in ("first", "second") if (r := ok(results, REFERENCE, name))]
    lines = ["", f"Targets at {results['pairs'][key]:,} pairs (set for 5,000,000):", ""]
    rises = {"largest process": max(ours) - max(base)} if base else {}
    ddp, ddp_base = ok(results, key, "ddp"), ok(results, REFERENCE, "ddp")
    if ddp and ddp_base:
        ranks, base_ranks = rank_peaks(ddp), rank_peaks(ddp_base)
        rises.update(
            {f"DDP {r}": ranks[r] - base_ranks[r] for r in sorted(set(ranks) & set(base_ranks))}
        )
    for what, rise in rises.items():
        lines.append(f"- peak RSS, {what}: {rise:+.2f} GB over Multi30k's "
                     f"(≤ {TARGET_RSS_GB} GB): {verdict(rise <= TARGET_RSS_GB)}")  # fmt: skip
    for name, limit, record in (
        ("first", TARGET_FIRST_S, first),
        ("second", TARGET_SECOND_S, second),
    ):
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
    with figure(out, dpi=None, ncols=2, figsize=(11, 4)) as (left, right):
        pairs = results["pairs"]

        def series(run_name: str, value: Any) -> tuple[list[int], list[float]]:
            points = [(pairs[k], value(r)) for k in keys if (r := ok(results, k, run_name))]
            points = [(x, y) for x, y in sorted(points) if y is not None]
            return [x for x, _ in points], [y for _, y in points]

        for run_name in ("first", "second"):
            left.plot(
                *series(run_name, lambda r: r["first_step_seconds"]), "o-", label=f"{run_name} run"
            )
            right.plot(*series(run_name, lambda r: r["peak_rss_gb"]), "o-", label=f"{run_name} run")
        for rank in ("rank 0", "rank 1"):
            xs, ys = series("ddp", lambda r, rank=rank: rank_peaks(r).get(rank))
            right.plot(xs, ys, "s--", label=f"DDP {rank}")
        left.axhline(TARGET_FIRST_S, color="C0", ls=":", lw=1, label="targets (20 min, 60 s)")
        left.axhline(TARGET_SECOND_S, color="C1", ls=":", lw=1)
        if base := ok(results, REFERENCE, "first"):
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


# -- main ------------------------------------------------------------------------------------
def jobs(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(results key, run) in order: Multi30k's first, then each size's."""
    ddp = args.ddp_at in args.sizes
    yield from ((REFERENCE, name) for name in RUNS if name != "ddp" or ddp)
    for size in args.sizes:
        yield from ((str(size), name) for name in RUNS if name != "ddp" or size == args.ddp_at)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--multi30k", type=Path, default=Path("data/multi30k"))
    parser.add_argument("--out", type=Path, default=Path("runs/bench/corpus"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 5_000_000])
    parser.add_argument("--steps", type=int, default=60, help="optimizer steps of each run")
    parser.add_argument("--warmup", type=int, default=10, help="steps before tokens/s counts")
    parser.add_argument("--ddp-at", type=int, help="size of the DDP run (default: nearest 1M)")
    parser.add_argument("--seed", type=int, default=1, help="of the corpora's pairs")
    parser.add_argument("--timeout", type=float, default=90, help="minutes, for each run")
    parser.add_argument(
        "--fit-config", type=Path, nargs="+", default=FIT_CONFIGS, help="merged in order"
    )
    args = parser.parse_args()
    args.sizes = sorted(set(args.sizes))
    # the DDP run goes to the size closest to 1M pairs on a log scale
    args.ddp_at = args.ddp_at or min(args.sizes, key=lambda n: abs(math.log(n / 1_000_000)))
    corpora = {str(n): build_corpus(args.multi30k, args.out, n, args.seed) for n in args.sizes}
    corpora[REFERENCE] = args.multi30k
    args.pairs_of = {REFERENCE: len(read_lines(args.multi30k / "train.en.gz"))}
    args.pairs_of.update({str(n): n for n in args.sizes})

    record = args.out / "corpus.json"
    results = load_json(record)
    results.setdefault("runs", {})
    results["pairs"] = {**results.get("pairs", {}), **args.pairs_of}
    results["steps"] = args.steps
    omp = os.environ.get("OMP_NUM_THREADS", "2")
    results["machine"] = {"cpus": os.cpu_count(), "omp_threads": omp, "node": platform.node()}
    for key, run_name in jobs(args):
        done = results["runs"].setdefault(key, {})
        if run_name in done and done[run_name]["status"] == 0:
            continue  # measured; a failed run is tried again
        done[run_name] = measure(key, run_name, corpora[key], args)
        print(run_line(key, run_name, done[run_name]), flush=True)
        save_json(record, results)  # a finished run survives
    keys = [REFERENCE, *(str(n) for n in args.sizes)]
    text = report(results, keys)
    (args.out / "table.md").write_text(text)
    plot(results, keys, args.out / "corpus.png")
    print(text)
    print(f"wrote {record}, {args.out / 'table.md'} and {args.out / 'corpus.png'}")


if __name__ == "__main__":
    main()
