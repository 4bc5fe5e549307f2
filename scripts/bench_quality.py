"""Train every Multi30k config of a language pair under one budget and compare them.

For each recipe (default: every recipe of ``<pair>`` in ``configs/multi30k/recipes.yaml``: the
attention variants and the Transformer, each run as its --config files compose it) this runs
``seq2seq fit`` with the same budget (``--minutes`` of
wall-clock time per config, given to Lightning as ``--trainer.max_time``, and/or
``--epochs``), then scores on test_2016_flickr with ``seq2seq evaluate --json --beam 5``
(which also reports its decoding speed) the best checkpoint, or, for a config that keeps
its recent epochs (``recent-*.ckpt``, the Transformer), their average when it beats the
best checkpoint on val (beam search, literature BLEU; both val scores are kept). It writes
``results.md`` and ``results.json`` with: sacreBLEU, the Multi30k literature's BLEU
(lowercased, Moses-tokenised), chrF, training target tokens/s (the mean of
``train/device/items_per_sec`` in the run's metrics.csv), decoding sentences/s, each
subprocess's peak RSS, and sacreBLEU's paired bootstrap resampling of every config against
``bahdanau`` and of the best RNN against the Transformer.

A config already trained on its own (say, the Transformer's hour) is scored without
training again with ``--adopt transformer=<its default_root_dir>``; its row then says so.

It is resumable: a config whose ``<out>/<name>/result.json`` exists is skipped, and a
finished training (``train.json``) is not redone when only its evaluation is missing.

    python scripts/bench_quality.py --minutes 20                        # En->De, every config
    python scripts/bench_quality.py --pair en-fr --minutes 20
    python scripts/bench_quality.py --smoke --configs luong-dot luong-local-p
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
import yaml
from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest

from seq2seq.text_lines import read_lines

RECIPES = Path("configs/multi30k/recipes.yaml")  # recipe name -> its --config files, by pair
BASELINE = "bahdanau"  # every variant is tested against it
TRANSFORMER = "transformer"
SEQ2SEQ = [sys.executable, "-m", "seq2seq.cli"]
TEST_SPLIT = "test_2016_flickr"
VAL_SPLIT = "val"


def is_transformer(name: str) -> bool:
    """Transformer configs are ``transformer`` and its variants (``transformer-lowercase``);
    every other config is an RNN."""
    return name.startswith(TRANSFORMER)


def best_by_literature_bleu(
    results: list[dict[str, Any]], transformers: bool
) -> dict[str, Any] | None:
    """The Transformer configs' (or the RNNs') result with the highest literature BLEU."""
    rows = [r for r in results if is_transformer(r["name"]) == transformers]
    return max(rows, key=lambda r: r["bleu_literature"] or 0) if rows else None


def recipe_configs(pair: str, root: Path = Path()) -> dict[str, list[Path]]:
    """Every Multi30k recipe of ``pair``: its name and its --config files, in order."""
    index = yaml.safe_load((root / RECIPES).read_text(encoding="utf-8"))
    return {
        name: [root / RECIPES.parent / path for path in files]
        for name, files in index.get(pair, {}).items()
    }


def config_arguments(configs: list[Path]) -> list[str]:
    """``--config A --config B ...``: the files merged in order, later ones winning."""
    return [arg for path in configs for arg in ("--config", str(path))]


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


def last_checkpoint(run_dir: Path) -> tuple[Path, dict[str, Any]]:
    """The newest ``last.ckpt`` of a run and its contents (callback states included)."""
    lasts = sorted(run_dir.glob("checkpoints/last.ckpt")) or sorted(
        run_dir.glob("logs/version_*/checkpoints/last.ckpt")  # the layout of older versions
    )
    if not lasts:
        raise FileNotFoundError(f"no checkpoint under {run_dir}")
    return lasts[-1], torch.load(lasts[-1], map_location="cpu", weights_only=True)


def best_checkpoint(last: Path, state: dict[str, Any]) -> Path:
    """The checkpoint with the best validation BLEU the run's callbacks recorded, else last.

    Only a ModelCheckpoint that monitors val BLEU counts: the Transformer configs' second
    one keeps the recent epochs (monitor: epoch), and its "best" is merely the newest.
    """
    for callback in state.get("callbacks", {}).values():
        monitor = str(callback.get("monitor")) if isinstance(callback, dict) else ""
        best = callback.get("best_model_path") if monitor.startswith("val_bleu") else None
        if best and Path(best).is_file():
            return Path(best)
    return last


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


def training_record(
    run_dir: Path, seconds: float | None, peak_rss_mb: float | None, **extra: Any
) -> dict[str, Any]:
    """What train.json keeps of a finished fit, given how long it took and its peak memory."""
    last, state = last_checkpoint(run_dir)
    if seconds is None:  # a fit run elsewhere: the Timer's clock (max_time's) from its state
        seconds = state.get("callbacks", {}).get("Timer", {}).get("time_elapsed", {}).get("train")
    tokens_per_sec, epochs = training_speed(run_dir)
    return {
        "checkpoint": str(best_checkpoint(last, state)),
        "run_dir": str(run_dir),
        "train_tokens_per_sec": tokens_per_sec,
        "epochs": epochs,
        "train_seconds": seconds,
        "train_peak_rss_mb": peak_rss_mb,
        **extra,
    }


def save_record(folder: Path, record: dict[str, Any]) -> dict[str, Any]:
    (folder / "train.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def adopt(run_dir: Path, folder: Path) -> dict[str, Any]:
    """train.json for a fit already run on its own (``--adopt NAME=DIR``), not redone here.

    Its training time is the Timer's from its last checkpoint; its peak memory is unknown.
    """
    budget = f"its own config (adopted {run_dir})"
    return save_record(folder, training_record(run_dir, None, None, adopted=True, budget=budget))


def train(name: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """Fit one config under the budget (or reuse a finished fit); return its train.json."""
    done = folder / "train.json"
    if done.exists():
        return json.loads(done.read_text())
    if name in args.adopt:
        return adopt(args.adopt[name], folder)
    run_dir = folder / "run"
    shutil.rmtree(run_dir, ignore_errors=True)  # an interrupted fit starts over
    command = [
        *SEQ2SEQ, "fit", *config_arguments(args.recipes[name]),
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
        command += ["--model.warmup_steps", str(max(1, args.limit_train_batches // 5))]
        command += ["--trainer.log_every_n_steps", str(every)]
    print(f"[{name}] training: {' '.join(command[2:])}", flush=True)
    usage = run(command, folder / "fit.out", folder / "fit.log")
    if usage["status"] != 0:
        raise RuntimeError(f"training failed (exit {usage['status']}), see {folder / 'fit.log'}")
    return save_record(folder, training_record(run_dir, usage["seconds"], usage["peak_rss_mb"]))


def averaged_checkpoint(trained: dict[str, Any], folder: Path) -> str:
    """The average of the run's recent-*.ckpt when it keeps several, else its best one."""
    run_dir = Path(trained.get("run_dir", folder / "run"))
    recent = sorted(run_dir.glob("checkpoints/recent-*.ckpt")) or sorted(
        run_dir.glob("logs/version_*/checkpoints/recent-*.ckpt")  # runs of older versions
    )
    if len(recent) < 2:
        return trained["checkpoint"]
    averaged = folder / "averaged.ckpt"
    if not averaged.exists():
        command = [*SEQ2SEQ, "average", "--ckpts", *map(str, recent), "--out", str(averaged)]
        if run(command, folder / "average.out", folder / "average.log")["status"] != 0:
            raise RuntimeError(f"averaging failed, see {folder / 'average.log'}")
    return str(averaged)


def chosen_checkpoint(
    trained: dict[str, Any], folder: Path, val: tuple[Path, Path], beam: int
) -> tuple[str, dict[str, float]]:
    """The run's average of its recent checkpoints or its best single one, whichever has
    the higher literature BLEU on val (an average over the first epochs of a short budget
    can be far worse than the last epoch alone; the lowercased score also ranks models that
    write lowercase); and the two val scores, when there was a choice."""
    best = trained["checkpoint"]
    averaged = averaged_checkpoint(trained, folder)
    if averaged == best:
        return best, {}
    val_bleu = {}
    for name, checkpoint in (("averaged", averaged), ("best", best)):
        scratch = folder / f"val-{name}"
        scratch.mkdir(exist_ok=True)
        scores = evaluate(checkpoint, *val, scratch, beam)
        val_bleu[f"val_bleu_literature_{name}"] = scores["bleu_literature"]
    averaged_wins = val_bleu["val_bleu_literature_averaged"] >= val_bleu["val_bleu_literature_best"]
    return (averaged if averaged_wins else best), val_bleu


def evaluate(
    checkpoint: str | list[str],
    src: Path,
    ref: Path,
    folder: Path,
    beam: int,
    bf16: bool = False,
    length_penalty: float | None = None,
    ensemble_weights: list[float] | None = None,
) -> dict[str, Any]:
    """Scores and decoding speed from ``seq2seq evaluate --json``, and that run's peak RSS.

    Several checkpoints decode as an ensemble (its members weighted by ``ensemble_weights``,
    default equally). ``bf16`` searches under bf16 autocast
    (``--bf16``) instead of in fp32; the length penalty is the checkpoint's unless given.
    """
    members = [checkpoint] if isinstance(checkpoint, str) else checkpoint
    command = [*SEQ2SEQ, "evaluate", *(a for m in members for a in ("--ckpt", m))]
    command += ["--src", str(src), "--ref", str(ref)]
    command += ["--beam", str(beam), "--json", "--output", str(folder / "hypotheses.txt")]
    command += ["--bf16"] if bf16 else []
    command += [] if length_penalty is None else ["--length-penalty", str(length_penalty)]
    if ensemble_weights is not None:
        command += ["--ensemble-weight", *map(str, ensemble_weights)]
    usage = run(command, folder / "evaluate.json", folder / "evaluate.log")
    if usage["status"] != 0:
        raise RuntimeError(f"evaluation failed, see {folder / 'evaluate.log'}")
    scores = json.loads((folder / "evaluate.json").read_text())
    return {
        "bleu": scores["bleu"]["score"],
        "bleu_literature": scores.get("bleu_literature", {}).get("score"),
        "chrf": scores["chrf"]["score"],
        "bleu_signature": scores["bleu"]["signature"],
        "evaluated": checkpoint,
        "test_sentences": scores["decoding"]["sentences"],
        "decode_sentences_per_sec": scores["decoding"]["sentences_per_s"],
        "eval_peak_rss_mb": usage["peak_rss_mb"],
    }


def split_files(
    data: Path, split: str, pair: str, lines: int | None, scratch: Path
) -> tuple[Path, Path]:
    """A split's source and reference files, cut to their first ``lines`` in ``scratch``."""
    src_lang, tgt_lang = pair.split("-")
    src, ref = data / f"{split}.{src_lang}.gz", data / f"{split}.{tgt_lang}.gz"
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
    ("train time (s)", "train_seconds", "{:.0f}"),
    ("decode sent/s (beam 5)", "decode_sentences_per_sec", "{:.1f}"),
    ("peak RSS train (MB)", "train_peak_rss_mb", "{:.0f}"),
    ("peak RSS decode (MB)", "eval_peak_rss_mb", "{:.0f}"),
]


def paired_bootstrap(
    results: list[dict[str, Any]], out: Path, ref: Path, samples: int
) -> list[str]:
    """sacreBLEU's paired bootstrap: each config against the baseline, and the best RNN
    against the best Transformer (by literature BLEU).

    BLEU is lowercased here, as the literature's is, so that configs trained on lowercased
    text compare with cased ones. Returns Markdown lines: BLEU with its 95% confidence
    interval and the p-value of the difference from the baseline of each comparison (the
    first system of the test).
    """
    by_name = {r["name"]: r for r in results}
    comparisons = []
    if BASELINE in by_name:
        others = [name for name in by_name if name != BASELINE]
        if others:
            comparisons.append((BASELINE, others))
    best_rnn = best_by_literature_bleu(results, transformers=False)
    best_transformer = best_by_literature_bleu(results, transformers=True)
    # when the best RNN is the baseline, the baseline's row already compares them
    if best_rnn and best_transformer and best_rnn["name"] != BASELINE:
        comparisons.append((best_rnn["name"], [best_transformer["name"]]))
    if not comparisons:
        return []
    refs = read_lines(ref)
    lines = [
        "",
        f"## Paired bootstrap resampling (lowercased sacreBLEU, {samples} samples)",
        "",
        "| baseline | system | BLEU (95% CI) | p-value |",
        "|---|---|---|---|",
    ]
    for baseline, systems in comparisons:
        named = [(name, read_lines(out / name / "hypotheses.txt")) for name in (baseline, *systems)]
        metric = BLEU(lowercase=True)
        test = PairedTest(named, {"BLEU": metric}, [refs], test_type="bs", n_samples=samples)
        _, scores = test()
        for name, result in zip((baseline, *systems), scores["BLEU"], strict=True):
            interval = f"{result.score:.2f} ({result.mean:.2f} ± {result.ci:.2f})"
            p_value = "–" if name == baseline else f"{result.p_value:.4f}"
            lines.append(f"| {baseline} | {name} | {interval} | {p_value} |")
    return lines


def write_table(
    results: list[dict[str, Any]], budget: str, pair: str, out: Path, significance: list[str]
) -> None:
    lines = [
        f"# Multi30k {pair} (test_2016_flickr): every config under one budget",
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
        if result.get("adopted"):
            lines.append(f"Note: {result['name']} was trained on {result['budget']}.")
        elif result["budget"] != budget or result["test_sentences"] != results[0]["test_sentences"]:
            lines.append(
                f"Note: {result['name']} was run with another budget ({result['budget']}, "
                f"{result['test_sentences']} test sentences): use a fresh --out to compare."
            )
    lines += significance
    (out / "results.md").write_text("\n".join(lines) + "\n")
    (out / "results.json").write_text(
        json.dumps({"budget": budget, "results": results}, indent=2) + "\n"
    )
    print("\n".join(lines))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pair", default="en-de", help="language pair of configs/multi30k")
    parser.add_argument(
        "--configs", nargs="+", metavar="NAME", help="recipes of recipes.yaml (default: every one)"
    )
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"), help="Multi30k folder")
    parser.add_argument("--out", type=Path, help="default: runs/bench/quality-<pair>")
    parser.add_argument("--bootstrap-samples", type=int, default=1000)
    parser.add_argument("--minutes", type=float, help="wall-clock training budget per config")
    parser.add_argument("--epochs", type=int, help="epoch budget per config")
    parser.add_argument("--limit-train-batches", type=int, help="batches per epoch (smoke runs)")
    parser.add_argument("--test-lines", type=int, help="score only the first N test sentences")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument(
        "--adopt", nargs="+", default=[], metavar="NAME=DIR",
        help="score the fit already in DIR (its own budget) as config NAME instead of training",
    )  # fmt: skip
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
    args.recipes = recipe_configs(args.pair)
    available = sorted(args.recipes)
    if not available:
        parser.error(f"no {args.pair} recipes in {RECIPES}")
    unknown = sorted(set(args.configs or []) - set(available))
    if unknown:
        parser.error(f"no {args.pair} recipe {', '.join(unknown)} in {RECIPES} (has: {available})")
    adopted = dict(item.partition("=")[::2] for item in args.adopt)
    for name, run_dir in adopted.items():
        if name not in available or not run_dir or not Path(run_dir).is_dir():
            parser.error(f"--adopt takes NAME=DIR, NAME a config, DIR a run: {name}={run_dir}")
    args.adopt = {name: Path(run_dir) for name, run_dir in adopted.items()}
    # the baseline first, so that a short run still has something to compare against
    args.configs = sorted(args.configs or available, key=lambda name: (name != BASELINE, name))
    args.out = args.out or Path("runs/bench") / f"quality-{args.pair}"
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
        src, ref = split_files(args.data, TEST_SPLIT, args.pair, args.test_lines, Path(scratch))
        val = split_files(args.data, VAL_SPLIT, args.pair, args.test_lines, Path(scratch))
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
                checkpoint, val_scores = chosen_checkpoint(trained, folder, val, args.beam)
                print(f"[{name}] evaluating {checkpoint}", flush=True)
                scores = {**val_scores, **evaluate(checkpoint, src, ref, folder, args.beam)}
            except (RuntimeError, FileNotFoundError) as error:
                print(f"[{name}] {error}", file=sys.stderr)
                failures.append(name)
                continue
            # an adopted fit's train.json carries its own budget, which wins here
            result = {"name": name, "budget": budget, **trained, **scores}
            done.write_text(json.dumps(result, indent=2) + "\n")
            results.append(result)
        significance = paired_bootstrap(results, args.out, ref, args.bootstrap_samples)
    write_table(results, budget, args.pair, args.out, significance)
    if failures:
        sys.exit(f"failed: {', '.join(failures)}")


if __name__ == "__main__":
    main()
