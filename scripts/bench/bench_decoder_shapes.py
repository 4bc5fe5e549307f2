"""Beam-search cost of Transformer shapes, each decoding the same number of steps: which
student shape could decode at twice the 7.6M recipe's sentences/s, before one is trained.

The models are untrained (seed 0), with the EOS row of their tied embedding set to zero: its
logit stays 0 while the best of thousands of random logits are far above it, so EOS is never
among a beam's candidates and every sentence runs to its length limit (source pieces + 2).
Every shape thus searches the same batches for the same steps; what differs is the cost of a
step. A trained model stops at its own lengths, so this ranks shapes, it does not replace
timing trained ones. Sources: the Multi30k split's sentences as random piece ids, 1.2 pieces
a word. Shapes alternate A B A B; the table gives each one's median.

    python -m scripts.bench.bench_decoder_shapes --src data/multi30k/test_2016_flickr.en.gz \
        --out runs/bench/decoder-shapes.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from scripts.bench.benchkit import alternate, markdown_table, medians, save_json
from seq2seq.inference.batching import source_batches
from seq2seq.inference.search import SearchSettings, translate_batch
from seq2seq.model import VocabSpec
from seq2seq.speedups.onednn_linear import onednn_linears
from seq2seq.text.lines import read_lines
from seq2seq.transformer import Transformer

# name -> (vocabulary size, Transformer sizes); the first is the one the others are compared to
RECIPE = dict(model_size=256, num_heads=4, ff_size=1024, norm="pre")
TINY = dict(model_size=128, num_heads=4, ff_size=256, norm="post")
SHAPES = {
    "recipe 3+3 d256 V8k": (8000, dict(RECIPE, encoder_layers=3, decoder_layers=3)),
    "anchor 4+4 d128 V10k": (10000, dict(TINY, encoder_layers=4, decoder_layers=4)),
    "4+4 d128 V8k": (8000, dict(TINY, encoder_layers=4, decoder_layers=4)),
    "6+2 d128 V10k": (10000, dict(TINY, encoder_layers=6, decoder_layers=2)),
    "6+2 d128 V8k": (8000, dict(TINY, encoder_layers=6, decoder_layers=2)),
    "6+1 d128 V10k": (10000, dict(TINY, encoder_layers=6, decoder_layers=1)),
}
SEARCH = SearchSettings(beam=5, length_penalty=2.0, max_len_ratio=1.0, max_len_offset=2)


def never_ending(vocab_size: int, sizes: dict) -> Transformer:
    """An untrained Transformer of ``sizes`` whose EOS logit is always 0 (see the module)."""
    torch.manual_seed(0)
    vocab = VocabSpec(vocab_size, vocab_size, pad_id=0, bos_id=1, eos_id=2, joint=True)
    model = Transformer(vocab, dropout=0.0, **sizes).eval()
    with torch.no_grad():
        model.tgt_embed.weight[vocab.eos_id] = 0.0
    return model


def decode_all(model: Transformer, sources: list[list[int]], max_tokens: int) -> dict[str, float]:
    """Sentences/s and target tokens of a beam-5 search over ``sources``, batched as
    ``translate`` batches them."""
    tokens, start = 0, time.perf_counter()
    with torch.inference_mode(), onednn_linears(model):
        for batch in source_batches(sources, max_tokens, model.vocab.pad_id, model.vocab.eos_id):
            nbests = translate_batch(model, batch.src, batch.src_lens, SEARCH)
            tokens += sum(len(hyps[0].tokens) for hyps in nbests)
    return {"sentences_per_s": len(sources) / (time.perf_counter() - start), "tokens": tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=Path("data/multi30k/test_2016_flickr.en.gz"))
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--out", type=Path, default=Path("runs/bench/decoder-shapes.json"))
    args = parser.parse_args()
    ids = torch.Generator().manual_seed(0)
    sources = [
        torch.randint(10, 7000, (max(1, int(1.2 * len(line.split()))),), generator=ids).tolist()
        for line in read_lines(args.src)
    ]
    models = {name: never_ending(*SHAPES[name]) for name in args.shapes}

    def measure(name: str, index: int) -> dict[str, float]:
        result = decode_all(models[name], sources, args.max_tokens)
        print(f"round {index + 1} {name}: {result['sentences_per_s']:.1f} sentences/s", flush=True)
        return result

    rounds = alternate([], args.rounds, args.shapes, measure)
    summary = {name: medians([done[name] for done in rounds]) for name in args.shapes}
    if len({result["tokens"] for result in summary.values()}) > 1:  # an EOS was chosen
        sys.exit(f"the shapes decoded different numbers of steps: {summary}")
    first = summary[args.shapes[0]]["sentences_per_s"]
    rows = [
        [name, f"{sum(p.numel() for p in models[name].parameters()) / 1e6:.2f}M",
         f"{result['sentences_per_s']:.1f}", f"{result['sentences_per_s'] / first:.2f}x"]
        for name, result in summary.items()
    ]  # fmt: skip
    save_json(args.out, {"sentences": len(sources), "rounds": rounds, "median": summary})
    header = ["shape", "parameters", "sentences/s", f"vs {args.shapes[0]}"]
    print("\n".join(markdown_table(header, rows)))


if __name__ == "__main__":
    main()
