"""Gather the benchmark records of one ``make bench`` folder into a Markdown summary.

Reads what the parts wrote (each may be missing: its rows say so), prints the summary and
writes it to ``<folder>/summary.md``: every target of BENCHMARKS.md with the measured
value, Joey NMT's beside ours, and whether the target is met.

    python -m scripts.bench.bench_summary runs/bench
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path
from typing import Any

import torch

from scripts.bench.benchkit import best_by_literature_bleu, load_json


def get(record: dict[str, Any], *keys: str) -> Any:
    """record[k1][k2]... or None when any level is missing."""
    for key in keys:
        if not isinstance(record, dict) or key not in record:
            return None
        record = record[key]
    return record


def quality_row(results: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((r for r in results.get("results", []) if r["name"] == name), None)


def target_line(what: str, ours: float | None, theirs: float | None, goal: float) -> str:
    """One row: ours, the peer's, their ratio and whether it reaches ``goal`` (a ratio)."""
    if ours is None or theirs is None:
        missing = "ours" if ours is None else "the peer's"
        shown = [f"{value:,.1f}" if value is not None else "–" for value in (ours, theirs)]
        cells = f"{shown[0]} | {shown[1]} | – | ≥ {goal:g}×"
        return f"| {what} | {cells} | not measured ({missing}) |"
    ratio = ours / theirs
    verdict = "met" if ratio >= goal else "missed"
    return f"| {what} | {ours:,.1f} | {theirs:,.1f} | {ratio:.2f}× | ≥ {goal:g}× | {verdict} |"


TRAINING = "target tok/s, whole runs A B A B"
DECODING = "beam-5 decoding of test_2016, sentences/s, A B A B"
BF16_DECODING = "the same, ours under --bf16 autocast against Joey NMT's fp32 (its only CPU search)"
NN_TRANSFORMER = "Transformer training, target tok/s (torch.nn.Transformer)"


def joey_line(what: str, record: dict[str, Any], name: str, goal: float) -> str:
    """A target row from an A B A B comparison with Joey NMT: ``record[name]``'s medians."""
    return target_line(
        what, get(record, name, "seq2seq_median"), get(record, name, "joey_median"), goal
    )


def summary(folder: Path) -> str:
    speed = load_json(folder / "transformer-speed.json")
    joey_speed = load_json(folder / "joey-speed.json")  # whole training runs, A B A B
    joey_decoding = load_json(folder / "joey-decoding.json")  # test_2016, A B A B
    de = load_json(folder / "quality-en-de" / "results.json")
    ours_transformer = get(speed, "median_target_tokens_per_s", "seq2seq Transformer")
    plain = get(speed, "median_target_tokens_per_s", "torch.nn.Transformer")
    transformer = quality_row(de, "transformer")  # the reference config, for decoding speed
    best_transformer = best_by_literature_bleu(de.get("results", []), transformers=True)
    best_rnn = best_by_literature_bleu(de.get("results", []), transformers=False)
    lines = [
        f"# Benchmark summary: {folder}",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {platform.machine()}, "
        f"{os.cpu_count()} CPUs, torch {torch.__version__} with {torch.get_num_threads()} threads.",
        "",
        "| measurement (peer) | seq2seq | peer | ratio | target | |",
        "|---|---|---|---|---|---|",
        joey_line(f"Transformer training, {TRAINING} (Joey NMT)", joey_speed, "transformer", 2.5),
        joey_line(f"Bahdanau RNN training, {TRAINING} (Joey NMT)", joey_speed, "rnn", 2.0),
        joey_line(f"Transformer {DECODING} (Joey NMT)", joey_decoding, "beam5", 10.0),
        joey_line(BF16_DECODING, joey_decoding, "beam5-bf16", 10.0),
        target_line(NN_TRANSFORMER, ours_transformer, plain, 1.3),
        "",
        "| En→De test_2016: literature BLEU, beam-5 sentences/s | measured | target | |",
        "|---|---|---|---|",
    ]
    for what, row, key, goal in (
        ("best Transformer", best_transformer, "bleu_literature", 41.0),
        ("best RNN", best_rnn, "bleu_literature", 38.0),
        ("Transformer beam-5 decoding", transformer, "decode_sentences_per_sec", 100.0),
    ):
        if row is None or row.get(key) is None:
            lines.append(f"| {what} | – | ≥ {goal:g} | not measured |")
            continue
        verdict = "met" if row[key] >= goal else "missed"
        label = f"{what} ({row['name']}, {row['budget']})"
        lines.append(f"| {label} | {row[key]:.2f} | ≥ {goal:g} | {verdict} |")
    for pair in ("en-de", "en-fr"):
        table = folder / f"quality-{pair}" / "results.md"
        if table.exists():
            lines += ["", table.read_text().replace("# ", "## ", 1).rstrip()]
    plots = sorted(p.relative_to(folder) for p in folder.rglob("*.png"))
    if plots:
        lines += ["", "Plots: " + ", ".join(f"`{p}`" for p in plots)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="what `make bench` wrote (runs/bench)")
    folder = parser.parse_args().folder
    if not folder.is_dir():
        parser.error(f"{folder} is not a folder: run `make bench` (or one of its parts) first")
    text = summary(folder)
    (folder / "summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
