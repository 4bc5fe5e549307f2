"""Validation BLEU against training time, for one or more runs, from their metrics.csv.

The time axis is Lightning's ThroughputMonitor ``train/time``: seconds spent in the
training loop, validation excluded. Each validation is placed at the last ``train/time``
logged before it (at most ``log_every_n_steps`` steps early). ``--metric
val_bleu_literature`` plots the lowercased, tokenized BLEU instead (runs from before it
was logged have none), the one to compare a model trained on lowercased text with.

    python -m scripts.analysis.plot_bleu_curve --out docs/bleu-curve.png \\
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
    "val_bleu_literature": "val BLEU (lowercased, tokenized; greedy)",
}


def bleu_curve(run_dir: Path, metric: str = "val_bleu") -> list[tuple[float, float]]:
    """(training minutes, val BLEU) at each validation of the run's newest training.

    A fit continued with ``--ckpt_path last`` logs a new version whose clock starts at 0
    again and whose steps go on from the checkpoint's: its minutes are put after the
    version before it. A version whose steps start over is a new training, and the curve
    starts over with it.
    """
    versions = sorted(
        (run_dir / "logs").glob("version_*/metrics.csv"),
        key=lambda path: int(path.parent.name.removeprefix("version_")),
    )
    if not versions:
        raise SystemExit(f"no logs/version_*/metrics.csv under {run_dir}")
    curve: list[tuple[float, float]] = []
    offset, first_step = 0.0, -1  # minutes before this version; the one before's first step
    for path in versions:
        with path.open() as file:
            rows = [row for row in csv.DictReader(file) if row.get("step")]
        if not rows:
            continue
        if int(rows[0]["step"]) <= first_step:  # steps start over: a new training
            curve, offset = [], 0.0
        first_step, minutes = int(rows[0]["step"]), 0.0
        for row in rows:
            if row.get("train/time"):
                minutes = float(row["train/time"]) / 60
            if row.get(metric):
                curve.append((offset + minutes, float(row[metric])))
        offset += minutes
    if not curve:
        raise SystemExit(f"no {metric} in {run_dir / 'logs'}")
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
