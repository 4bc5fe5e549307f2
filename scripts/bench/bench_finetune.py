"""Fine-tuning across a domain shift, and what it forgets: a released model trained further
on the embedded numbers-and-dates corpus with ``configs/finetune.yaml``, once on that
corpus alone and once with Multi30k's training pairs mixed back in.

For the model before and after each fine-tune: literature BLEU (lowercased, tokenised: the
released model writes lowercase) and chrF on the numbers corpus's test split, and on
Multi30k's val split (what the model knew), beam 5 with the model's own search; the wall
time of each fit. Writes ``--out`` (JSON) and prints a table.

    python -m scripts.bench.bench_finetune --name multi30k-en-de --data data/multi30k \\
        --work runs/bench/finetune --out runs/bench/finetune/results.json
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path
from typing import Any

import seq2seq
from scripts.bench.benchkit import cpu_model, load_json, save_json
from seq2seq.common.precision import Machine
from seq2seq.text.demo_corpus import write_corpus
from seq2seq.text.lines import read_lines

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "finetune.yaml"


def mixed_corpus(numbers: Path, multi30k: Path, out: Path, pairs: int, seed: int) -> Path:
    """``out``: the numbers corpus with ``pairs`` Multi30k training pairs (drawn with
    ``seed``) added to its training split, shuffled; val and test are the numbers corpus's."""
    if (out / "train.en").is_file():
        return out
    out.mkdir(parents=True)
    rng = random.Random(seed)
    m30k = list(zip(read_lines(multi30k / "train.en.gz"), read_lines(multi30k / "train.de.gz"),
                    strict=True))  # fmt: skip
    train = list(zip(read_lines(numbers / "train.en"), read_lines(numbers / "train.de"),
                     strict=True)) + rng.sample(m30k, pairs)  # fmt: skip
    rng.shuffle(train)
    for column, lang in enumerate(("en", "de")):
        (out / f"train.{lang}").write_text("".join(p[column] + "\n" for p in train), "utf-8")
        for split in ("val", "test"):
            (out / f"{split}.{lang}").write_text((numbers / f"{split}.{lang}").read_text("utf-8"))
    return out


def scores(model: Any, sources: list[str], references: list[str]) -> dict[str, float]:
    found = model.score(sources, references).scores
    return {"bleu_literature": round(found["bleu_literature"]["score"], 2),
            "chrf": round(found["chrf"]["score"], 2)}  # fmt: skip


def measure(model: Any, sets: dict[str, tuple[list[str], list[str]]]) -> dict[str, Any]:
    return {name: scores(model, *pairs) for name, pairs in sets.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", default="multi30k-en-de", help="the model to start from")
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"))
    parser.add_argument("--work", type=Path, default=Path("runs/bench/finetune"))
    parser.add_argument("--out", type=Path, default=Path("runs/bench/finetune/results.json"))
    parser.add_argument("--mixed-pairs", type=int, default=20000,
                        help="Multi30k training pairs mixed into the numbers corpus")  # fmt: skip
    parser.add_argument("--options", nargs=argparse.REMAINDER, default=[],
                        help="more fit options, e.g. --trainer.max_steps 200")  # fmt: skip
    args = parser.parse_args()
    numbers = args.work / "numbers"
    if not (numbers / "train.en").is_file():
        write_corpus(numbers, seed=1)
    corpora = {"numbers only": numbers,
               "numbers + Multi30k": mixed_corpus(numbers, args.data, args.work / "mixed",
                                                  args.mixed_pairs, seed=1)}  # fmt: skip
    sets = {
        "numbers test": (read_lines(numbers / "test.en"), read_lines(numbers / "test.de")),
        "Multi30k val": (read_lines(args.data / "val.en.gz"), read_lines(args.data / "val.de.gz")),
    }
    record = load_json(args.out, {}) or {}
    record.update(cpu=f"{cpu_model()} ({Machine.this().cpu_kind()})", name=args.name)
    if "before" not in record:
        record["before"] = measure(seq2seq.load(args.name, recase=False), sets)
        save_json(args.out, record)
    for label, corpus in corpora.items():
        if label in record.get("after", {}):
            continue
        root = args.work / label.replace(" ", "").replace("+", "-")
        start = time.monotonic()
        options = ["--data.source", str(corpus), "--data.cache_dir", str(args.work / "cache"),
                   "--trainer.default_root_dir", str(root), "--replace_checkpoints"]  # fmt: skip
        best = seq2seq.fit(RECIPE, init_from=args.name, options=[*options, *args.options])
        seconds = time.monotonic() - start
        after = measure(seq2seq.load(best), sets)
        record.setdefault("after", {})[label] = {**after, "fit_seconds": round(seconds),
                                                  "checkpoint": str(best)}  # fmt: skip
        save_json(args.out, record)
    print("| model | numbers test BLEU (lit.) | Multi30k val BLEU (lit.) | fit |")
    print("|---|---:|---:|---|")
    rows = [("before", record["before"], None)]
    rows += [(label, r, r["fit_seconds"]) for label, r in record["after"].items()]
    for label, result, seconds in rows:
        fit = f"{seconds / 60:.1f} min" if seconds else "—"
        print(f"| {label} | {result['numbers test']['bleu_literature']:.2f} | "
              f"{result['Multi30k val']['bleu_literature']:.2f} | {fit} |")  # fmt: skip


if __name__ == "__main__":
    main()
