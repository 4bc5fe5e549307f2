"""Training tokens/s: seq2seq's Transformer vs a plain torch.nn.Transformer, side by side.

Both have the reference size (3+3 layers, d 256, 4 heads, ff 1024, pre-norm, tied joint 8k
embeddings), see the same Multi30k batches in the same order and take full training steps,
alternating step by step (A B A B) so that the host's swings of speed fall on both alike;
the report gives each one's median target tokens/s over the rounds and their ratio. The
first rounds warm up the heap (page faults per step are reported) and are not counted.
``--compile`` adds our Transformer under ``torch.compile(dynamic=True)``.

    python -m scripts.bench.bench_transformer_speed --data data/multi30k --steps 20 --rounds 4
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from scripts.bench.benchkit import (
    SIZE,
    alternate,
    multi30k_batches,
    ours_loss,
    save_json,
    train_step,
)
from seq2seq.batch import Batch
from seq2seq.masking import sequence_mask
from seq2seq.model import VocabSpec
from seq2seq.speedups.cpu_dropout import cpu_dropouts
from seq2seq.speedups.malloc import keep_freed_memory
from seq2seq.training.task import batch_target_tokens
from seq2seq.transformer import Transformer, sinusoidal_table


class PlainTransformer(nn.Module):
    """The baseline: torch.nn.Transformer with embeddings, sinusoids and a tied output."""

    def __init__(self, vocab: VocabSpec, dropout: float = 0.1) -> None:
        super().__init__()
        d = SIZE["model_size"]
        self.embed = nn.Embedding(vocab.tgt_size, d, padding_idx=vocab.pad_id)
        self.register_buffer("positions", sinusoidal_table(512, d), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.core = nn.Transformer(
            d, SIZE["num_heads"], SIZE["encoder_layers"], SIZE["decoder_layers"],
            SIZE["ff_size"], dropout, batch_first=True, norm_first=True,
        )  # fmt: skip
        self.output = nn.Linear(d, vocab.tgt_size, bias=False)
        self.output.weight = self.embed.weight

    def _embed(self, ids: Tensor) -> Tensor:
        d = self.embed.embedding_dim
        return self.dropout(self.embed(ids) * math.sqrt(d) + self.positions[: ids.size(1)])

    def forward(self, src: Tensor, src_lens: Tensor, tgt_in: Tensor) -> Tensor:
        src_pad = ~sequence_mask(src_lens, src.size(1))
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), dtype=torch.bool)
        hidden = self.core(
            self._embed(src), self._embed(tgt_in), tgt_mask=causal, tgt_is_causal=True,
            src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad,
        )  # fmt: skip
        return self.output(hidden)


def plain_loss(model: PlainTransformer, batch: Batch, bf16: bool) -> Tensor:
    """The stock PyTorch way: padding ignored by id, cross_entropy's own label smoothing."""
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = model(batch.src, batch.src_lens, batch.tgt_in)
    return F.cross_entropy(
        logits.flatten(0, 1).float(), batch.tgt_out.flatten(), ignore_index=0, label_smoothing=0.1
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data/multi30k")
    parser.add_argument("--max-tokens", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=20, help="batches per round")
    parser.add_argument("--rounds", type=int, default=4, help="A B rounds that are counted")
    parser.add_argument("--warmup", type=int, default=2, help="A B rounds run first, not counted")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="bf16")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile")
    parser.add_argument("--out", default="runs/bench/transformer-speed.json")
    parser.add_argument(
        "--glibc-default", action="store_true", help="leave malloc as glibc sets it up"
    )
    args = parser.parse_args()
    if not args.glibc_default:
        keep_freed_memory()  # as the seq2seq command does; it speeds up both contenders

    batches, vocab = multi30k_batches(args.data, args.max_tokens, args.steps)
    bf16 = args.precision == "bf16"
    contenders = {
        # with the cheap CPU dropout mask, as the training task builds it
        "seq2seq Transformer": (cpu_dropouts(Transformer(vocab, **SIZE)), ours_loss),
        "torch.nn.Transformer": (PlainTransformer(vocab), plain_loss),
    }
    if args.compile:
        compiled = torch.compile(cpu_dropouts(Transformer(vocab, **SIZE)), dynamic=True)
        contenders["seq2seq Transformer, compiled"] = (compiled, ours_loss)
    optimizers = {
        name: torch.optim.AdamW(model.parameters(), lr=1e-4)
        for name, (model, _) in contenders.items()
    }
    tokens = sum(map(batch_target_tokens, batches))
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    faults: dict[str, list[float]] = {name: [] for name in contenders}

    def step(name: str, index: int) -> tuple[float, int]:
        model, loss_of = contenders[name]
        return train_step(model, loss_of, optimizers[name], batches[index], bf16)

    for round_ in range(args.warmup + args.rounds):
        steps = alternate([], len(batches), list(contenders), step)  # A B A B, step by step
        for name in contenders:
            seconds = sum(taken[name][0] for taken in steps)
            rate, per_step = tokens / seconds, sum(taken[name][1] for taken in steps) / len(steps)
            if round_ >= args.warmup:
                rates[name].append(rate)
                faults[name].append(per_step)
            warmup = " (warm-up)" if round_ < args.warmup else ""
            print(f"round {round_} {name:30s} {rate:8.0f} target tok/s "
                  f"{per_step:8.0f} page faults/step{warmup}", flush=True)  # fmt: skip
    medians = {name: statistics.median(r) for name, r in rates.items()}
    ours, plain = medians["seq2seq Transformer"], medians["torch.nn.Transformer"]
    report = {
        "precision": args.precision,
        "max_tokens": args.max_tokens,
        "threads": torch.get_num_threads(),
        "keep_freed_memory": not args.glibc_default,
        "median_target_tokens_per_s": medians,
        "ratio": ours / plain,
        "compiled_over_eager": (
            medians["seq2seq Transformer, compiled"] / ours if args.compile else None
        ),
        "warmup_rounds": args.warmup,
        "rounds": rates,
        "page_faults_per_step": faults,
    }
    print(json.dumps(report, indent=2))
    save_json(Path(args.out), report)


if __name__ == "__main__":
    main()
