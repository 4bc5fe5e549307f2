"""The figures of the released models' cards, measured from the shipped files.

For each released model (``models/NAME``, or ``--models``): its size, and on Multi30k's
test_2016 its literature BLEU, sacreBLEU (of its cased or recased output) and chrF, beam 5
as it ships (its own search, recasing included), each model decoding alone in a process of
its own, ``--rounds`` times for its sentences/s (the median); ``seq2seq translate --model
NAME`` on one line, whole process, for its load time. With ``--full-precision NAME=CKPT``,
the float32 checkpoint it was released from is scored the same way and its translations
compared line by line, and its load time measured beside. Each model's figures go to its
``results.json`` and into the figures block of its card (``README.md``); ``make
bench-models`` runs it.

    python -m scripts.bench.bench_models --data data/multi30k [--names multi30k-en-de] \\
        [--full-precision multi30k-en-de=runs/selection/student-short/seed2/last-10.ckpt]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import torch
import yaml

from scripts.bench.benchkit import (
    SEQ2SEQ,
    TEST_SPLIT,
    cpu_model,
    evaluate_json,
    run,
    save_json,
    test_files,
    write_card,
)
from seq2seq.common.precision import Machine
from seq2seq.inference.checkpoint import CHECKPOINT_KEY
from seq2seq.inference.released import (
    MODELS_ENV,
    RESULTS,
    models_folder,
    released_names,
    resolve,
)

ONE_LINE = "A man is riding a bicycle down the street.\n"


def evaluate(model: list[str], src: Path, ref: Path, folder: Path, env: dict) -> dict[str, Any]:
    """``seq2seq evaluate`` of ``model`` (its command-line options: ``--model NAME`` or
    ``--ckpt CKPT`` with a search) in a process of its own: scores, speed, translations."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        scores, usage = evaluate_json(model, src, ref, folder, [], env)
    except RuntimeError as error:
        sys.exit(str(error))
    hyps = folder / "hypotheses.txt"
    return {
        "bleu_literature": scores["bleu_literature"]["score"],
        "bleu": scores["bleu"]["score"],
        "chrf": scores["chrf"]["score"],
        "sentences_per_sec": scores["decoding"]["sentences_per_s"],
        "threads": scores["decoding"]["threads"],
        "translations": hyps.read_text(encoding="utf-8").splitlines(),
        "peak_rss_mb": round(usage.peak_rss_mb),
    }


def load_seconds(model: list[str], folder: Path, env: dict, rounds: int) -> float:
    """The median wall time of ``seq2seq translate`` on one line, whole process."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "one.txt").write_text(ONE_LINE, encoding="utf-8")
    times = []
    for _ in range(rounds):
        command = [*SEQ2SEQ, "translate", *model, "--input", str(folder / "one.txt")]
        usage = run(command, folder / "translate.out", folder / "translate.log", env=env)
        if usage.status != 0:
            sys.exit(f"translate failed: {folder / 'translate.log'}")
        times.append(usage.seconds)
    return round(statistics.median(times), 2)


def parameters_and_case(checkpoint: Path) -> tuple[str, bool]:
    """The number of weights (``1.23 M``; a tied matrix counted once), and whether the
    model was trained on lowercased text (its config's ``data.lowercase``)."""
    stored = torch.load(checkpoint, map_location="cpu", weights_only=True)
    unique = {v.untyped_storage().data_ptr(): v.numel() for v in stored["state_dict"].values()}
    config = yaml.safe_load(stored[CHECKPOINT_KEY]["config"])
    lowercase = bool((config.get("data") or {}).get("lowercase"))
    return f"{sum(unique.values()) / 1e6:.2f} M", lowercase


def bench(args: argparse.Namespace, name: str, env: dict) -> dict[str, Any]:
    """One released model's figures (and, if given, its float32 checkpoint's)."""
    released = resolve(name, args.models)
    src, ref = test_files(args.data, released.src_lang, released.tgt_lang)
    work = args.work / name
    shipped = ["--model", name]
    runs = [evaluate(shipped, src, ref, work / f"round{i}", env) for i in range(args.rounds)]
    first = runs[0]
    count, lowercase = parameters_and_case(released.checkpoint)
    recased = lowercase and released.manifest.get("casing") is not None
    results: dict[str, Any] = {
        "parameters": count,
        "file_mib": round(released.checkpoint.stat().st_size / 2**20, 2),
        TEST_SPLIT: {key: round(first[key], 2) for key in ("bleu_literature", "bleu", "chrf")}
        | {"cased": recased or not lowercase},
        "recased": recased,
        "beam5_sentences_per_sec": statistics.median(r["sentences_per_sec"] for r in runs),
        "sentences_per_sec_rounds": [r["sentences_per_sec"] for r in runs],
        "threads": first["threads"],
        "cpu": f"{args.cpu_model} ({Machine.this().cpu_kind()})",
        "cpu_kind": Machine.this().cpu_kind(),
        "load_seconds": load_seconds(shipped, work / "load", env, args.rounds),
        "peak_rss_mb": first["peak_rss_mb"],
    }
    if full := args.full_precision.get(name):
        search = released.manifest["released_from"]
        setting = search["setting"]  # e.g. last-10@lp2: its length penalty
        penalty = setting.partition("@lp")[2]
        full_model = ["--ckpt", str(full), "--length-penalty", penalty]
        if released.casing:
            full_model += ["--recase", str(released.casing)]
        scored = evaluate(full_model, src, ref, work / "float32", env)
        equal = sum(a == b for a, b in zip(first["translations"], scored["translations"],
                                            strict=True))  # fmt: skip
        results["full_precision"] = {
            **{key: round(scored[key], 2) for key in ("bleu_literature", "bleu", "chrf")},
            "equal_lines": equal,
            "lines": len(scored["translations"]),
            "load_seconds": load_seconds(full_model, work / "load-float32", env, args.rounds),
            "checkpoint_sha256": search["full_precision_sha256"],
        }
    if "outside" in released.results:  # bench_outside.py's figures, kept
        results["outside"] = released.results["outside"]
    save_json(released.folder / RESULTS, results)
    write_card(released.folder, results)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path, default=None, help="default: models/")
    parser.add_argument("--names", nargs="*", help="default: every released model")
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"))
    parser.add_argument("--work", type=Path, default=Path("runs/bench/models"))
    parser.add_argument("--rounds", type=int, default=3, help="decoding rounds (median)")
    parser.add_argument("--full-precision", nargs="*", default=[], metavar="NAME=CKPT")
    args = parser.parse_args()
    args.models = args.models or models_folder()
    args.full_precision = dict(pair.split("=", 1) for pair in args.full_precision)
    args.cpu_model = cpu_model()
    env = {MODELS_ENV: str(args.models.resolve()), "OMP_NUM_THREADS": os.environ.get(
        "OMP_NUM_THREADS", "2")}  # fmt: skip
    for name in args.names or released_names(args.models):
        results = bench(args, name, env)
        test = results[TEST_SPLIT]
        print(f"{name}: test_2016 literature BLEU {test['bleu_literature']:.2f}, sacreBLEU "
              f"{test['bleu']:.2f}, chrF {test['chrf']:.2f}; beam 5 "
              f"{results['beam5_sentences_per_sec']:.1f} sentences/s; load "
              f"{results['load_seconds']} s")  # fmt: skip


if __name__ == "__main__":
    main()
