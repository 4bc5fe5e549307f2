"""Time of one decoder attention step against source length: global vs local-m vs local-p.

One step is ``attention.attend`` for a single query per sentence (what an RNN decoder
calls once per target position) on synthetic tensors; ``prepare`` (once per sentence) is
excluded. All three use the general score. Global attention scores every source position,
so its step grows with the source length; local attention gathers a 2D+1 window, so its
step should stay flat.

    python scripts/bench_attention_step.py --out runs/bench/attention-step

Writes ``step_times.json`` and ``step_times.png`` into the output folder and prints a table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from torch.utils.benchmark import Timer  # noqa: E402

from seq2seq.attention import Attention, LocalAttention, LuongAttention  # noqa: E402


def variants(hidden: int, key_size: int, window: int) -> dict[str, Attention]:
    return {
        "global": LuongAttention(hidden, key_size, "general"),
        "local-m": LocalAttention(hidden, key_size, "general", window, predictive=False),
        "local-p": LocalAttention(hidden, key_size, "general", window, predictive=True),
    }


def time_step(
    attention: Attention, batch: int, hidden: int, key_size: int, length: int, seconds: float
) -> float:
    """Median seconds of one ``attend`` call over ``length`` source positions."""
    generator = torch.Generator().manual_seed(length)
    states = torch.randn(batch, length, key_size, generator=generator)
    lengths = torch.randint(length // 2, length + 1, (batch,), generator=generator)
    lengths[0] = length
    query = torch.randn(batch, 1, hidden, generator=generator)
    position = torch.randint(0, length, (batch, 1), generator=generator)  # target position t
    with torch.inference_mode():
        keys, values = attention.prepare(states, states)
        timer = Timer(
            "attention.attend(query, keys, values, lengths, position)",
            globals=dict(
                attention=attention,
                query=query,
                keys=keys,
                values=values,
                lengths=lengths,
                position=position,
            ),
            num_threads=torch.get_num_threads(),
        )
        return timer.blocked_autorange(min_run_time=seconds).median


def plot(results: dict[str, dict[str, float]], lengths: list[int], path: Path) -> None:
    figure, axes = plt.subplots(figsize=(6, 4))
    for name, times in results.items():
        axes.plot(lengths, [times[str(n)] * 1e6 for n in lengths], marker="o", label=name)
    axes.set_xscale("log")
    axes.set_xlabel("source length S (tokens)")
    axes.set_ylabel("one attention step (µs, median)")
    axes.set_title("Decoder attention step vs source length")
    axes.legend()
    axes.grid(True, which="both", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/bench/attention-step", help="output folder")
    parser.add_argument("--lengths", type=int, nargs="+", default=[50, 100, 200, 500, 1000])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=256, help="decoder state size")
    parser.add_argument("--key-size", type=int, default=512, help="encoder output size")
    parser.add_argument("--window", type=int, default=10, help="local half-width D")
    parser.add_argument("--seconds", type=float, default=0.5, help="timing per measurement")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    modules = variants(args.hidden, args.key_size, args.window)
    results: dict[str, dict[str, float]] = {name: {} for name in modules}
    print(f"{'S':>6} " + " ".join(f"{name + ' (µs)':>14}" for name in modules))
    for length in args.lengths:
        for name, module in modules.items():
            module.eval()
            seconds = time_step(
                module, args.batch, args.hidden, args.key_size, length, args.seconds
            )
            results[name][str(length)] = seconds
        print(
            f"{length:>6} " + " ".join(f"{results[n][str(length)] * 1e6:>14.1f}" for n in modules)
        )

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = {k: v for k, v in vars(args).items() if k != "out"}
    report = {"settings": settings, "torch": torch.__version__, "median_seconds": results}
    (out / "step_times.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    plot(results, args.lengths, out / "step_times.png")
    print(f"wrote {out / 'step_times.json'} and {out / 'step_times.png'}")


if __name__ == "__main__":
    main()
