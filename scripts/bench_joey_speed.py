"""Training target tokens/s of seq2seq and Joey NMT as whole training runs, alternating A B A B.

For each architecture (the reference Transformer, the Bahdanau RNN) a round runs Joey NMT's
``train`` for ``--minutes`` of wall clock, then ``seq2seq fit`` with the matching config for
as long, both with validation off and the same number of threads, so that both spend the
time in training steps on the same data, vocabulary size and batch budget. The next round
does the same again, so the host's own swings of speed fall on both toolkits alike.

Throughput is real target tokens over each logging interval: Joey's "Tokens per Sec" lines
(every ``--joey-log-every`` steps) and seq2seq's ``train/device/items_per_sec`` (Lightning's
ThroughputMonitor, every ``--log-every`` steps). Each run's figure is the median of its
intervals, the first left out as warm-up; each toolkit's figure is the median over its runs;
the report gives their ratio and each round's.

Resumable: the JSON keeps every finished run and a run that is there is not redone, so a
larger ``--rounds`` adds rounds. Joey NMT lives in its own environment (``peer_joey.py``).

    python scripts/bench_joey_speed.py --minutes 5 --rounds 2 --out runs/bench/joey-speed.json
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_quality import (  # scripts/ is on sys.path when a script runs
    config_arguments,
    max_time,
    recipe_configs,
    run,
)
from peer_joey import (
    CACHE,
    REPO,
    ensure_venv,
    load_results,
    measure_train,
    prepare_data,
    save_results,
)

# architecture -> (seq2seq recipe's config files, Joey NMT config in the peers folder)
ARCHITECTURES = {
    "transformer": (recipe_configs("en-de", REPO)["transformer"], "transformer"),
    "rnn": (recipe_configs("en-de", REPO)["bahdanau"], "rnn"),
}
RATE_COLUMN = "train/device/items_per_sec"
RATE = "target_tokens_per_sec"  # what a run reports, for Joey NMT and for seq2seq


def logged_rates(run_dir: Path) -> list[float]:
    """seq2seq's logged target tokens/s, in step order, from the run's metrics.csv."""
    rates = []
    for path in sorted(run_dir.glob("logs/version_*/metrics.csv")):
        with path.open(newline="") as f:
            rates += [float(row[RATE_COLUMN]) for row in csv.DictReader(f) if row.get(RATE_COLUMN)]
    return rates


def steady_rate(rates: list[float]) -> float | None:
    """The median of a run's interval rates with the first (warm-up) left out."""
    counted = rates[1:] or rates
    return statistics.median(counted) if counted else None


def train_ours(
    configs: list[Path], corpus: Path, run_dir: Path, minutes: float, log_every: int
) -> dict:
    """``seq2seq fit`` for ``minutes`` with validation off; its target tokens/s and peak RSS."""
    command = [
        sys.executable, "-m", "seq2seq.cli", "fit", *config_arguments(configs),
        "--data.source", str(corpus), "--trainer.default_root_dir", str(run_dir),
        "--trainer.max_time", max_time(minutes), "--trainer.limit_val_batches", "0",
        "--trainer.log_every_n_steps", str(log_every), "--trainer.enable_progress_bar", "false",
    ]  # fmt: skip
    run_dir.mkdir(parents=True, exist_ok=True)
    usage = run(command, run_dir / "fit.out", run_dir / "fit.log")
    rates = logged_rates(run_dir)
    if usage["status"] != 0 or not rates:
        raise RuntimeError(f"seq2seq fit gave no throughput (exit {usage['status']}): {run_dir}")
    return {
        "target_tokens_per_sec": steady_rate(rates),
        "target_tokens_per_sec_all": rates,
        "wall_seconds": round(usage["seconds"], 1),
        "peak_rss_gb": round(usage["peak_rss_mb"] / 1024, 2),
    }


def summarise(rounds: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """Medians of ``key`` over the rounds where both toolkits ran, their ratio and each round's."""
    paired = [r for r in rounds if "seq2seq" in r and "joey" in r]
    if not paired:
        return {}
    ours = [r["seq2seq"][key] for r in paired]
    joey = [r["joey"][key] for r in paired]
    return {
        "paired_rounds": len(paired),
        "seq2seq_median": statistics.median(ours),
        "joey_median": statistics.median(joey),
        "ratio": statistics.median(ours) / statistics.median(joey),
        "ratio_per_round": [round(a / b, 2) for a, b in zip(ours, joey, strict=True)],
    }


Measure = Callable[[str, str, int], dict[str, Any]]  # (toolkit, name, round) -> one run


def alternate(
    results: dict[str, Any], out: Path, names: list[str], rounds: int, measure: Measure, key: str
) -> None:
    """A B A B: in each round, for each name, Joey NMT's run and then seq2seq's.

    ``results[name]["rounds"]`` keeps every run and is saved to ``out`` as each one ends;
    a run already there is not redone, so a larger ``rounds`` only adds rounds.
    """
    for index in range(rounds):
        for name in names:
            entry = results.setdefault(name, {"rounds": []})
            entry["rounds"] += [{} for _ in range(index + 1 - len(entry["rounds"]))]
            done = entry["rounds"][index]
            for toolkit in ("joey", "seq2seq"):
                if toolkit not in done:
                    done[toolkit] = measure(toolkit, name, index)
                    save_results(out, results)
            entry.update(summarise(entry["rounds"], key))
            save_results(out, results)
            print(f"[{name} round {index}] ratios {entry.get('ratio_per_round')}", flush=True)


def add_shared_arguments(parser: argparse.ArgumentParser, out: str) -> None:
    """What both comparisons with Joey NMT take: rounds, threads, corpus, cache, output."""
    parser.add_argument("--rounds", type=int, default=2, help="A B rounds")
    parser.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS of both")
    parser.add_argument("--corpus", type=Path, default=REPO / "data" / "multi30k")
    parser.add_argument("--cache", type=Path, default=CACHE, help="Joey's environment and runs")
    parser.add_argument("--out", type=Path, default=Path(out))


def check_shared_arguments(
    parser: argparse.ArgumentParser, args: argparse.Namespace, corpus_file: str
) -> None:
    if args.rounds < 1 or args.threads < 1:
        parser.error("--rounds and --threads must be positive")
    if not (args.corpus / corpus_file).exists():
        parser.error(f"no Multi30k corpus in {args.corpus} (run `make multi30k`)")


def joey_environment(args: argparse.Namespace) -> tuple[Path, Path]:
    """The threads of both toolkits' runs (they inherit them); Joey NMT's python and data."""
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    python = ensure_venv(args.cache / "joeynmt-venv")
    return python, prepare_data(args.corpus, args.cache / "joey-data" / "multi30k-en-de")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", choices=sorted(ARCHITECTURES),
                        default=sorted(ARCHITECTURES))  # fmt: skip
    parser.add_argument("--minutes", type=float, default=5.0, help="wall clock of every run")
    parser.add_argument("--log-every", type=int, default=50, help="seq2seq's steps per rate")
    parser.add_argument("--joey-log-every", type=int, default=10, help="Joey's steps per rate")
    add_shared_arguments(parser, "runs/bench/joey-speed.json")
    args = parser.parse_args(argv)
    if args.minutes <= 0:
        parser.error("--minutes must be positive")
    check_shared_arguments(parser, args, "train.en.gz")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    python, joey_data = joey_environment(args)
    work = args.out.with_suffix("")  # our runs' folders beside the JSON

    def measure(toolkit: str, model: str, index: int) -> dict[str, Any]:
        configs, joey_config = ARCHITECTURES[model]
        if toolkit == "joey":
            joey_work = args.cache / "joey-runs" / "speed" / f"{model}-round{index}"
            joey_work.mkdir(parents=True, exist_ok=True)
            return measure_train(
                python, joey_config, joey_data, joey_work, args.minutes, args.joey_log_every
            )
        run_dir = work / f"{model}-round{index}"
        return train_ours(configs, args.corpus, run_dir, args.minutes, args.log_every)

    results = load_results(args.out)
    alternate(results, args.out, args.models, args.rounds, measure, RATE)
    for entry in results.values():
        entry.update(minutes=args.minutes, threads=args.threads)
    save_results(args.out, results)
    print(json.dumps({m: {k: v for k, v in e.items() if k != "rounds"} for m, e in results.items()},
                     indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
