"""Training and decoding speed by precision, on this machine, alternating A B A B.

Training: for each recipe (the En-De Transformer and Bahdanau RNN recipes) ``seq2seq fit``
runs ``--steps`` updates with validation off, once in ``bf16-mixed`` and once in ``32-true``,
and the JSON says which of the two ``precision: auto`` (what the recipes ship) resolves to on
this machine, so that one run shows whether ``auto`` chose the faster; a run's figure is its
steps/s, one over the mean time of a training batch by Lightning's SimpleProfiler (so that a
few steps suffice where bf16 is emulated and a step takes a minute), and its logged target
tokens/s where it ran over 20 steps (the throughput monitor's window). Decoding
(``--ckpt``): ``seq2seq evaluate`` beam 5 over ``--lines`` sentences, in fp32 and with
``--bf16``. The JSON names the CPU (PyTorch's capability, bf16 instructions or not); run it
with ``--emulate-avx2`` on an AVX512 machine to measure as an AVX2-only CPU would (PyTorch's
and oneDNN's kernels limited to AVX2 by their environment variables). Resumable: a finished
run is not redone.

    python -m scripts.bench.bench_precision --out runs/bench/precision.json --steps 30 --rounds 2 \\
        --ckpt CKPT
"""

from __future__ import annotations

import argparse
import functools
import gzip
import itertools
import statistics
from pathlib import Path
from typing import Any

from scripts.bench.benchkit import (
    RATE,
    REPO,
    alternate,
    cpu_model,
    evaluate,
    fit_command,
    load_json,
    logged_metrics,
    recipe_configs,
    run,
    save_json,
)
from seq2seq.common.precision import Machine, auto_precision

RECIPES = ("transformer", "bahdanau")
TRAINING = {"bf16-mixed": "bf16-mixed", "32-true": "32-true"}
DECODING = {"fp32": False, "--bf16": True}
AVX2_ONLY = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
BATCH_ACTION = "run_training_batch"  # the SimpleProfiler's row of a training step


def mean_step_seconds(report: Path) -> float:
    """The mean duration of a training step in a SimpleProfiler report."""
    for line in report.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells[0] == BATCH_ACTION:
            return float(cells[1])
    raise RuntimeError(f"no {BATCH_ACTION} in {report}")


def train(args: argparse.Namespace, recipe: str, precision: str, round_: int) -> dict[str, Any]:
    """``--steps`` updates of ``recipe`` in ``precision``: its steps/s and tokens/s."""
    run_dir = args.work / f"{recipe}-{precision}-{round_}"
    run_dir.mkdir(parents=True, exist_ok=True)
    command = fit_command(
        recipe_configs("en-de", REPO)[recipe], args.data, run_dir,
        "--trainer.precision", precision, "--trainer.max_steps", str(args.steps),
        "--trainer.limit_val_batches", "0", "--trainer.log_every_n_steps", "5",
        "--trainer.max_time", "null", "--replace_checkpoints",
        "--trainer.profiler.class_path", "pytorch_lightning.profilers.SimpleProfiler",
        "--trainer.profiler.init_args.dirpath", str(run_dir),
        "--trainer.profiler.init_args.filename", "profile",
    )  # fmt: skip
    usage = run(command, run_dir / "fit.out", run_dir / "fit.log", env=args.env)
    if usage.status != 0:
        raise RuntimeError(f"seq2seq fit failed (exit {usage.status}): {run_dir / 'fit.log'}")
    rates = [float(r[RATE]) for r in logged_metrics(run_dir) if r.get(RATE)]
    resolved = next(
        line.split(" parameters) in ")[1]
        for line in (run_dir / "fit.log").read_text().splitlines()
        if " parameters) in " in line
    )
    return {
        "steps_per_sec": 1 / mean_step_seconds(run_dir / "fit-profile.txt"),
        "target_tokens_per_sec": statistics.median(rates) if rates else None,
        "precision": resolved,
        "wall_seconds": round(usage.seconds, 1),
    }


def train_as(args: argparse.Namespace, recipe: str, name: str, round_: int) -> dict[str, Any]:
    """``train`` under the precision of ``TRAINING[name]``."""
    return train(args, recipe, TRAINING[name], round_)


def decode(args: argparse.Namespace, bf16: bool, round_: int) -> dict[str, Any]:
    """Beam 5 over the first ``--lines`` val sentences, fp32 or under bf16 autocast."""
    folder = args.work / f"decode-{'bf16' if bf16 else 'fp32'}-{round_}"
    folder.mkdir(parents=True, exist_ok=True)
    for lang, path in (("en", folder / "src.en"), ("de", folder / "ref.de")):
        with gzip.open(args.data / f"val.{lang}.gz", "rt", encoding="utf-8") as lines:
            path.write_text("".join(itertools.islice(lines, args.lines)))
    src, ref = folder / "src.en", folder / "ref.de"
    scores = evaluate(str(args.ckpt), src, ref, folder, 5, bf16, env=args.env)
    return {"sentences_per_sec": scores["decode_sentences_per_sec"], "bleu": scores["bleu"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON of results")
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"))
    parser.add_argument("--steps", type=int, default=30, help="updates of each training run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--recipes", nargs="*", default=list(RECIPES), choices=RECIPES)
    parser.add_argument("--ckpt", type=Path, help="a checkpoint to decode with (none: no decoding)")
    parser.add_argument("--lines", type=int, default=500, help="val sentences to decode")
    parser.add_argument("--emulate-avx2", action="store_true", help="PyTorch and oneDNN as on AVX2")
    args = parser.parse_args()
    args.work = args.out.with_suffix("")
    args.env = AVX2_ONLY if args.emulate_avx2 else {}
    machine = Machine.this()  # this process's view; --emulate-avx2 changes the children's
    result = load_json(args.out, {})
    cpu = f"{cpu_model()}: {machine.cpu_kind()}"
    emulated = f"AVX2-only: PyTorch and oneDNN limited to AVX2 on {cpu_model()}"
    result["cpu"] = emulated if args.emulate_avx2 else cpu
    result["auto"] = auto_precision("cpu", machine).precision  # what the recipes train in here
    save = lambda: save_json(args.out, result)  # noqa: E731
    for recipe in args.recipes:
        rounds = result.setdefault("training", {}).setdefault(recipe, [])
        measure = functools.partial(train_as, args, recipe)
        alternate(rounds, args.rounds, list(TRAINING), measure, save)
    if args.ckpt:
        rounds = result.setdefault("decoding", [])
        alternate(rounds, args.rounds, list(DECODING),
                  lambda name, i: decode(args, DECODING[name], i), save)  # fmt: skip
    save()
    print(f"{result['cpu']} (precision auto: {result['auto']}):")
    for recipe, rounds in result.get("training", {}).items():
        for name in TRAINING:
            rates = [r[name]["steps_per_sec"] for r in rounds if name in r]
            print(f"  {recipe} training, {name}: {statistics.median(rates):.3f} steps/s "
                  f"({rounds[0][name]['precision']})")  # fmt: skip
    for name in DECODING if result.get("decoding") else ():
        rates = [r[name]["sentences_per_sec"] for r in result["decoding"] if name in r]
        print(f"  beam-5 decoding, {name}: {statistics.median(rates):.1f} sentences/s")


if __name__ == "__main__":
    main()
