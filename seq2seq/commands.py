"""The commands beside Lightning's: translate, evaluate, attention and corpus."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from seq2seq.alignment import EOS_LABEL, plot_attention
from seq2seq.averaging import average_checkpoints, save_atomically
from seq2seq.checkpoint import load_trained
from seq2seq.corpus import write_corpus
from seq2seq.data import read_lines
from seq2seq.errors import DataError
from seq2seq.metrics import literature_bleu, score_corpus
from seq2seq.translator import SearchSettings, translate_lines


def _add_search_options(parser: argparse.ArgumentParser, beam: int) -> None:
    parser.add_argument("--ckpt", required=True, help="checkpoint written by `seq2seq fit`")
    parser.add_argument("--beam", type=int, default=beam, help="beam size; 1 is greedy search")
    parser.add_argument("--length-penalty", type=float, default=1.0, help="GNMT alpha")
    parser.add_argument("--max-len-ratio", type=float, default=1.5, help="max output / source")
    parser.add_argument("--max-len-offset", type=int, default=10, help="added to the max length")
    parser.add_argument("--max-tokens", type=int, default=4096, help="token budget per batch")
    parser.add_argument(
        "--max-source-len", type=int, default=512, help="cut longer sources (with a warning)"
    )


def _search(args: argparse.Namespace, n_best: int = 1) -> SearchSettings:
    return SearchSettings(
        beam_size=args.beam,
        n_best=n_best,
        length_penalty=args.length_penalty,
        max_len_ratio=args.max_len_ratio,
        max_len_offset=args.max_len_offset,
    )


def translate(args: argparse.Namespace) -> None:
    """Translate lines from --input (default stdin) to --output (default stdout)."""
    lines = read_lines(args.input) if args.input else sys.stdin.read().splitlines()
    if not lines:
        return
    trained = load_trained(args.ckpt)
    translations = translate_lines(
        trained,
        lines,
        _search(args, args.n_best),
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
    if len(sources) != len(refs):
        raise DataError(f"{args.src} has {len(sources)} lines but {args.ref} has {len(refs)}")
    trained = load_trained(args.ckpt)
    translations = translate_lines(
        trained, sources, _search(args), args.max_tokens, progress=True,
        max_source_len=args.max_source_len,
    )  # fmt: skip
    hyps = [t.text for t in translations]
    if args.output:
        Path(args.output).write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    scores = score_corpus(hyps, refs)
    lang = args.lang or trained.tgt_lang
    if lang:
        scores["bleu_literature"] = literature_bleu(hyps, refs, lang)
    if args.json:
        print(json.dumps(scores, indent=2))
        return
    for name, result in scores.items():
        print(f"{name:16s} {result['score']:6.2f}  {result['signature']}")


def attention(args: argparse.Namespace) -> None:
    """Draw one heatmap per sentence of --src (the model's own translation) into --out."""
    sources = read_lines(args.src)[: args.limit]
    trained = load_trained(args.ckpt)
    translations = translate_lines(
        trained, sources, _search(args), args.max_tokens, return_attention=True
    )
    out = Path(args.out)
    for i, translation in enumerate(translations):
        hyp = translation.hypotheses[0]
        if hyp.attention is None:  # a blank line
            continue
        src_pieces = trained.vocab.src.pieces(translation.source) + [EOS_LABEL]
        tgt_pieces = trained.vocab.tgt.id_to_piece(hyp.tokens) + [EOS_LABEL]
        # [T, *heads, S]: layers and heads averaged into one map (per-head grids: issue 5)
        weights = hyp.attention.flatten(1, -2).mean(1) if hyp.attention.dim() > 2 else hyp.attention
        path = plot_attention(
            weights,
            src_pieces,
            tgt_pieces,
            out / f"attention_{i:04d}.png",
            title=translation.text,
        )
        print(path)


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
    _add_search_options(p, beam=5)
    p.add_argument("--input", help="source text, one sentence per line (default: stdin)")
    p.add_argument("--output", help="where to write translations (default: stdout)")
    p.add_argument("--n-best", type=int, default=1, help="print N hypotheses: index, score, text")
    p.add_argument("--progress", action="store_true", help="show a progress bar on stderr")
    p.set_defaults(run=translate)

    p = commands.add_parser("evaluate", help=evaluate.__doc__, description=evaluate.__doc__)
    _add_search_options(p, beam=5)
    p.add_argument("--src", required=True, help="source sentences")
    p.add_argument("--ref", required=True, help="reference translations")
    p.add_argument("--lang", help="target language for the literature scoring (default: config)")
    p.add_argument("--output", help="also write the translations here")
    p.add_argument("--json", action="store_true", help="print the scores as JSON")
    p.set_defaults(run=evaluate)

    p = commands.add_parser("attention", help=attention.__doc__, description=attention.__doc__)
    _add_search_options(p, beam=1)
    p.add_argument("--src", required=True, help="source sentences")
    p.add_argument("--out", required=True, help="folder for the PNG heatmaps")
    p.add_argument("--limit", type=int, default=20, help="draw at most this many sentences")
    p.set_defaults(run=attention)

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


COMMANDS = {"translate", "evaluate", "attention", "average", "corpus"}


def run_command(args: list[str]) -> None:
    parsed = build_parser().parse_args(args)
    parsed.run(parsed)
