"""The commands beside Lightning's: translate, evaluate, attention, align-score, average,
corpus, export and serve.

What only some commands need is imported by those commands: the scores (sacrebleu,
sacremoses) by evaluate, the attention inspection (matplotlib) by attention and
align-score, the corpus generator (babel, num2words) by corpus, ctranslate2 by export and
translate --ctranslate2, the web stack by serve; so that translate starts with little
more than torch.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import fields, replace
from pathlib import Path

import torch

from seq2seq.arriving_lines import arriving_lines
from seq2seq.atomic import atomic_output, write_atomically
from seq2seq.checkpoint import (
    Trained,
    average_checkpoints,
    check_checkpoint_path,
    load_trained,
    save_checkpoint,
)
from seq2seq.command_line import (
    check_input_file,
    check_output_file,
    check_output_folder,
    parse_command_line,
)
from seq2seq.ensemble import load_ensemble
from seq2seq.errors import DataError, OutputError, Seq2SeqError
from seq2seq.search import SearchSettings
from seq2seq.text_lines import iter_lines, read_lines
from seq2seq.translator import Translation, translate_lines, translate_stream


def _search(args: argparse.Namespace, configured: SearchSettings) -> SearchSettings:
    """``configured`` (the search a model's checkpoint gives) changed by the search options
    the command line sets, which are named after SearchSettings' fields; --length-penalty
    alone has no default of its own (None), so unset it keeps the model's."""
    options = {f.name: getattr(args, f.name, None) for f in fields(SearchSettings)}
    return replace(configured, **{name: val for name, val in options.items() if val is not None})


def _check_parallel(path_a: str, lines_a: Sized, path_b: str, lines_b: Sized) -> None:
    """Two files that must hold one line per sentence each, the same sentences."""
    if len(lines_a) != len(lines_b):
        raise DataError(f"{path_a} has {len(lines_a)} lines but {path_b} has {len(lines_b)}")


def translate(args: argparse.Namespace) -> None:
    """Translate lines from --input (default stdin) to --output (default stdout), streamed:
    read, translated and written in chunks of about four --max-tokens batches (sooner when
    stdin pauses), in input order. Stdout gets each chunk as soon as it is translated;
    --output FILE gets the translations only when all are done (until then an existing FILE
    keeps its old content, and after a failure too)."""
    check_input_file(args.input)
    check_output_file(args.output)
    if args.ctranslate2:
        translations = _translate_with_ctranslate2(args)
    else:
        trained = load_ensemble(args.ckpt)  # before reading any input: a bad checkpoint is an error
        translations = translate_stream(
            trained,
            _input_lines(args),
            _search(args, trained.search),
            args.max_tokens,
            progress=args.progress,
            max_source_len=args.max_source_len,
        )
    if not args.output:
        _write_to_stdout(translations, args.n_best)
        return
    with atomic_output(args.output) as file:
        out = io.TextIOWrapper(file, encoding="utf-8", newline="\n")
        for i, translation in enumerate(translations):
            out.write(_format(i, translation, args.n_best))
        out.flush()
        out.detach()


def _input_lines(args: argparse.Namespace) -> Iterable[str | None]:
    """The lines of --input, or of stdin as they arrive (None: the input paused)."""
    return iter_lines(args.input) if args.input else arriving_lines(sys.stdin.buffer)


def _translate_with_ctranslate2(args: argparse.Namespace) -> Iterator[Translation]:
    """translate --ctranslate2 DIR: the export's translations, under seq2seq's search
    semantics (ct2_translate says how each option maps)."""
    from seq2seq.ct2_translate import check_search, load_export, translate_stream_ct2

    exported = load_export(args.ctranslate2)
    search = _search(args, exported.search)
    check_search(search)  # before reading any input
    return translate_stream_ct2(
        exported,
        _input_lines(args),
        search,
        args.max_tokens,
        progress=args.progress,
        max_source_len=args.max_source_len,
    )


def _format(index: int, translation: Translation, n_best: int) -> str:
    """A translation's output lines: its text, or with n-best ``index<TAB>score<TAB>text``."""
    if n_best == 1:
        return translation.text + "\n"
    return "".join(
        f"{index}\t{hyp.score:.4f}\t{text}\n"
        for text, hyp in zip(translation.texts, translation.hypotheses, strict=True)
    )


def _write_to_stdout(translations: Iterable[Translation], n_best: int) -> None:
    """Each translation as soon as it exists; a full disk under ``> FILE`` is one line."""
    for i, translation in enumerate(translations):
        try:
            sys.stdout.write(_format(i, translation, n_best))
            sys.stdout.flush()
        except BrokenPipeError:
            raise
        except OSError as error:
            raise OutputError(
                f"cannot write to stdout: {error.strerror or error}; the translations of "
                f"the first {i} lines were written"
            ) from error


def evaluate(args: argparse.Namespace) -> None:
    """Translate --src and score it against --ref: BLEU, chrF, and the literature's BLEU."""
    from seq2seq.metrics import literature_bleu, score_corpus

    for ckpt in args.ckpt:
        check_checkpoint_path(ckpt)
    check_output_file(args.output)
    sources, refs = read_lines(args.src), read_lines(args.ref)
    _check_parallel(args.src, sources, args.ref, refs)
    trained = load_ensemble(args.ckpt)
    search = _search(args, trained.search)
    start = time.perf_counter()
    translations = translate_lines(
        trained, sources, search, args.max_tokens, progress=True,
        max_source_len=args.max_source_len,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    hyps = [t.text for t in translations]
    if args.output:
        text = "".join(h + "\n" for h in hyps).encode("utf-8")
        write_atomically(args.output, lambda file: file.write(text))
    scores = score_corpus(hyps, refs)
    lang = args.lang or trained.tgt_lang
    if lang:
        scores["bleu_literature"] = literature_bleu(hyps, refs, lang)
    decoding = {
        "sentences": len(sources),
        "seconds": round(seconds, 3),
        "sentences_per_s": round(len(sources) / seconds, 2),
        "beam": search.beam_size,
        "length_penalty": search.length_penalty,
        "threads": torch.get_num_threads(),
        "bf16": search.bf16,
    }
    if args.json:
        print(json.dumps({**scores, "decoding": decoding}, indent=2))
        return
    for name, result in scores.items():
        print(f"{name:16s} {result['score']:6.2f}  {result['signature']}")
    print(
        f"decoding         {decoding['sentences']} sentences in {seconds:.1f} s "
        f"({decoding['sentences_per_s']} sentences/s, beam {search.beam_size}, "
        f"length penalty {search.length_penalty:g}, "
        f"{decoding['threads']} threads{', bf16' if search.bf16 else ''})"
    )


def attention(args: argparse.Namespace) -> None:
    """Inspect what the decoder attends to: heatmaps, word alignments (Pharaoh), attention
    statistics and an HTML report of --src translated (or of --ref, forced), written to --out;
    or, with --positional-encoding, plots of the Transformer's sinusoidal encoding."""
    from seq2seq.inspection.pipeline import InspectOptions, inspect_attention
    from seq2seq.inspection.stats import format_summary
    from seq2seq.positional_encoding_plot import plot_positional_encoding

    check_output_folder(args.out)
    if args.positional_encoding:
        if args.dim is None or args.len is None:
            raise Seq2SeqError("--positional-encoding needs --dim D and --len N")
        for path in plot_positional_encoding(args.dim, args.len, args.out):
            print(path)
        return
    if args.ckpt is None or args.src is None:
        raise Seq2SeqError("attention needs --ckpt and --src (or --positional-encoding)")
    for ckpt in [*args.ckpt, args.reverse_ckpt]:
        if ckpt is not None:
            check_checkpoint_path(ckpt)
    sources = read_lines(args.src)
    references = read_lines(args.ref) if args.ref else None
    if references is not None:
        _check_parallel(args.src, sources, args.ref, references)
    if args.ensemble_attention is not None and args.ensemble_attention >= len(args.ckpt):
        raise Seq2SeqError(
            f"--ensemble-attention {args.ensemble_attention} names no member: "
            f"{len(args.ckpt)} --ckpt given (0 to {len(args.ckpt) - 1})"
        )
    trained = load_ensemble(args.ckpt, args.ensemble_attention)
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
        search=_search(args, trained.search),
        reverse=reverse,
        title=f"Attention of {' + '.join(args.ckpt)}",
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
    from seq2seq.inspection.word_alignments import read_gold, read_links, score_alignments

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
    from seq2seq.data.demo_corpus import write_corpus

    paths = write_corpus(
        Path(args.out), seed=args.seed, src_lang=args.src_lang, tgt_lang=args.tgt_lang
    )
    for path in paths.values():
        print(path)


def average(args: argparse.Namespace) -> None:
    """Average the weights of several checkpoints into one (e.g. the last five epochs)."""
    for ckpt in args.ckpts:
        check_checkpoint_path(ckpt)
    check_output_file(args.out, "--out", new_folder=True)
    print(save_checkpoint(average_checkpoints(args.ckpts), args.out))


def serve(args: argparse.Namespace) -> None:
    """Serve translations over HTTP: the model (or ensemble) is loaded once, POST /translate
    answers JSON requests (translations, scores, word alignments, attention maps), requests
    that arrive together are translated in one batch; GET /health, API documentation at
    /docs. SIGTERM answers the requests in flight, then exits. Needs the `serve` extra
    (pip install 'seq2seq[serve]')."""
    from seq2seq.serve.command import start_server  # FastAPI and uvicorn only from here

    start_server(args, lambda trained: _search(args, trained.search))


def export(args: argparse.Namespace) -> None:
    """Export a Transformer checkpoint for CTranslate2 (--to ctranslate2): its weights, its
    SentencePiece model(s) and vocabulary, in one folder that `seq2seq translate
    --ctranslate2 DIR` and ctranslate2.Translator read."""
    from seq2seq.export import export_ctranslate2, import_ctranslate2

    check_checkpoint_path(args.ckpt)
    check_output_folder(args.out)
    import_ctranslate2()  # before loading the checkpoint: a missing package fails fast
    print(export_ctranslate2(load_trained(args.ckpt), args.out, args.quantization))


RUNS: dict[str, Callable[[argparse.Namespace], None]] = {
    "translate": translate,
    "evaluate": evaluate,
    "attention": attention,
    "align-score": align_score,
    "average": average,
    "corpus": corpus,
    "export": export,
    "serve": serve,
}
# Each command with the line `seq2seq --help` shows for it.
COMMANDS = {
    "translate": "translate text with a checkpoint, line by line",
    "evaluate": "translate a test set and score it: BLEU, chrF",
    "attention": "draw and report what a decoder attends to",
    "align-score": "score word alignments against gold ones (AER)",
    "average": "average the weights of several checkpoints",
    "corpus": "write the embedded corpus as parallel text files",
    "export": "export a Transformer checkpoint to CTranslate2",
    "serve": "serve translations, alignments and attention over HTTP",
}
BROKEN_PIPE_STATUS = 128 + 13  # what a shell reports for a process ended by SIGPIPE


def run_command(args: list[str]) -> None:
    parsed = parse_command_line(args, RUNS)
    try:
        RUNS[parsed.command](parsed)
    except BrokenPipeError:
        # The reader of stdout has gone (`seq2seq translate ... | head`): stop quietly, with
        # the status of a process ended by SIGPIPE, as `yes | head` ends. Stdout goes to
        # /dev/null so that the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(BROKEN_PIPE_STATUS)
