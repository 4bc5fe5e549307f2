"""How training cost grows with the batch and with sentence length: Transformer vs Bahdanau RNN.

``throughput``: training target tokens/s against the batch token budget (``max_tokens``) on
Multi30k En->De batches, benchkit's training step (one warm-up batch not counted).
``memory``: the peak RSS (VmHWM) of one training step on synthetic batches of
``--memory-batch`` pairs of L tokens a side, each point in a process of its own, and its
rise over the RSS just before the step. Both models have the recipes' reference sizes.
Resumable: points in ``<out>/scale.json`` are not measured again.

    python -m scripts.bench.bench_scale --data data/multi30k --out runs/bench/scale
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
from pathlib import Path

import torch

from scripts.bench.benchkit import (
    SIZE,
    figure,
    load_json,
    memory_mb,
    multi30k_batches,
    ours_loss,
    save_json,
    train_step,
)
from seq2seq.attention import AdditiveAttention
from seq2seq.batch import Batch
from seq2seq.model import EncoderDecoder, VocabSpec
from seq2seq.rnn import RNNSeq2Seq
from seq2seq.speedups.malloc import keep_freed_memory
from seq2seq.training.task import batch_target_tokens
from seq2seq.transformer import Transformer

MODELS = ("transformer", "bahdanau")


def build(name: str, vocab: VocabSpec) -> EncoderDecoder:
    """The reference size of the <name> recipe of configs/multi30k, with the dropout these
    figures were measured with (the Transformer's config has since moved to 0.3)."""
    if name == "transformer":
        return Transformer(vocab, **SIZE, dropout=0.2)
    attention = functools.partial(AdditiveAttention, hidden_size=256)
    return RNNSeq2Seq(vocab, 256, 256, style="bahdanau", attention=attention, dropout=0.3)


def throughput(name: str, data_dir: str, max_tokens: int, steps: int) -> dict[str, float]:
    """Target tokens/s of ``steps`` training steps at one batch token budget."""
    batches, vocab = multi30k_batches(data_dir, max_tokens, steps + 1)
    model = build(name, vocab)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    train_step(model, ours_loss, optimizer, batches[0], True)  # warm-up: allocator, caches
    seconds = sum(train_step(model, ours_loss, optimizer, b, True)[0] for b in batches[1:])
    rate = sum(map(batch_target_tokens, batches[1:])) / seconds
    return {"target_tokens_per_s": rate, "steps": steps}


def memory_child(name: str, length: int, batch_size: int) -> None:
    """Run in a fresh process: one training step on [batch_size, length] pairs; print JSON."""
    torch.manual_seed(1)
    vocab = VocabSpec(src_size=8000, tgt_size=8000, pad_id=0, bos_id=1, eos_id=2, joint=True)
    model = build(name, vocab)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(3, 8000, (batch_size, length))
    lens = torch.full((batch_size,), length)
    batch = Batch(
        src=ids,
        src_lens=lens,
        ids=torch.arange(batch_size),
        tgt_in=ids,
        tgt_out=ids,
        tgt_lens=lens,
        target_tokens=batch_size * length,
    )
    before = memory_mb("VmRSS") / 1024
    train_step(model, ours_loss, optimizer, batch, True)
    peak = memory_mb("VmHWM") / 1024
    print(json.dumps({"peak_rss_gb": peak, "step_rise_gb": peak - before}))


def memory(name: str, length: int, batch_size: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--memory-child", name, str(length), str(batch_size)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def plot(results: dict, out: Path) -> None:
    with figure(out, dpi=None, ncols=2, figsize=(11, 4)) as (left, right):
        for name in MODELS:
            points = sorted((int(k), v) for k, v in results["throughput"].get(name, {}).items())
            if points:
                sizes, rates = [k for k, _ in points], [v["target_tokens_per_s"] for _, v in points]
                left.plot(sizes, rates, "o-", label=name)
            points = sorted((int(k), v) for k, v in results["memory"].get(name, {}).items())
            if points:
                lengths, peaks = [k for k, _ in points], [v["peak_rss_gb"] for _, v in points]
                right.plot(lengths, peaks, "o-", label=name)
        left.set(xscale="log", xlabel="batch token budget (max_tokens)", ylabel="target tokens/s")
        budgets = sorted({int(k) for points in results["throughput"].values() for k in points})
        left.set_xticks(budgets, [str(b) for b in budgets])
        left.minorticks_off()
        left.set_title("Training throughput")
        right.set(xlabel="sentence length (tokens, both sides)", ylabel="peak RSS (GB)")
        right.set_title(f"One training step, {results['memory_batch']} pairs")
        for axis in (left, right):
            axis.grid(alpha=0.3)
            axis.legend()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data/multi30k")
    parser.add_argument("--out", type=Path, default=Path("runs/bench/scale"))
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--budgets", type=int, nargs="+", default=[500, 1000, 2000, 4000, 8000])
    parser.add_argument("--steps", type=int, default=30, help="timed batches per budget")
    parser.add_argument("--lengths", type=int, nargs="+", default=[25, 50, 100, 200, 400])
    parser.add_argument("--memory-batch", type=int, default=32)
    parser.add_argument("--memory-child", nargs=3, metavar=("MODEL", "LENGTH", "BATCH"))
    args = parser.parse_args()
    keep_freed_memory()  # as the seq2seq command does
    if args.memory_child:
        name, length, batch_size = args.memory_child
        memory_child(name, int(length), int(batch_size))
        return

    args.out.mkdir(parents=True, exist_ok=True)
    record = args.out / "scale.json"
    results = load_json(record)
    results.setdefault("throughput", {})
    results.setdefault("memory", {})
    results["memory_batch"] = args.memory_batch
    results["threads"] = torch.get_num_threads()
    jobs = [("throughput", m, b) for m in args.models for b in args.budgets]
    jobs += [("memory", m, n) for m in args.models for n in args.lengths]
    for kind, name, size in jobs:
        done = results[kind].setdefault(name, {})
        if str(size) in done:
            continue
        if kind == "throughput":
            done[str(size)] = throughput(name, args.data, size, args.steps)
            rate = done[str(size)]["target_tokens_per_s"]
            print(f"{name:12s} max_tokens {size:5d}: {rate:7.0f} tok/s")
        else:
            done[str(size)] = memory(name, size, args.memory_batch)
            print(f"{name:12s} length {size:4d}: peak {done[str(size)]['peak_rss_gb']:.2f} GB")
        save_json(record, results)  # a finished point survives
    plot(results, args.out / "scale.png")
    print(f"wrote {record} and {args.out / 'scale.png'}")


if __name__ == "__main__":
    main()
