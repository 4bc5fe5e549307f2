"""Validation BLEU against training time, for one or more runs, from their metrics.csv.

The time axis is Lightning's ThroughputMonitor ``train/time``: seconds spent in the
training loop, validation excluded. Each validation is placed at the last ``train/time``
logged before it (at most ``log_every_n_steps`` steps early). ``--metric
val_bleu_literature`` plots the lowercased, tokenised BLEU instead (runs from before it
was logged have none), the one to compare a model trained on lowercased text with.

    python scripts/plot_bleu_curve.py --out docs/bleu-curve.png \\
        Bahdanau=runs/multi30k-en-de-bahdanau Transformer=runs/multi30k-en-de-transformer
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

METRICS = {
    "val_bleu": "val BLEU (sacrebleu, greedy)",
    "val_bleu_literature": "val BLEU (lowercased, tokenised; greedy)",
}


def bleu_curve(run_dir: Path, metric: str = "val_bleu") -> list[tuple[float, float]]:
    """(training minutes, val BLEU) at each validation of the run's newest log version."""
    versions = sorted(
        (run_dir / "logs").glob("version_*/metrics.csv"), key=lambda p: p.stat().st_mtime
    )
    if not versions:
        raise SystemExit(f"no logs/version_*/metrics.csv under {run_dir}")
    curve, minutes = [], 0.0
    with versions[-1].open() as file:
        for row in csv.DictReader(file):
            if row.get("train/time"):
                minutes = float(row["train/time"]) / 60
            if row.get(metric):
                curve.append((minutes, float(row[metric])))
    if not curve:
        raise SystemExit(f"{versions[-1]} has no {metric}")
    return curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="NAME=RUN_DIR (the config's default_root_dir)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench/bleu-curve.png"))
    parser.add_argument("--metric", choices=sorted(METRICS), default="val_bleu")
    args = parser.parse_args()
    curves = {}
    for spec in args.runs:
        name, _, path = spec.partition("=")
        curves[name] = bleu_curve(Path(path or name), args.metric)
    figure, axes = plt.subplots(figsize=(6, 4))
    for name, curve in curves.items():
        axes.plot(*zip(*curve, strict=True), marker="o", label=name)
    axes.set_xlabel("training minutes (validation excluded)")
    axes.set_ylabel(METRICS[args.metric])
    axes.grid(alpha=0.3)
    axes.legend()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(args.out, dpi=120)
    print(
        json.dumps({name: [[round(m, 1), round(b, 2)] for m, b in c] for name, c in curves.items()})
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
