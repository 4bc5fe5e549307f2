"""Train every Multi30k config of a language pair under one budget and compare them.

Each recipe of ``<pair>`` in configs/multi30k/recipes.yaml (or those of ``--configs``) is
fitted under the same budget (``--minutes`` as Lightning's max_time, and/or ``--epochs``),
then scored on test_2016_flickr with ``seq2seq evaluate --json --beam 5``: its best
checkpoint, or the average of its recent epochs when that scores higher on val. Writes
``results.md`` and ``results.json`` (BLEU, literature BLEU, chrF, training tokens/s,
decoding sentences/s, peak RSS, and sacreBLEU's paired bootstrap of every recipe against
``bahdanau`` and of the best RNN against the best Transformer). ``--adopt NAME=DIR`` scores
a fit already run on its own instead of training. Resumable: a recipe with a result.json is
skipped, a finished fit (train.json) is not redone.

    python -m scripts.bench.bench_quality --minutes 20                        # En->De, every config
    python -m scripts.bench.bench_quality --pair en-fr --minutes 20
    python -m scripts.bench.bench_quality --smoke --configs luong-dot luong-local-p
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest

from scripts.bench.benchkit import (
    RECIPES,
    TEST_SPLIT,
    averaged,
    best_by_literature_bleu,
    best_checkpoint,
    evaluate,
    fit_command,
    last_checkpoint,
    load_json,
    logged_metrics,
    logged_rates,
    markdown_table,
    max_time,
    recent_checkpoints,
    recipe_configs,
    run,
    save_json,
    split_files,
)
from seq2seq.text.lines import read_lines

BASELINE = "bahdanau"  # every variant is tested against it
VAL_SPLIT = "val"
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


def training_record(
    run_dir: Path, folder: Path, seconds: float | None, peak_rss_mb: float | None, **extra: Any
) -> dict[str, Any]:
    """Save and return train.json for a finished fit: its best checkpoint, mean target
    tokens/s over the logged windows, epochs begun, time (a fit run elsewhere: its Timer's)
    and peak memory."""
    last, state = last_checkpoint(run_dir)
    if seconds is None:
        seconds = state.get("callbacks", {}).get("Timer", {}).get("time_elapsed", {}).get("train")
    rows, speeds = logged_metrics(run_dir), logged_rates(run_dir)
    record = {
        "checkpoint": str(best_checkpoint(last, state)),
        "run_dir": str(run_dir),
        "train_tokens_per_sec": sum(speeds) / len(speeds) if speeds else None,
        "epochs": max((int(row["epoch"]) + 1 for row in rows if row.get("epoch")), default=0),
        "train_seconds": seconds,
        "train_peak_rss_mb": peak_rss_mb,
        **extra,
    }
    save_json(folder / "train.json", record)
    return record


def adopt(run_dir: Path, folder: Path) -> dict[str, Any]:
    """train.json for a fit already run on its own (``--adopt NAME=DIR``): its training time
    is its Timer's, its peak memory unknown."""
    budget = f"its own config (adopted {run_dir})"
    return training_record(run_dir, folder, None, None, adopted=True, budget=budget)


def train(name: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """Fit one config under the budget (or reuse a finished fit); return its train.json."""
    if (done := folder / "train.json").exists():
        return load_json(done)
    if name in args.adopt:
        return adopt(args.adopt[name], folder)
    run_dir = folder / "run"
    shutil.rmtree(run_dir, ignore_errors=True)  # an interrupted fit starts over
    budget = []
    if args.minutes is not None:
        budget += ["--trainer.max_time", max_time(args.minutes)]
    if args.epochs is not None:
        budget += ["--trainer.max_epochs", str(args.epochs)]
        budget += ["--trainer.max_time", "null"] if args.minutes is None else []
    if args.limit_train_batches is not None:
        # the throughput monitor needs 20 batches, then logs every log_every_n_steps
        batches = args.limit_train_batches
        budget += ["--trainer.limit_train_batches", str(batches)]
        budget += ["--model.warmup_steps", str(max(1, batches // 5))]
        budget += ["--trainer.log_every_n_steps", str(max(1, min(50, batches // 5)))]
    command = fit_command(args.recipes[name], args.data, run_dir, *budget)
    print(f"[{name}] training: {' '.join(command[2:])}", flush=True)
    usage = run(command, folder / "fit.out", folder / "fit.log")
    if usage.status != 0:
        raise RuntimeError(f"training failed (exit {usage.status}), see {folder / 'fit.log'}")
    return training_record(run_dir, folder, usage.seconds, usage.peak_rss_mb)


def chosen_checkpoint(
    trained: dict[str, Any], folder: Path, val: tuple[Path, Path], beam: int
) -> tuple[str, dict[str, float]]:
    """The average of the run's recent checkpoints or its best one, whichever has the higher
    literature BLEU on val (an average over the first epochs of a short budget can be far
    worse than the last epoch; the lowercased score also ranks models that write lowercase);
    and the two val scores, when there was a choice."""
    best = trained["checkpoint"]
    recent = recent_checkpoints(Path(trained.get("run_dir", folder / "run")))
    if len(recent) < 2:
        return best, {}
    candidates = {"averaged": str(averaged(recent, folder / "averaged.ckpt")), "best": best}
    val_bleu = {}
    for name, checkpoint in candidates.items():
        (scratch := folder / f"val-{name}").mkdir(exist_ok=True)
        scores = evaluate(checkpoint, *val, scratch, beam)
        val_bleu[f"val_bleu_literature_{name}"] = scores["bleu_literature"]
    averaged_wins = val_bleu["val_bleu_literature_averaged"] >= val_bleu["val_bleu_literature_best"]
    return candidates["averaged" if averaged_wins else "best"], val_bleu


def paired_bootstrap(
    results: list[dict[str, Any]], out: Path, ref: Path, samples: int
) -> list[str]:
    """sacreBLEU's paired bootstrap, lowercased (as the literature's BLEU, so that recipes
    trained on lowercased text compare with cased ones): each config against the baseline,
    and the best RNN against the best Transformer. Markdown lines: BLEU with its 95%
    interval, and the p-value of the difference from each comparison's first system."""
    by_name = {r["name"]: r for r in results}
    comparisons = []
    if BASELINE in by_name and (others := [name for name in by_name if name != BASELINE]):
        comparisons.append((BASELINE, others))
    best_rnn = best_by_literature_bleu(results, transformers=False)
    best_transformer = best_by_literature_bleu(results, transformers=True)
    # when the best RNN is the baseline, the baseline's rows already compare them
    if best_rnn and best_transformer and best_rnn["name"] != BASELINE:
        comparisons.append((best_rnn["name"], [best_transformer["name"]]))
    if not comparisons:
        return []
    refs = read_lines(ref)
    rows = []
    for baseline, systems in comparisons:
        named = [(name, read_lines(out / name / "hypotheses.txt")) for name in (baseline, *systems)]
        metric = BLEU(lowercase=True)
        test = PairedTest(named, {"BLEU": metric}, [refs], test_type="bs", n_samples=samples)
        for name, result in zip((baseline, *systems), test()[1]["BLEU"], strict=True):
            interval = f"{result.score:.2f} ({result.mean:.2f} ± {result.ci:.2f})"
            p_value = "–" if name == baseline else f"{result.p_value:.4f}"
            rows.append([baseline, name, interval, p_value])
    title = f"## Paired bootstrap resampling (lowercased sacreBLEU, {samples} samples)"
    table = markdown_table(["baseline", "system", "BLEU (95% CI)", "p-value"], rows)
    return ["", title, "", *table]


def write_table(
    results: list[dict[str, Any]], budget: str, pair: str, out: Path, significance: list[str]
) -> None:
    cells = [[fmt.format(r[key]) if r.get(key) is not None else "–" for _, key, fmt in COLUMNS]
             for r in results]  # fmt: skip
    lines = [
        f"# Multi30k {pair} (test_2016_flickr): every config under one budget",
        "",
        f"Budget per config: {budget}. BLEU is sacreBLEU on detokenized text; BLEU (lit.)",
        "is lowercased, Moses-tokenized BLEU as in the Multi30k literature.",
        "",
        *markdown_table([title for title, _, _ in COLUMNS], cells),
    ]
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
    save_json(out / "results.json", {"budget": budget, "results": results})
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
    if not (available := sorted(args.recipes)):
        parser.error(f"no {args.pair} recipes in {RECIPES}")
    if unknown := sorted(set(args.configs or []) - set(available)):
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
    budget = " and ".join(part for part in (
        f"{args.minutes:g} min (trainer.max_time)" if args.minutes is not None else "",
        f"{args.epochs} epochs" if args.epochs is not None else "",
        f"{args.limit_train_batches} batches/epoch" if args.limit_train_batches else "",
    ) if part)  # fmt: skip
    results, failures = [], []
    with tempfile.TemporaryDirectory() as scratch:
        src, ref = split_files(args.data, TEST_SPLIT, args.pair, args.test_lines, Path(scratch))
        val = split_files(args.data, VAL_SPLIT, args.pair, args.test_lines, Path(scratch))
        for name in args.configs:
            folder = args.out / name
            if (done := folder / "result.json").exists():
                print(f"[{name}] done already: {done}")
                results.append(load_json(done))
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
            save_json(done, result)
            results.append(result)
        significance = paired_bootstrap(results, args.out, ref, args.bootstrap_samples)
    write_table(results, budget, args.pair, args.out, significance)
    if failures:
        sys.exit(f"failed: {', '.join(failures)}")


if __name__ == "__main__":
    main()
