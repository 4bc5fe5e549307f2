"""Where seq2seq's search spends its time: a checkpoint translating the first ``--lines`` of
a test set (as ``seq2seq translate`` does), once plain for the wall time and once under
``torch.profiler``, whose self CPU time per operator is summed by what the operator does:
the model's matrix products, softmaxes, layer norms, the beam's bookkeeping (top-k, the
gathers that reorder beams and their caches), copies, element-wise arithmetic. What no
operator accounts for is Python and dispatch: the time between operators.

    python -m scripts.bench.profile_search --ckpt CKPT --src test_2016_flickr.en.gz --beam 5

Prints a Markdown table (and ``--json FILE`` keeps it); the shares are of the profiled run,
which the profiler itself slows, so they say where the time goes, not how much there is.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from scripts.bench.benchkit import save_json
from seq2seq.inference.checkpoint import load_trained
from seq2seq.inference.translator import translate_lines
from seq2seq.speedups.malloc import keep_freed_memory
from seq2seq.text.lines import read_lines

# What each operator does, by the words in its name (the first category that matches).
# fmt: off
CATEGORIES = {
    "matrix products": ["addmm", "aten::mm", "bmm", "matmul", "baddbmm", "linear"],
    "attention kernels": ["scaled_dot_product", "flash_attention"],
    "softmax": ["softmax"],
    "layer norm": ["layer_norm"],
    "beam bookkeeping": [
        "topk", "sort", "index_select", "gather", "aten::index", "take_along_dim", "where",
        "masked_fill", "aten::eq", "aten::ne", "aten::lt", "aten::gt", "aten::ge", "any", "all",
        "nonzero", "argmax", "max", "scatter",
    ],
    "copies and reshapes": [
        "copy_", "cat", "stack", "clone", "contiguous", "aten::to", "_to_copy", "empty",
        "zeros", "ones", "full", "fill_", "view", "reshape", "expand", "permute", "transpose",
        "select", "slice", "unsqueeze", "squeeze", "narrow", "split", "chunk",
    ],
    "element-wise": [
        "add", "mul", "div", "sub", "relu", "gelu", "exp", "log", "neg", "pow", "sqrt", "rsqrt",
        "tanh", "sigmoid", "embedding", "dropout", "sum", "mean", "clamp",
    ],
}
# fmt: on
BETWEEN_OPERATORS = "Python and dispatch (between operators)"


def category(operator: str, shapes: list[list[int]] | None = None, vocab: int = 0) -> str:
    """The category of an operator by its name (``aten::addmm`` is a matrix product); a
    matrix product or softmax with a dimension of the target ``vocab`` size (``shapes``:
    its inputs') is counted apart, as the output layer's."""
    for name, words in CATEGORIES.items():
        if any(word in operator for word in words):
            over_vocab = vocab and any(vocab in shape for shape in shapes or [])
            if over_vocab and name in ("matrix products", "softmax"):
                return f"{name} of the output layer (vocabulary)"
            return name
    return "other operators"


def profiled_shares(run: Callable[[], object], vocab: int = 0) -> tuple[float, dict[str, float]]:
    """The wall seconds of ``run()`` under the profiler, and the seconds per category (self
    CPU time of the operators; the remainder of the wall time: between operators)."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=bool(vocab)) as profiler:
        start = time.perf_counter()
        run()
        wall = time.perf_counter() - start
    seconds: dict[str, float] = defaultdict(float)
    for event in profiler.key_averages(group_by_input_shape=bool(vocab)):
        shapes = event.input_shapes if vocab else None
        seconds[category(event.key, shapes, vocab)] += event.self_cpu_time_total / 1e6
    seconds[BETWEEN_OPERATORS] = max(0.0, wall - sum(seconds.values()))
    return wall, dict(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ckpt", type=Path, required=True)
    parser.add_argument("--src", type=Path, required=True)
    parser.add_argument("--lines", type=int, default=500, help="first N lines of --src")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    keep_freed_memory()  # as the seq2seq command does
    trained = load_trained(args.ckpt)
    search = replace(trained.search, beam=args.beam, n_best=1)
    lines = read_lines(args.src)[: args.lines]

    def translate() -> None:
        translate_lines(trained, lines, search, args.max_tokens)

    translate()  # warm-up: allocations, kernels chosen
    start = time.perf_counter()
    translate()
    plain = time.perf_counter() - start
    wall, seconds = profiled_shares(translate, vocab=trained.vocab.tgt.size)
    rows = sorted(seconds.items(), key=lambda item: -item[1])
    print(f"{len(lines)} sentences, beam {args.beam}, {args.threads} threads: "
          f"{len(lines) / plain:.1f} sentences/s plain ({plain:.2f} s), "
          f"{wall:.2f} s profiled")  # fmt: skip
    print("\n| where the time goes | seconds (profiled) | share |\n|---|---:|---:|")
    for name, value in rows:
        print(f"| {name} | {value:.2f} | {100 * value / wall:.1f}% |")
    if args.json:
        record = {"sentences": len(lines), "beam": args.beam, "threads": args.threads,
                  "plain_seconds": plain, "profiled_seconds": wall, "seconds": seconds}  # fmt: skip
        save_json(args.json, record)


if __name__ == "__main__":
    main()
