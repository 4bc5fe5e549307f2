"""Decoding engines side by side: one Transformer checkpoint decoding a test set with
seq2seq (fp32; under bf16 autocast) and with its CTranslate2 export (float32, int8; each also
with two workers, the ``-2w`` engines).

Each run is a process of its own that loads its engine and translates ``--src`` under one
search (beam 5 or greedy) with ``--threads`` threads: sentences/s by its own clock (loading
left out), peak RSS, cased sacreBLEU against ``--ref``. Rounds alternate the engines (A B C D
A B C D); the table gives medians. The exports are written once into ``--out``, the runs to
``--out/results.json``. Results: docs/benchmarks/engines.md.

    python -m scripts.bench.bench_engines --ckpt CKPT --src test.en.gz --ref test.de.gz \\
        --out runs/bench/engines --rounds 4
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from scripts.bench.benchkit import (
    alternate,
    engine_arguments,
    medians,
    memory_mb,
    run_engine,
    save_json,
)

# CTranslate2's engines: the export each translates with, and its workers (inter_threads)
CT2_ENGINES = {
    "ct2-float32": ("ct2-float32", 1),
    "ct2-int8": ("ct2-int8", 1),
    "ct2-float32-2w": ("ct2-float32", 2),
    "ct2-int8-2w": ("ct2-int8", 2),
}
ENGINES = ("seq2seq-fp32", "seq2seq-bf16", *CT2_ENGINES)
SEARCHES = {"beam5": 5, "greedy": 1}


def translate_once(args: argparse.Namespace) -> None:
    """One run (the child process): print a JSON line with speed, peak RSS and hypotheses."""
    from dataclasses import replace

    import torch

    from seq2seq.inference.translator import translate_lines
    from seq2seq.text.lines import read_lines

    torch.set_num_threads(args.threads)
    lines = read_lines(args.src)
    beam = SEARCHES[args.search]
    if args.engine.startswith("seq2seq"):
        from seq2seq.inference.checkpoint import load_trained
        from seq2seq.speedups.malloc import keep_freed_memory

        keep_freed_memory()  # as the seq2seq command does
        trained = load_trained(args.ckpt)
        search = replace(trained.search, beam=beam, bf16=args.engine.endswith("bf16"))
        start = time.perf_counter()
        hyps = [t.text for t in translate_lines(trained, lines, search, args.max_tokens)]
    else:
        from seq2seq.inference.ct2_translate import load_export, translate_stream_ct2

        folder, workers = CT2_ENGINES[args.engine]
        exported = load_export(args.out / folder, threads=args.threads, workers=workers)
        search = replace(exported.search, beam=beam)
        start = time.perf_counter()
        translations = translate_stream_ct2(exported, lines, search, args.max_tokens)
        hyps = [t.text for t in translations]
    seconds = time.perf_counter() - start
    speed = {"seconds": seconds, "sentences_per_s": len(lines) / seconds}
    print(json.dumps({**speed, "peak_rss_mb": memory_mb("VmHWM"), "hypotheses": hyps}))


def export_models(args: argparse.Namespace) -> None:
    from seq2seq.inference.checkpoint import load_trained
    from seq2seq.inference.export import export_ctranslate2

    trained = load_trained(args.ckpt)
    for quantization in ("float32", "int8"):
        folder = args.out / f"ct2-{quantization}"
        if not (folder / "model.bin").is_file():
            export_ctranslate2(trained, folder, quantization)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    engine_arguments(parser)
    parser.add_argument("--rounds", type=int, default=2, help="runs of every engine and search")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--engine", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--search", choices=list(SEARCHES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        translate_once(args)
        return
    from sacrebleu.metrics import BLEU

    from seq2seq.text.lines import read_lines

    args.out.mkdir(parents=True, exist_ok=True)
    export_models(args)
    references = read_lines(args.ref)

    def measure(name: str, index: int) -> dict[str, float]:
        search, engine = name.split()
        result = run_engine(args, engine, search)
        result["bleu"] = BLEU().corpus_score(result.pop("hypotheses"), [references]).score
        print(f"round {index + 1} {search:6s} {engine:14s} "
              f"{result['sentences_per_s']:7.1f} sent/s  {result['peak_rss_mb']:6.0f} MB  "
              f"BLEU {result['bleu']:.2f}", file=sys.stderr, flush=True)  # fmt: skip
        return result

    names = [f"{search} {engine}" for search in SEARCHES for engine in ENGINES]
    rounds = alternate([], args.rounds, names, measure)  # A B C D A B C D
    runs = {name: [done[name] for done in rounds] for name in names}
    summary = {name: medians(results) for name, results in runs.items()}
    save_json(args.out / "results.json", {"runs": runs, "median": summary})
    print("| search | engine | sentences/s | vs seq2seq fp32 | peak RSS (MB) | BLEU |")
    print("|---|---|---:|---:|---:|---:|")
    for name, median in summary.items():
        search = name.split()[0]
        base = summary[f"{search} seq2seq-fp32"]["sentences_per_s"]
        print(f"| {search} | {name.split()[1]} | {median['sentences_per_s']:.1f} | "
              f"{median['sentences_per_s'] / base:.2f}x | {median['peak_rss_mb']:.0f} | "
              f"{median['bleu']:.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
