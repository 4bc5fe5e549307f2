"""The commands beside Lightning's: translate, evaluate, attention, align-score, average and
corpus."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sized
from pathlib import Path

import torch

from seq2seq.alignment import (
    InspectOptions,
    format_summary,
    inspect_attention,
    plot_positional_encoding,
    read_gold,
    read_links,
    score_alignments,
)
from seq2seq.averaging import average_checkpoints, save_atomically
from seq2seq.checkpoint import Trained, load_trained
from seq2seq.corpus import write_corpus
from seq2seq.errors import DataError, Seq2SeqError
from seq2seq.metrics import literature_bleu, score_corpus
from seq2seq.sources import decode_lines, read_lines
from seq2seq.translator import SearchSettings, translate_lines


def _add_search_options(parser: argparse.ArgumentParser, beam: int) -> None:
    parser.add_argument("--beam", type=int, default=beam, help="beam size; 1 is greedy search")
    parser.add_argument(
        "--length-penalty", type=float, default=None,
        help="GNMT alpha (default: the model's config, model.length_penalty, else 1.0)",
    )  # fmt: skip
    parser.add_argument("--max-len-ratio", type=float, default=1.5, help="max output / source")
    parser.add_argument("--max-len-offset", type=int, default=10, help="added to the max length")
    parser.add_argument("--max-tokens", type=int, default=4096, help="token budget per batch")
    parser.add_argument(
        "--max-source-len", type=int, default=512, help="cut longer sources (with a warning)"
    )
    parser.add_argument(
        "--bf16", action="store_true", help="search under bfloat16 autocast (faster on CPUs "
        "with AVX512-BF16/AMX; scores may differ in the last digits)",
    )  # fmt: skip


def _search(args: argparse.Namespace, trained: Trained, n_best: int = 1) -> SearchSettings:
    """The search the options ask for; the length penalty defaults to the one the model was
    configured (and validated) with, so that a model is scored as its config says."""
    length_penalty = args.length_penalty
    if length_penalty is None:
        length_penalty = trained.length_penalty
    return SearchSettings(
        beam_size=args.beam,
        n_best=n_best,
        length_penalty=length_penalty,
        max_len_ratio=args.max_len_ratio,
        max_len_offset=args.max_len_offset,
        bf16=args.bf16,
    )


def _check_parallel(path_a: str, lines_a: Sized, path_b: str, lines_b: Sized) -> None:
    """Two files that must hold one line per sentence each, the same sentences."""
    if len(lines_a) != len(lines_b):
        raise DataError(f"{path_a} has {len(lines_a)} lines but {path_b} has {len(lines_b)}")


def translate(args: argparse.Namespace) -> None:
    """Translate lines from --input (default stdin) to --output (default stdout)."""
    if args.input:
        lines = read_lines(args.input)
    else:  # bytes, so that invalid UTF-8 is a DataError naming the line, as in a file
        lines = decode_lines(sys.stdin.buffer.read(), "<stdin>")
    if not lines:
        return
    trained = load_trained(args.ckpt)
    translations = translate_lines(
        trained,
        lines,
        _search(args, trained, args.n_best),
        args.max_tokens,
        progress=args.progress,
        max_source_len=args.max_source_len,
    )
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout  # noqa: SIM115
    try:
        for i, translation in enumerate(translations):
            if args.n_best == 1:
                print(translation.text, file=out)
                continue
            for text, hyp in zip(translation.texts, translation.hypotheses, strict=True):
                print(f"{i}\t{hyp.score:.4f}\t{text}", file=out)
    finally:
        if out is not sys.stdout:
            out.close()


def evaluate(args: argparse.Namespace) -> None:
    """Translate --src and score it against --ref: BLEU, chrF, and the literature's BLEU."""
    sources, refs = read_lines(args.src), read_lines(args.ref)
    _check_parallel(args.src, sources, args.ref, refs)
    trained = load_trained(args.ckpt)
    search = _search(args, trained)
    start = time.perf_counter()
    translations = translate_lines(
        trained, sources, search, args.max_tokens, progress=True,
        max_source_len=args.max_source_len,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    hyps = [t.text for t in translations]
    if args.output:
        Path(args.output).write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    scores = score_corpus(hyps, refs)
    lang = args.lang or trained.tgt_lang
    if lang:
        scores["bleu_literature"] = literature_bleu(hyps, refs, lang)
    decoding = {
        "sentences": len(sources),
        "seconds": round(seconds, 3),
        "sentences_per_s": round(len(sources) / seconds, 2),
        "beam": args.beam,
        "length_penalty": search.length_penalty,
        "threads": torch.get_num_threads(),
        "bf16": args.bf16,
    }
    if args.json:
        print(json.dumps({**scores, "decoding": decoding}, indent=2))
        return
    for name, result in scores.items():
        print(f"{name:16s} {result['score']:6.2f}  {result['signature']}")
    print(
        f"decoding         {decoding['sentences']} sentences in {seconds:.1f} s "
        f"({decoding['sentences_per_s']} sentences/s, beam {args.beam}, "
        f"length penalty {search.length_penalty:g}, "
        f"{decoding['threads']} threads{', bf16' if args.bf16 else ''})"
    )


def attention(args: argparse.Namespace) -> None:
    """Inspect what the decoder attends to: heatmaps, word alignments (Pharaoh), attention
    statistics and an HTML report of --src translated (or of --ref, forced), written to --out;
    or, with --positional-encoding, plots of the Transformer's sinusoidal encoding."""
    if args.positional_encoding:
        if args.dim is None or args.len is None:
            raise Seq2SeqError("--positional-encoding needs --dim D and --len N")
        for path in plot_positional_encoding(args.dim, args.len, args.out):
            print(path)
        return
    if args.ckpt is None or args.src is None:
        raise Seq2SeqError("attention needs --ckpt and --src (or --positional-encoding)")
    if not 0 < args.threshold <= 1:
        raise Seq2SeqError(f"--threshold must be in (0, 1], got {args.threshold}")
    sources = read_lines(args.src)
    references = read_lines(args.ref) if args.ref else None
    if references is not None:
        _check_parallel(args.src, sources, args.ref, references)
    trained = load_trained(args.ckpt)
    reverse = load_trained(args.reverse_ckpt) if args.reverse_ckpt else None
    if reverse is not None:
        _check_reverse(trained, reverse)
    options = InspectOptions(
        layer=args.layer,
        method=args.method,
        threshold=args.threshold,
        symmetrization=args.symmetrize,
        limit=args.limit,
        max_tokens=args.max_tokens,
        max_source_len=args.max_source_len,
        progress=True,
    )
    result = inspect_attention(
        trained,
        sources,
        args.out,
        options,
        references=references,
        search=_search(args, trained),
        reverse=reverse,
        title=f"Attention of {args.ckpt}",
    )
    for path in [*result.heatmaps, *result.files]:
        print(path)
    print(format_summary(result.summary))


def _check_reverse(trained: Trained, reverse: Trained) -> None:
    """A reverse-direction model must translate the other way (when the configs say)."""
    forward = (trained.src_lang, trained.tgt_lang)
    backward = (reverse.src_lang, reverse.tgt_lang)
    if None not in forward + backward and backward != forward[::-1]:
        raise Seq2SeqError(
            f"--reverse-ckpt translates {backward[0]}->{backward[1]}; "
            f"it must translate {forward[1]}->{forward[0]}"
        )


def align_score(args: argparse.Namespace) -> None:
    """Score word alignments against gold ones: AER, precision and recall (Och & Ney 2003;
    gold links written 3p4 or 3-4-P are possible, the others sure)."""
    gold, hyp = read_gold(args.gold, args.one_indexed), read_links(args.hyp)
    _check_parallel(args.gold, gold, args.hyp, hyp)
    score = score_alignments(gold, hyp)
    for name, value in [
        ("AER", score.aer),
        ("precision", score.precision),
        ("recall", score.recall),
    ]:
        print(f"{name:10s} {'n/a' if value is None else f'{value:.4f}'}")
    print(f"{'links':10s} {score.hyp} hypothesis, {score.sure} sure")


def corpus(args: argparse.Namespace) -> None:
    """Write the embedded corpus (numbers and dates, written out) as parallel text files."""
    paths = write_corpus(
        Path(args.out), seed=args.seed, src_lang=args.src_lang, tgt_lang=args.tgt_lang
    )
    for path in paths.values():
        print(path)


def average(args: argparse.Namespace) -> None:
    """Average the weights of several checkpoints into one (e.g. the last five epochs)."""
    print(save_atomically(average_checkpoints(args.ckpts), args.out))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="seq2seq")
    commands = parser.add_subparsers(dest="command", required=True)

    p = commands.add_parser("translate", help=translate.__doc__, description=translate.__doc__)
    p.add_argument("--ckpt", required=True, help="checkpoint written by `seq2seq fit`")
    _add_search_options(p, beam=5)
    p.add_argument("--input", help="source text, one sentence per line (default: stdin)")
    p.add_argument("--output", help="where to write translations (default: stdout)")
    p.add_argument("--n-best", type=int, default=1, help="print N hypotheses: index, score, text")
    p.add_argument("--progress", action="store_true", help="show a progress bar on stderr")
    p.set_defaults(run=translate)

    p = commands.add_parser("evaluate", help=evaluate.__doc__, description=evaluate.__doc__)
    p.add_argument("--ckpt", required=True, help="checkpoint written by `seq2seq fit`")
    _add_search_options(p, beam=5)
    p.add_argument("--src", required=True, help="source sentences")
    p.add_argument("--ref", required=True, help="reference translations")
    p.add_argument("--lang", help="target language for the literature scoring (default: config)")
    p.add_argument("--output", help="also write the translations here")
    p.add_argument("--json", action="store_true", help="print the scores as JSON")
    p.set_defaults(run=evaluate)

    p = commands.add_parser("attention", help=attention.__doc__, description=attention.__doc__)
    p.add_argument("--ckpt", help="checkpoint written by `seq2seq fit`")
    _add_search_options(p, beam=1)
    p.add_argument("--src", help="source sentences")
    p.add_argument("--ref", help="reference translations: align them (forced decoding)")
    p.add_argument("--out", required=True, help="folder for the heatmaps, alignments and report")
    p.add_argument("--limit", type=int, default=20, help="draw and report the first N lines")
    p.add_argument(
        "--layer", type=int, help="Transformer layer to align with (default: mean of all)"
    )
    p.add_argument("--method", choices=["argmax", "threshold"], default="argmax")
    p.add_argument(
        "--threshold", type=float, default=0.3, help="link weight for --method threshold"
    )
    p.add_argument("--reverse-ckpt", help="a target->source model: symmetrise both directions")
    p.add_argument(
        "--symmetrize",
        choices=["intersection", "union", "grow-diag", "grow-diag-final"],
        default="grow-diag",
        help="how --reverse-ckpt's links are combined with the forward ones",
    )
    p.add_argument(
        "--positional-encoding",
        action="store_true",
        help="plot the sinusoidal positional encoding instead (needs --dim and --len)",
    )
    p.add_argument("--dim", type=int, help="model size for --positional-encoding")
    p.add_argument("--len", type=int, help="number of positions for --positional-encoding")
    p.set_defaults(run=attention)

    p = commands.add_parser(
        "align-score", help=align_score.__doc__, description=align_score.__doc__
    )
    p.add_argument("--gold", required=True, help="gold alignments, one line per sentence")
    p.add_argument("--hyp", required=True, help="alignments to score, Pharaoh i-j, 0-indexed")
    p.add_argument("--one-indexed", action="store_true", help="the gold file counts from 1")
    p.set_defaults(run=align_score)

    p = commands.add_parser("average", help=average.__doc__, description=average.__doc__)
    p.add_argument("--ckpts", nargs="+", required=True, help="checkpoints to average")
    p.add_argument("--out", required=True, help="where to write the averaged checkpoint")
    p.set_defaults(run=average)

    p = commands.add_parser("corpus", help=corpus.__doc__, description=corpus.__doc__)
    p.add_argument("--out", required=True, help="folder to write {split}.{lang} files into")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--src-lang", default="en")
    p.add_argument("--tgt-lang", default="de")
    p.set_defaults(run=corpus)
    return parser


# Each command with the line `seq2seq --help` shows for it.
COMMANDS = {
    "translate": "translate text with a checkpoint, line by line",
    "evaluate": "translate a test set and score it: BLEU, chrF",
    "attention": "draw and report what a decoder attends to",
    "align-score": "score word alignments against gold ones (AER)",
    "average": "average the weights of several checkpoints",
    "corpus": "write the embedded corpus as parallel text files",
}


def run_command(args: list[str]) -> None:
    parsed = build_parser().parse_args(args)
    parsed.run(parsed)
