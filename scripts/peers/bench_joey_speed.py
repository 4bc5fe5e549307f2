"""Training target tokens/s of seq2seq and Joey NMT as whole training runs, alternating A B A B.

For each architecture (the reference Transformer, the Bahdanau RNN) a round runs Joey NMT's
``train`` for ``--minutes`` of wall clock, then ``seq2seq fit`` of the matching recipe for as
long, both with validation off and the same threads. Throughput is real target tokens over
each logging interval (Joey's "Tokens per Sec", seq2seq's ``train/device/items_per_sec``);
a run's figure is the median of its intervals, the first left out as warm-up; each
toolkit's is the median over its runs. Resumable: a run in the JSON is not redone, so a
larger ``--rounds`` adds rounds.

    python -m scripts.peers.bench_joey_speed --minutes 5 --rounds 2 --out runs/bench/joey-speed.json
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from scripts.bench.benchkit import REPO, fit_command, logged_rates, max_time, recipe_configs
from scripts.bench.benchkit import run as run_command
from scripts.peers.joeykit import (
    add_comparison_arguments,
    check_comparison_arguments,
    compare,
    joey_environment,
    measure_train,
    steady_rate,
)

# architecture -> (seq2seq recipe's config files, Joey NMT config in the peers folder)
ARCHITECTURES = {
    "transformer": (recipe_configs("en-de", REPO)["transformer"], "transformer"),
    "rnn": (recipe_configs("en-de", REPO)["bahdanau"], "rnn"),
}
TOKENS = "target_tokens_per_sec"  # what a run reports, for Joey NMT and for seq2seq


def train_ours(
    configs: list[Path], corpus: Path, run_dir: Path, minutes: float, log_every: int
) -> dict[str, Any]:
    """``seq2seq fit`` for ``minutes`` with validation off; its target tokens/s and peak RSS."""
    command = fit_command(
        configs, corpus, run_dir, "--trainer.max_time", max_time(minutes),
        "--trainer.limit_val_batches", "0", "--trainer.log_every_n_steps", str(log_every),
    )  # fmt: skip
    run_dir.mkdir(parents=True, exist_ok=True)
    usage = run_command(command, run_dir / "fit.out", run_dir / "fit.log")
    rates = logged_rates(run_dir)
    if usage.status != 0 or not rates:
        raise RuntimeError(f"seq2seq fit gave no throughput (exit {usage.status}): {run_dir}")
    return {
        TOKENS: steady_rate(rates),
        "target_tokens_per_sec_all": rates,
        "wall_seconds": round(usage.seconds, 1),
        "peak_rss_gb": round(usage.peak_rss_mb / 1024, 2),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", choices=sorted(ARCHITECTURES),
                        default=sorted(ARCHITECTURES))  # fmt: skip
    parser.add_argument("--minutes", type=float, default=5.0, help="wall clock of every run")
    parser.add_argument("--log-every", type=int, default=50, help="seq2seq's steps per rate")
    parser.add_argument("--joey-log-every", type=int, default=10, help="Joey's steps per rate")
    add_comparison_arguments(parser, "runs/bench/joey-speed.json")
    args = parser.parse_args(argv)
    if args.minutes <= 0:
        parser.error("--minutes must be positive")
    check_comparison_arguments(parser, args, "train.en.gz")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    python, joey_data = joey_environment(args)
    work = args.out.with_suffix("")  # our runs' folders beside the JSON

    def measure(toolkit: str, model: str, index: int) -> dict[str, Any]:
        configs, joey_config = ARCHITECTURES[model]
        if toolkit == "seq2seq":
            run_dir = work / f"{model}-round{index}"
            return train_ours(configs, args.corpus, run_dir, args.minutes, args.log_every)
        joey_work = args.cache / "joey-runs" / "speed" / f"{model}-round{index}"
        joey_work.mkdir(parents=True, exist_ok=True)
        minutes, every = args.minutes, args.joey_log_every
        return measure_train(python, joey_config, joey_data, joey_work, minutes, every)

    compare(args.out, args.models, args.rounds, TOKENS, measure, minutes=args.minutes,
            threads=args.threads)  # fmt: skip


if __name__ == "__main__":
    main()
