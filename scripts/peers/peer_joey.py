"""Measure Joey NMT 2.3 on Multi30k beside seq2seq: training target tokens/s, decoding sentences/s.

Builds Joey NMT's environment and data once (scripts/peers/joeykit.py), then: ``train``, Joey's
``train`` for a wall-clock budget, stopped with SIGINT (on which it saves its weights); its
throughput is the median of its "Tokens per Sec" lines, the first left out as warm-up.
``beam5`` and ``greedy``: Joey's ``test`` over test_2016 with the timed training's weights
(or ``--checkpoint``); sentences/s from its "Generation took" line. The JSON holds one entry
per model; a measurement there is not taken again.

    python -m scripts.peers.peer_joey --model transformer --train-minutes 2 --decode greedy
    python -m scripts.peers.peer_joey --train-minutes 0 --decode beam5 --checkpoint BEST.ckpt
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from scripts.bench.benchkit import REPO, load_json, save_json
from scripts.peers.joeykit import CACHE, ensure_venv, measure_decode, measure_train, prepare_data


def conditions() -> dict[str, Any]:
    """What the figures were taken beside: date, niceness, threads, load."""
    return {
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "nice": os.nice(0),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "cpus": os.cpu_count(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("transformer", "rnn"), default="transformer")
    parser.add_argument("--corpus", type=Path, default=REPO / "data" / "multi30k")
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--train-minutes", type=float, default=2.0)
    parser.add_argument("--log-every", type=int, default=10,
                        help="Joey's logging_freq: steps per throughput line")  # fmt: skip
    parser.add_argument("--decode", nargs="*", choices=("beam5", "greedy"),
                        default=["beam5", "greedy"],
                        help="decoding measurements to take (none: training only)")  # fmt: skip
    parser.add_argument("--checkpoint", type=Path, help="a trained Joey checkpoint to decode "
                        "(default: the timed training's weights)")  # fmt: skip
    parser.add_argument("--test-lines", type=int, help="decode only the first N test sentences")
    parser.add_argument("--out", type=Path, default=None, help="JSON (default: CACHE/joey.json)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    out = args.out or args.cache / "joey.json"
    results = load_json(out)
    python = ensure_venv(args.cache / "joeynmt-venv")
    data_dir = prepare_data(args.corpus, args.cache / "joey-data" / "multi30k-en-de")
    work = args.cache / "joey-runs" / args.model
    work.mkdir(parents=True, exist_ok=True)
    entry = results.setdefault(args.model, {})
    if "train" not in entry and args.train_minutes > 0:  # 0: decode --checkpoint only
        minutes = args.train_minutes
        train = measure_train(python, args.model, data_dir, work, minutes, args.log_every)
        entry["train"] = {**train, "minutes": minutes, "conditions": conditions()}
        save_json(out, results)
    for name in args.decode:
        if name not in entry:
            beam = 5 if name == "beam5" else 1
            decode = measure_decode(python, args.model, data_dir, work, beam, args.checkpoint,
                                    args.test_lines)  # fmt: skip
            entry[name] = {**decode, "conditions": conditions()}
            save_json(out, results)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
