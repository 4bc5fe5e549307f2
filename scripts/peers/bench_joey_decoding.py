"""Decoding test_2016 with seq2seq and with Joey NMT, alternating A B A B.

Each round decodes the test set with Joey NMT's ``test`` and then with ``seq2seq evaluate``,
for each search (beam 5, greedy, and our beam 5 under bf16 autocast against Joey's fp32 beam
5, its only one on CPU), one process at a time with the same threads. Speed is each
toolkit's own clock around generation: sentences/s, and words/s of output (a model that
writes longer sentences takes more decoder steps); each run also gives its peak RSS, cased
sacreBLEU and mean length in words. Medians over the rounds and their ratio per search.
The models: ``--ours`` (or the checkpoint a bench_quality result.json evaluated) and
``--joey`` (by default the weights peer_joey.py's timed training left in the cache).

    python -m scripts.peers.peer_joey --model transformer --train-minutes 60 --decode
    python -m scripts.peers.bench_joey_decoding --ours runs/x/averaged.ckpt --rounds 2
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sacrebleu.metrics import BLEU

from scripts.bench.benchkit import evaluate, load_json, split_files
from scripts.peers.joeykit import (
    add_comparison_arguments,
    check_comparison_arguments,
    compare,
    joey_environment,
    measure_decode,
)
from seq2seq.text.lines import read_lines

# name -> (beam size, seq2seq under bf16 autocast). Joey NMT has no bf16 search on CPU, so
# its side of "beam5-bf16" is its fp32 beam 5 again, run afresh in that pair's round.
SEARCHES = {"beam5": (5, False), "greedy": (1, False), "beam5-bf16": (5, True)}
TEST = "test_2016_flickr"
SPEED = "sentences_per_sec"


def describe_output(hypotheses: Path, references: list[str]) -> dict[str, float]:
    """Cased sacreBLEU of a hypotheses file and its mean length in words."""
    lines = read_lines(hypotheses)
    if len(lines) != len(references):
        raise RuntimeError(f"{hypotheses}: {len(lines)} lines for {len(references)} references")
    return {
        "bleu": round(BLEU().corpus_score(lines, [references]).score, 2),
        "mean_words": round(sum(len(line.split()) for line in lines) / len(lines), 2),
    }


def with_words_per_sec(record: dict[str, Any]) -> dict[str, Any]:
    """Add output words/s: sentences/s times the mean hypothesis length."""
    return {**record, "words_per_sec": round(record[SPEED] * record["mean_words"], 1)}


def joey_latest(cache: Path, model: str) -> Path:
    """Where peer_joey.py's timed training of ``model`` leaves its last weights."""
    models = cache / "joey-runs" / model / "models"
    return (sorted(models.glob("*/latest.ckpt")) or [models / "latest.ckpt"])[-1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ours = parser.add_mutually_exclusive_group(required=True)
    ours.add_argument("--ours", type=Path, help="a seq2seq checkpoint")
    ours.add_argument("--ours-result", type=Path, help="a bench_quality result.json")
    parser.add_argument("--joey", type=Path, help="a Joey NMT checkpoint (default: see above)")
    parser.add_argument("--joey-model", choices=("transformer", "rnn"), default="transformer",
                        help="the peers' config the Joey checkpoint was trained with")  # fmt: skip
    parser.add_argument("--test-lines", type=int, help="decode only the first N test sentences")
    parser.add_argument("--searches", nargs="+", choices=sorted(SEARCHES), default=list(SEARCHES))
    add_comparison_arguments(parser, "runs/bench/joey-decoding.json")
    args = parser.parse_args(argv)
    if args.ours_result is not None:
        if not args.ours_result.is_file():
            parser.error(f"no result {args.ours_result}: run bench_quality.py first")
        args.ours = Path(load_json(args.ours_result)["evaluated"])
    args.joey = args.joey or joey_latest(args.cache, args.joey_model)
    for path in (args.ours, args.joey):
        if not path.is_file():
            parser.error(f"no checkpoint {path}")
    check_comparison_arguments(parser, args, f"{TEST}.de.gz")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    python, joey_data = joey_environment(args)
    work = args.out.with_suffix("")
    work.mkdir(parents=True, exist_ok=True)
    src, ref = split_files(args.corpus, TEST, "en-de", args.test_lines, work)
    references = read_lines(ref)

    def measure(toolkit: str, search: str, index: int) -> dict[str, Any]:
        folder = work / f"{toolkit}-{search}-round{index}"
        folder.mkdir(parents=True, exist_ok=True)
        beam, bf16 = SEARCHES[search]
        if toolkit == "joey":
            run = measure_decode(
                python, args.joey_model, joey_data, folder, beam, args.joey, args.test_lines
            )
            record = {SPEED: run[SPEED], "peak_rss_gb": run["peak_rss_gb"]}
            hypotheses = Path(run["hypotheses"])
        else:
            run = evaluate(str(args.ours), src, ref, folder, beam, bf16)
            record = {SPEED: run["decode_sentences_per_sec"],
                      "peak_rss_gb": round(run["eval_peak_rss_mb"] / 1024, 2)}  # fmt: skip
            hypotheses = folder / "hypotheses.txt"
        return with_words_per_sec({**record, **describe_output(hypotheses, references)})

    compare(args.out, args.searches, args.rounds, SPEED, measure, ours=str(args.ours),
            joey=str(args.joey), threads=args.threads)  # fmt: skip


if __name__ == "__main__":
    main()
