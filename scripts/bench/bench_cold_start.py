"""Cold start: how long ``seq2seq translate --ckpt C`` takes on one line, against importing torch.

Each round runs, one process at a time and in turn: ``python -c "import torch"`` (the
floor), ``python -m seq2seq translate --ckpt C`` on one line with this checkout's code,
and with ``--before DIR`` the same with another checkout's code first on PYTHONPATH.
Wall-clock seconds of each, median (and min) over the rounds, and the median minus torch's.

    git worktree add --detach /tmp/seq2seq-before c5fc07d
    python -m scripts.bench.bench_cold_start --ckpt runs/demo/checkpoints/best.ckpt \\
        --before /tmp/seq2seq-before --rounds 7 --out runs/bench/cold-start.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from scripts.bench.benchkit import REPO, SEQ2SEQ, alternate, python_path, save_json

TORCH = "import torch"


def commands(args: argparse.Namespace) -> dict[str, tuple[list[str], Path | None]]:
    """Each timed command by name: its argv and the checkout put first on PYTHONPATH."""
    ckpt = str(args.ckpt.resolve())
    translate = [*SEQ2SEQ, "translate", "--ckpt", ckpt]
    runs: dict[str, tuple[list[str], Path | None]] = {
        TORCH: ([sys.executable, "-c", "import torch"], None),
        "translate (this checkout)": (translate, REPO),
    }
    if args.before:
        runs[f"translate ({args.before})"] = (translate, args.before.resolve())
    return runs


def timed_run(argv: list[str], checkout: Path | None, line: str) -> float:
    """Seconds from starting ``argv`` to its exit; a failure or a missing translation raises.
    The process runs in ``checkout`` (``python -m`` puts its working folder first on the
    path), with ``checkout`` first on PYTHONPATH too."""
    env = python_path(checkout) if checkout is not None else None
    start = time.perf_counter()
    done = subprocess.run(
        argv, input=line + "\n", capture_output=True, text=True, env=env, cwd=checkout
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    if "translate" in argv and len(done.stdout.splitlines()) != 1:
        raise RuntimeError(f"expected one translated line, got {done.stdout!r}")
    return seconds


def check_checkout(checkout: Path) -> None:
    """Fail unless ``seq2seq`` imported in ``checkout`` as ``timed_run`` runs it is its own."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    where = subprocess.run(
        [sys.executable, "-c", "import seq2seq; print(seq2seq.__file__)"],
        capture_output=True, text=True, env=env, cwd=checkout, check=True,
    ).stdout.strip()  # fmt: skip
    if not Path(where).is_relative_to(checkout):
        raise RuntimeError(f"seq2seq imports from {where}, not from {checkout}")


def measure(args: argparse.Namespace) -> dict[str, dict[str, float | list[float]]]:
    """Every command once per round, in turn; the times and their median and min."""
    runs = commands(args)
    for _, checkout in runs.values():
        if checkout is not None:
            check_checkout(checkout)

    def timed(name: str, index: int) -> float:
        seconds = timed_run(*runs[name], args.line)
        print(f"round {index + 1}/{args.rounds}: {name} {seconds:.2f} s", file=sys.stderr)
        return seconds

    rounds = alternate([], args.rounds, list(runs), timed)
    times = {name: [done[name] for done in rounds] for name in runs}
    floor = statistics.median(times[TORCH])
    return {
        name: {
            "seconds": [round(t, 3) for t in values],
            "median_s": round(statistics.median(values), 3),
            "min_s": round(min(values), 3),
            "median_over_import_torch_s": round(statistics.median(values) - floor, 3),
        }
        for name, values in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ckpt", type=Path, required=True, help="the checkpoint to translate with")
    parser.add_argument("--before", type=Path, help="another checkout to time the same command of")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of alternating runs")
    parser.add_argument("--line", default="twenty-one", help="the one line to translate")
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = parser.parse_args()
    result = {
        "ckpt": str(args.ckpt),
        "rounds": args.rounds,
        "threads": os.environ.get("OMP_NUM_THREADS"),
        "commands": measure(args),
    }
    for name, figures in result["commands"].items():
        print(
            f"{name:40s} median {figures['median_s']:6.2f} s  min {figures['min_s']:6.2f} s  "
            f"median - import torch {figures['median_over_import_torch_s']:+6.2f} s"
        )
    if args.out:
        save_json(args.out, result)


if __name__ == "__main__":
    main()
