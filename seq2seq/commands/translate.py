"""The commands that translate: translate (text in, translations out) and evaluate (a test
set translated and scored). Each function marked ``@command`` is a command of ``seq2seq``:
its parameters are the command's options, its docstring their help (``options.py``).

The scores (sacrebleu, sacremoses) are imported by evaluate alone, and CTranslate2 only when
an export is opened, so that translate starts with little more than torch.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Iterable
from json import dumps
from typing import Annotated

import torch

from seq2seq.commands.decoding import (
    BEAM_SEARCH,
    MEAN_ALIGNMENT,
    NO_MODEL,
    AlignmentSettings,
    DecodeSettings,
    ModelSettings,
    check_model_options,
    open_model,
)
from seq2seq.commands.options import (
    check_input_file,
    check_output_file,
    check_parallel,
    command,
)
from seq2seq.common.atomic import atomic_output, write_atomically
from seq2seq.common.errors import OutputError, UsageError
from seq2seq.common.ranges import Range
from seq2seq.inference.translator import Translation
from seq2seq.inspection.extraction import Extraction
from seq2seq.text.arriving_lines import arriving_lines
from seq2seq.text.lines import iter_lines, read_lines
from seq2seq.text.pharaoh import format_pharaoh


@command
def translate(  # its parameters are the command's options
    model: ModelSettings = NO_MODEL,
    decode: DecodeSettings = BEAM_SEARCH,
    input: str | None = None,
    output: str | None = None,
    n_best: Annotated[int, Range(1)] = 1,
    alignment: bool = False,
    links: AlignmentSettings = MEAN_ALIGNMENT,
    progress: bool = False,
) -> None:
    """Translate text with a checkpoint, line by line.

    Lines from --input (default stdin) go to --output (default stdout), streamed: read,
    translated and written in chunks of about four --max-tokens batches (sooner when stdin
    pauses), in input order. Stdout gets each chunk as soon as it is translated; --output
    FILE gets the translations only when all are done (until then an existing FILE keeps
    its old content, and after a failure too).

    Args:
        model: the checkpoints or the export to translate with
        decode: the search and its batches
        input: source text, one sentence per line (default: stdin)
        output: where to write translations (default: stdout)
        n_best: print N hypotheses per line (index, score, text), at most --beam
        alignment: follow each translation with " ||| " and its word alignment, Pharaoh
            links source-target (0-indexed, words split on spaces), read as `attention`
            reads them: from the mean attention over layers and heads unless the
            --alignment-* options choose
        links: how the links are read
        progress: show a progress bar on stderr
    """
    if n_best > decode.beam:
        raise UsageError(
            f"argument --n-best: must be an integer in [1, --beam {decode.beam}], got {n_best}"
        )
    check_model_options("translate", model)  # the cheap checks before any work
    check_input_file(input)
    check_output_file(output)
    extraction = alignment_extraction(alignment, links)
    opened = open_model("translate", model, decode, n_best)  # before reading
    lines = iter_lines(input) if input else arriving_lines(sys.stdin.buffer)
    translations = opened.stream(lines, progress, alignment=extraction)
    if not output:
        _write_to_stdout(translations, n_best)
        return
    with atomic_output(output) as file:
        out = io.TextIOWrapper(file, encoding="utf-8", newline="\n")
        for i, translation in enumerate(translations):
            out.write(_format(i, translation, n_best))
        out.flush()
        out.detach()


def alignment_extraction(alignment: bool, links: AlignmentSettings) -> Extraction | bool:
    """The extraction the --alignment options choose (False: no links; True: the model's
    own, the mean over layers and heads unless a released model's manifest records
    another), checked before any work: the choice needs --alignment, and a head its layer."""
    if not alignment:
        if links.chosen:
            raise UsageError(
                "--alignment-layer, --alignment-head, --alignment-shift and "
                "--alignment-method choose how --alignment reads links: give --alignment too"
            )
        return False
    return links.extraction() or True


def _format(index: int, translation: Translation, n_best: int) -> str:
    """A translation's output lines: its text, or with n-best ``index<TAB>score<TAB>text``;
    each text followed by `` ||| `` and its links when the translation has them."""
    texts = translation.texts
    if translation.alignments is not None:
        texts = [f"{text} ||| {format_pharaoh(links)}"
                 for text, links in zip(texts, translation.alignments, strict=True)]  # fmt: skip
    if n_best == 1:
        return texts[0] + "\n"
    return "".join(
        f"{index}\t{hyp.score:.4f}\t{text}\n"
        for text, hyp in zip(texts, translation.hypotheses, strict=True)
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


@command
def evaluate(
    src: str,
    ref: str,
    model: ModelSettings = NO_MODEL,
    decode: DecodeSettings = BEAM_SEARCH,
    lang: str | None = None,
    output: str | None = None,
    json_: bool = False,
    remove_bpe: bool = False,
) -> None:
    """Translate a test set and score it: BLEU, chrF.

    Translates --src and scores it against --ref: BLEU, chrF, and the literature's BLEU.

    Args:
        src: source sentences
        ref: reference translations
        model: the checkpoints or the export to score
        decode: the search and its batches
        lang: target language for the literature scoring (default: config)
        output: also write the translations here
        json_: print the scores as JSON
        remove_bpe: the corpus is cut into subword-nmt pieces ("@@" ending a piece) of
            tokenized text: join translations and references into tokens before scoring,
            and take the tokens as they are for the literature's BLEU (--output keeps the
            pieces)
    """
    from seq2seq.text.metrics import score_translations

    check_model_options("evaluate", model)  # the cheap checks before any work
    check_input_file(src)
    check_input_file(ref)
    check_output_file(output)
    opened = open_model("evaluate", model, decode)
    sources, refs = read_lines(src), read_lines(ref)
    check_parallel(src, sources, ref, refs)
    start = time.perf_counter()
    hyps = [t.text for t in opened.translate_all(sources, progress=True)]
    seconds = time.perf_counter() - start
    if output:
        text = "".join(h + "\n" for h in hyps).encode("utf-8")
        write_atomically(output, lambda file: file.write(text))
    scores = score_translations(hyps, refs, lang or opened.tgt_lang, remove_bpe)
    penalty = opened.search.length_penalty
    decoding = {
        "sentences": len(sources),
        "seconds": round(seconds, 3),
        "sentences_per_s": round(len(sources) / seconds, 2),
        "beam": decode.beam,
        "length_penalty": penalty,
        "threads": torch.get_num_threads(),
        "bf16": decode.bf16,
    }
    if json_:
        print(dumps({**scores, "decoding": decoding}, indent=2))
        return
    for name, result in scores.items():
        print(f"{name:16s} {result['score']:6.2f}  {result['signature']}")
    print(
        f"decoding         {decoding['sentences']} sentences in {seconds:.1f} s "
        f"({decoding['sentences_per_s']} sentences/s, beam {decode.beam}, "
        f"length penalty {penalty:g}, {decoding['threads']} threads"
        f"{', bf16' if decode.bf16 else ''})"
    )
