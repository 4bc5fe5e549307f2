"""Time of one decoder step against source length: global vs local-m vs local-p attention.

Per attention (all with the general score) and source length, on synthetic tensors:
``attention``, ``attention.attend`` alone (``prepare`` left out), and ``decoder``, the whole
``model.step`` of a reference-size Luong RNN, so that attention's share of a step shows.
Global attention scores every position; local attention gathers a 2D+1 window and should
stay flat. The sweep runs ``--repeats`` times after an untimed warm-up; a point is the
median of its repeats. Writes ``step_times.json`` and ``step_times.png``.

    python -m scripts.bench.bench_attention_step --out runs/bench/attention-step
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch.utils.benchmark import Timer

from scripts.bench.benchkit import figure, save_json
from seq2seq.attention import LuongGlobalAttention, LuongLocalAttention
from seq2seq.model import Memory, VocabSpec
from seq2seq.rnn import RNNSeq2Seq

VOCAB = VocabSpec(src_size=8000, tgt_size=8000, pad_id=1, bos_id=2, eos_id=3, joint=True)
PARTS = ("attention", "decoder")


def variants(window: int) -> dict[str, partial]:
    """Attention factories (query size, key size) -> module, as a decoder builds them."""
    return {
        "global": partial(LuongGlobalAttention, score="general"),
        "local-m": partial(LuongLocalAttention, score="general", window=window, predictive=False),
        "local-p": partial(LuongLocalAttention, score="general", window=window, predictive=True),
    }


def median_seconds(statement: str, names: dict[str, Any], seconds: float) -> float:
    timer = Timer(statement, globals=names, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=seconds).median


def time_steps(model: RNNSeq2Seq, batch: int, length: int, seconds: float) -> dict[str, float]:
    """Median seconds of one ``attend`` call and of one ``model.step`` over ``length`` positions.

    The encoder output is random [batch, length, K]; valid lengths lie in [length / 2,
    length], the first sentence's is ``length``; the decoder stands at target position
    length / 2 (local-m centers its window there).
    """
    generator = torch.Generator().manual_seed(length)
    key_size = model.decoder.attention.key_size
    states = torch.randn(batch, length, key_size, generator=generator)
    lengths = torch.randint(length // 2, length + 1, (batch,), generator=generator)
    lengths[0] = length
    memory = Memory(states, lengths, final=torch.randn(batch, key_size, generator=generator))
    with torch.inference_mode():
        state = dataclasses.replace(model.start(memory), position=length // 2)
        query = torch.randn(batch, 1, model.decoder.hidden_size, generator=generator)
        position = torch.full((batch, 1), state.position)
        tokens = torch.randint(4, VOCAB.tgt_size, (batch,), generator=generator)
        names = dict(model=model, state=state, query=query, position=position, tokens=tokens)
        attend = "model.decoder.attention.attend(query, state.keys, state.values, state.src_lens, "
        return {"attention": median_seconds(attend + "position)", names, seconds),
                "decoder": median_seconds("model.step(tokens, state)", names, seconds)}  # fmt: skip


def table_row(length: int, seconds: list[float]) -> str:
    """One printed row: the source length, then each timing in µs under its header."""
    return f"{length:>6} " + " ".join(f"{t * 1e6:>18.1f}" for t in seconds)


def plot(results: dict[str, dict[str, dict[str, float]]], lengths: list[int], path: Path) -> None:
    """One panel per part: microseconds against source length, a line per attention."""
    titles = {"attention": "attention.attend alone", "decoder": "whole Luong RNN decoder step"}
    with figure(path, ncols=len(PARTS), figsize=(11, 4)) as panels:
        for axes, part in zip(panels, PARTS, strict=True):
            for name, times in results[part].items():
                axes.plot(lengths, [times[str(n)] * 1e6 for n in lengths], marker="o", label=name)
            axes.set_xscale("log")
            axes.set_xlabel("source length S (tokens)")
            axes.set_ylabel("µs per step (median)")
            axes.set_title(titles[part])
            axes.legend()
            axes.grid(True, which="both", alpha=0.3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/bench/attention-step", help="output folder")
    parser.add_argument("--lengths", type=int, nargs="+", default=[50, 100, 200, 500, 1000])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=256, help="decoder state and embedding size")
    parser.add_argument("--window", type=int, default=10, help="local half-width D")
    parser.add_argument("--seconds", type=float, default=0.5, help="timing per measurement")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--repeats", type=int, default=3, help="sweeps; a point is their median")
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    models = {
        name: RNNSeq2Seq(VOCAB, args.hidden, args.hidden, style="luong", attention=attention).eval()
        for name, attention in variants(args.window).items()
    }  # bi-GRU encoder: keys of 2 * hidden
    for model in models.values():  # untimed, so that no point carries one-off costs
        time_steps(model, args.batch, args.lengths[0], args.seconds)
    header = f"{'S':>6} " + " ".join(f"{n + ' ' + p:>18}" for p in PARTS for n in models)
    # part -> attention -> str(S) -> [median seconds in each sweep]
    sweeps: dict[str, dict[str, dict[str, list[float]]]] = {
        p: {n: {str(s): [] for s in args.lengths} for n in models} for p in PARTS
    }
    for repeat in range(args.repeats):
        print(f"sweep {repeat + 1} of {args.repeats}, µs per step\n{header}")
        for length in args.lengths:
            for name, model in models.items():
                for part, seconds in time_steps(model, args.batch, length, args.seconds).items():
                    sweeps[part][name][str(length)].append(seconds)
            latest = [sweeps[p][n][str(length)][-1] for p in PARTS for n in models]
            print(table_row(length, latest), flush=True)
    results = {
        p: {n: {s: statistics.median(times) for s, times in by_length.items()}
            for n, by_length in by_name.items()}
        for p, by_name in sweeps.items()
    }  # fmt: skip
    print(f"median of the sweeps, µs per step\n{header}")
    for length in args.lengths:
        print(table_row(length, [results[p][n][str(length)] for p in PARTS for n in models]))

    out = Path(args.out)
    settings = {k: v for k, v in vars(args).items() if k != "out"}
    report = {"settings": settings, "torch": torch.__version__, "median_seconds": results,
              "sweeps_seconds": sweeps}  # fmt: skip
    save_json(out / "step_times.json", report)
    plot(results, args.lengths, out / "step_times.png")
    print(f"wrote {out / 'step_times.json'} and {out / 'step_times.png'}")


if __name__ == "__main__":
    main()
