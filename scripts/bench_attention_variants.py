"""Train every attention config on Multi30k En->De under one budget and compare them.

For each config (default: every variant under configs/multi30k/en-de/) this runs
``seq2seq fit`` with the same budget (``--minutes`` of wall-clock time per config, given
to Lightning as ``--trainer.max_time``, and/or ``--epochs``), then scores the best
checkpoint on test_2016_flickr with ``seq2seq evaluate --json --beam 5``, which also
reports its decoding speed. It writes ``results.md`` and
``results.json`` with: sacreBLEU, the Multi30k literature's BLEU (lowercased, Moses-
tokenised), chrF, training target tokens/s (the mean of ``train/device/items_per_sec``
in the run's metrics.csv), decoding sentences/s and each subprocess's peak RSS.

It is resumable: a config whose ``<out>/<name>/result.json`` exists is skipped, and a
finished training (``train.json``) is not redone when only its evaluation is missing.

    python scripts/bench_attention_variants.py --minutes 20                # the benchmark
    python scripts/bench_attention_variants.py --smoke --configs luong-dot luong-local-p
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from seq2seq.sources import read_lines

CONFIGS = [
    "bahdanau",
    "luong-dot",
    "luong-general",
    "luong-concat",
    "luong-location",
    "luong-local-m",
    "luong-local-p",
    "rnn-dot-product",
    "rnn-multihead",
]
SEQ2SEQ = [sys.executable, "-m", "seq2seq.cli"]
TEST_SPLIT = "test_2016_flickr"


def run(command: list[str], stdout: Path, stderr: Path) -> dict[str, float]:
    """Run ``command``; return its exit status, wall-clock seconds and peak RSS (MB)."""
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    with stdout.open("w") as out, stderr.open("w") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(process.pid, 0)  # this child's own resource usage
    process.returncode = os.waitstatus_to_exitcode(status)
    return {
        "status": process.returncode,
        "seconds": time.perf_counter() - start,
        "peak_rss_mb": usage.ru_maxrss / 1024,  # Linux reports kilobytes
    }


def max_time(minutes: float) -> str:
    """Lightning's DD:HH:MM:SS for a budget in minutes."""
    minutes_total, seconds = divmod(round(minutes * 60), 60)
    hours, minutes_left = divmod(minutes_total, 60)
    days, hours = divmod(hours, 24)
    return f"{days:02d}:{hours:02d}:{minutes_left:02d}:{seconds:02d}"


def best_checkpoint(run_dir: Path) -> Path:
    """The checkpoint with the best validation BLEU of a run (else its last one)."""
    lasts = sorted(run_dir.glob("logs/version_*/checkpoints/last.ckpt"))
    if not lasts:
        raise FileNotFoundError(f"no checkpoint under {run_dir}")
    state = torch.load(lasts[-1], map_location="cpu", weights_only=True)
    for callback in state.get("callbacks", {}).values():
        best = callback.get("best_model_path") if isinstance(callback, dict) else None
        if best and Path(best).is_file():
            return Path(best)
    return lasts[-1]


def training_speed(run_dir: Path) -> tuple[float | None, int]:
    """Mean target tokens/s over the run's logged windows, and the epochs it began."""
    speeds, epochs = [], 0
    for path in sorted(run_dir.glob("logs/version_*/metrics.csv")):
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                if row.get("train/device/items_per_sec"):
                    speeds.append(float(row["train/device/items_per_sec"]))
                if row.get("epoch"):
                    epochs = max(epochs, int(row["epoch"]) + 1)
    return (sum(speeds) / len(speeds) if speeds else None), epochs


def train(name: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """Fit one config under the budget (or reuse a finished fit); return its train.json."""
    done = folder / "train.json"
    if done.exists():
        return json.loads(done.read_text())
    run_dir = folder / "run"
    shutil.rmtree(run_dir, ignore_errors=True)  # an interrupted fit starts over
    command = [
        *SEQ2SEQ, "fit", "--config", str(args.config_dir / f"{name}.yaml"),
        "--data.source", str(args.data), "--trainer.default_root_dir", str(run_dir),
        "--trainer.enable_progress_bar", "false",
    ]  # fmt: skip
    if args.minutes is not None:
        command += ["--trainer.max_time", max_time(args.minutes)]
    if args.epochs is not None:
        command += ["--trainer.max_epochs", str(args.epochs)]
        if args.minutes is None:
            command += ["--trainer.max_time", "null"]
    if args.limit_train_batches is not None:
        # the throughput monitor needs 20 batches, then logs every log_every_n_steps
        every = max(1, min(50, args.limit_train_batches // 5))
        command += ["--trainer.limit_train_batches", str(args.limit_train_batches)]
        command += ["--trainer.log_every_n_steps", str(every)]
    print(f"[{name}] training: {' '.join(command[2:])}", flush=True)
    usage = run(command, folder / "fit.out", folder / "fit.log")
    if usage["status"] != 0:
        raise RuntimeError(f"training failed (exit {usage['status']}), see {folder / 'fit.log'}")
    tokens_per_sec, epochs = training_speed(run_dir)
    result = {
        "checkpoint": str(best_checkpoint(run_dir)),
        "train_tokens_per_sec": tokens_per_sec,
        "epochs": epochs,
        "train_seconds": usage["seconds"],
        "train_peak_rss_mb": usage["peak_rss_mb"],
    }
    done.write_text(json.dumps(result, indent=2) + "\n")
    return result


def evaluate(checkpoint: str, src: Path, ref: Path, folder: Path, beam: int) -> dict[str, Any]:
    """Scores and decoding speed from ``seq2seq evaluate --json``, and that run's peak RSS."""
    command = [*SEQ2SEQ, "evaluate", "--ckpt", checkpoint, "--src", str(src), "--ref", str(ref)]
    command += ["--beam", str(beam), "--json"]
    usage = run(command, folder / "evaluate.json", folder / "evaluate.log")
    if usage["status"] != 0:
        raise RuntimeError(f"evaluation failed, see {folder / 'evaluate.log'}")
    scores = json.loads((folder / "evaluate.json").read_text())
    return {
        "bleu": scores["bleu"]["score"],
        "bleu_literature": scores.get("bleu_literature", {}).get("score"),
        "chrf": scores["chrf"]["score"],
        "bleu_signature": scores["bleu"]["signature"],
        "test_sentences": scores["decoding"]["sentences"],
        "decode_sentences_per_sec": scores["decoding"]["sentences_per_s"],
        "eval_peak_rss_mb": usage["peak_rss_mb"],
    }


def test_files(data: Path, lines: int | None, scratch: Path) -> tuple[Path, Path]:
    """The test source and reference files, cut to their first ``lines`` in ``scratch``."""
    src, ref = data / f"{TEST_SPLIT}.en.gz", data / f"{TEST_SPLIT}.de.gz"
    if lines is None:
        return src, ref
    cut = []
    for path in (src, ref):
        target = scratch / path.name.removesuffix(".gz")
        target.write_text("".join(line + "\n" for line in read_lines(path)[:lines]))
        cut.append(target)
    return cut[0], cut[1]


COLUMNS = [
    ("config", "name", "{}"),
    ("BLEU", "bleu", "{:.2f}"),
    ("BLEU (lit.)", "bleu_literature", "{:.2f}"),
    ("chrF", "chrf", "{:.2f}"),
    ("train tok/s", "train_tokens_per_sec", "{:.0f}"),
    ("epochs", "epochs", "{}"),
    ("decode sent/s (beam 5)", "decode_sentences_per_sec", "{:.1f}"),
    ("peak RSS train (MB)", "train_peak_rss_mb", "{:.0f}"),
    ("peak RSS decode (MB)", "eval_peak_rss_mb", "{:.0f}"),
]


def write_table(results: list[dict[str, Any]], budget: str, out: Path) -> None:
    lines = [
        "# Attention variants on Multi30k En->De (test_2016_flickr)",
        "",
        f"Budget per config: {budget}. BLEU is sacreBLEU on detokenised text; BLEU (lit.)",
        "is lowercased, Moses-tokenised BLEU as in the Multi30k literature.",
        "",
        "| " + " | ".join(title for title, _, _ in COLUMNS) + " |",
        "|" + "|".join("---" for _ in COLUMNS) + "|",
    ]
    for result in results:
        cells = [
            fmt.format(result[key]) if result.get(key) is not None else "–"
            for _, key, fmt in COLUMNS
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if results:
        best = max(results, key=lambda r: r["bleu"])
        lines += ["", f"Best sacreBLEU: {best['name']} ({best['bleu']:.2f})."]
    for result in results:
        if result["budget"] != budget or result["test_sentences"] != results[0]["test_sentences"]:
            lines.append(
                f"Note: {result['name']} was run with another budget ({result['budget']}, "
                f"{result['test_sentences']} test sentences): use a fresh --out to compare."
            )
    (out / "results.md").write_text("\n".join(lines) + "\n")
    (out / "results.json").write_text(
        json.dumps({"budget": budget, "results": results}, indent=2) + "\n"
    )
    print("\n".join(lines))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=CONFIGS, choices=CONFIGS, metavar="NAME")
    parser.add_argument("--config-dir", type=Path, default=Path("configs/multi30k/en-de"))
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"), help="Multi30k folder")
    parser.add_argument("--out", type=Path, default=Path("runs/bench/attention-variants"))
    parser.add_argument("--minutes", type=float, help="wall-clock training budget per config")
    parser.add_argument("--epochs", type=int, help="epoch budget per config")
    parser.add_argument("--limit-train-batches", type=int, help="batches per epoch (smoke runs)")
    parser.add_argument("--test-lines", type=int, help="score only the first N test sentences")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument(
        "--smoke", action="store_true",
        help="prove the pipeline: 1 epoch of 25 batches, 50 test sentences",
    )  # fmt: skip
    args = parser.parse_args()
    if args.smoke:
        args.epochs = args.epochs or 1
        args.limit_train_batches = args.limit_train_batches or 25
        args.test_lines = args.test_lines or 50
    if args.minutes is None and args.epochs is None:
        parser.error("give a budget: --minutes and/or --epochs (or --smoke)")
    if not (args.data / f"{TEST_SPLIT}.en.gz").exists():
        parser.error(f"no Multi30k corpus in {args.data} (run `make multi30k` or pass --data)")
    return args


def main() -> None:
    args = parse_args()
    budget = " and ".join(
        part
        for part in (
            f"{args.minutes:g} min (trainer.max_time)" if args.minutes is not None else "",
            f"{args.epochs} epochs" if args.epochs is not None else "",
            f"{args.limit_train_batches} batches/epoch" if args.limit_train_batches else "",
        )
        if part
    )
    args.out.mkdir(parents=True, exist_ok=True)
    results, failures = [], []
    with tempfile.TemporaryDirectory() as scratch:
        src, ref = test_files(args.data, args.test_lines, Path(scratch))
        for name in args.configs:
            folder = args.out / name
            done = folder / "result.json"
            if done.exists():
                print(f"[{name}] done already: {done}")
                results.append(json.loads(done.read_text()))
                continue
            folder.mkdir(parents=True, exist_ok=True)
            try:
                trained = train(name, args, folder)
                print(f"[{name}] evaluating {trained['checkpoint']}", flush=True)
                scores = evaluate(trained["checkpoint"], src, ref, folder, args.beam)
            except (RuntimeError, FileNotFoundError) as error:
                print(f"[{name}] {error}", file=sys.stderr)
                failures.append(name)
                continue
            result = {"name": name, "budget": budget, **trained, **scores}
            done.write_text(json.dumps(result, indent=2) + "\n")
            results.append(result)
    write_table(results, budget, args.out)
    if failures:
        sys.exit(f"failed: {', '.join(failures)}")


if __name__ == "__main__":
    main()
