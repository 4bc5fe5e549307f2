"""The commands that translate, or write checkpoints and data: translate, evaluate, average,
corpus and export (serve is ``serve/command.py``). Each function marked ``@command`` is a
command of ``seq2seq`` (its name, dashes for underscores): its parameters are the
command's options, its docstring their help (``command_line.py`` turns them into a parser).

What only some commands need is imported by those commands: the scores (sacrebleu,
sacremoses) by evaluate, the corpus generator (babel, num2words) by corpus, ctranslate2 by
export and translate --ctranslate2; so that translate starts with little more than torch.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from json import dumps
from pathlib import Path
from typing import Annotated, Literal

import torch

from seq2seq.arriving_lines import arriving_lines
from seq2seq.atomic import atomic_output, write_atomically
from seq2seq.checkpoint import (
    average_checkpoints,
    check_checkpoint_path,
    load_trained,
    save_checkpoint,
)
from seq2seq.command_line import (
    Range,
    UsageError,
    check_input_file,
    check_output_file,
    check_output_folder,
    check_parallel,
    command,
)
from seq2seq.ensemble import load_ensemble
from seq2seq.errors import OutputError
from seq2seq.export import Quantization
from seq2seq.search import SearchSettings
from seq2seq.text_lines import iter_lines, read_lines
from seq2seq.translator import Translation, translate_lines, translate_stream


@dataclass(frozen=True)
class DecodeOptions:
    """The options of every command that translates: the search and its batches.

    Attributes:
        beam: beam size; 1 is greedy search
        length_penalty: GNMT alpha, 0 for none; unset: the model's config
            (model.length_penalty) or 1.0
        max_len_ratio: longest output = ratio * source pieces + offset
        max_len_offset: added to the longest output, see --max-len-ratio
        max_tokens: source pieces per batch, padding included; a longer sentence is a batch
            alone
        max_source_len: cut longer sources to this many pieces, with a warning
        bf16: search under bfloat16 autocast (faster on CPUs with AVX512-BF16/AMX; scores
            may differ in the last digits)
    """

    beam: Annotated[int, Range(1)] = 5
    length_penalty: Annotated[float, Range(0)] | None = None
    max_len_ratio: Annotated[float, Range(0)] = 1.5
    max_len_offset: Annotated[int, Range(0)] = 10
    max_tokens: Annotated[int, Range(1)] = 4096
    max_source_len: Annotated[int, Range(1)] = 512
    bf16: bool = False


BEAM_SEARCH = DecodeOptions()  # the defaults of translate, evaluate and serve


def search_settings(
    options: DecodeOptions, configured: SearchSettings, n_best: int = 1
) -> SearchSettings:
    """``configured`` (the search a model's checkpoint or export gives) changed by what the
    options set. --length-penalty alone has no default of its own (None): unset, it keeps
    the model's, so that a model is scored as its config says; the other options always
    set theirs."""
    changes = {
        "beam_size": options.beam,
        "n_best": n_best,
        "bf16": options.bf16,
        "max_len_ratio": options.max_len_ratio,
        "max_len_offset": options.max_len_offset,
    }
    if options.length_penalty is not None:
        changes["length_penalty"] = options.length_penalty
    return replace(configured, **changes)


@command
def translate(
    ckpt: list[str] | None = None,
    ctranslate2: str | None = None,
    decode: DecodeOptions = BEAM_SEARCH,
    input: str | None = None,
    output: str | None = None,
    n_best: Annotated[int, Range(1)] = 1,
    progress: bool = False,
) -> None:
    """Translate text with a checkpoint, line by line.

    Lines from --input (default stdin) go to --output (default stdout), streamed: read,
    translated and written in chunks of about four --max-tokens batches (sooner when stdin
    pauses), in input order. Stdout gets each chunk as soon as it is translated; --output
    FILE gets the translations only when all are done (until then an existing FILE keeps
    its old content, and after a failure too).

    Args:
        ckpt: checkpoint written by `seq2seq fit`; repeat it to decode with an ensemble (the
            mean of the models' log-probabilities at every step)
        ctranslate2: translate with a CTranslate2 export (`seq2seq export`, a folder) instead
            of a checkpoint; search options as with --ckpt (see the README), --bf16 excepted
        decode: the search and its batches
        input: source text, one sentence per line (default: stdin)
        output: where to write translations (default: stdout)
        n_best: print N hypotheses per line (index, score, text), at most --beam
        progress: show a progress bar on stderr
    """
    _check_one_model(ckpt, ctranslate2, "translate")
    if n_best > decode.beam:
        raise UsageError(
            f"argument --n-best: must be an integer in [1, --beam {decode.beam}], got {n_best}"
        )
    check_input_file(input)
    check_output_file(output)
    if ctranslate2:
        translations = _translate_with_ctranslate2(ctranslate2, input, decode, n_best, progress)
    else:
        trained = load_ensemble(ckpt)  # before reading any input: a bad checkpoint is an error
        search = search_settings(decode, trained.search, n_best)
        translations = translate_stream(
            trained, _input_lines(input), search, decode.max_tokens, progress=progress,
            max_source_len=decode.max_source_len,
        )  # fmt: skip
    if not output:
        _write_to_stdout(translations, n_best)
        return
    with atomic_output(output) as file:
        out = io.TextIOWrapper(file, encoding="utf-8", newline="\n")
        for i, translation in enumerate(translations):
            out.write(_format(i, translation, n_best))
        out.flush()
        out.detach()


def _check_one_model(ckpt: list[str] | None, ctranslate2: str | None, command: str) -> None:
    """A command that decodes needs checkpoints or an export, not both."""
    if ckpt is None and ctranslate2 is None:
        raise UsageError(f"{command} needs --ckpt or --ctranslate2")
    if ckpt is not None and ctranslate2 is not None:
        raise UsageError("--ckpt and --ctranslate2 exclude each other")


def _input_lines(input: str | None) -> Iterable[str | None]:
    """The lines of --input, or of stdin as they arrive (None: the input paused)."""
    return iter_lines(input) if input else arriving_lines(sys.stdin.buffer)


def _translate_with_ctranslate2(
    folder: str, input: str | None, decode: DecodeOptions, n_best: int, progress: bool
) -> Iterator[Translation]:
    """translate --ctranslate2 DIR: the export's translations, under seq2seq's search
    semantics (ct2_translate says how each option maps)."""
    from seq2seq.ct2_translate import check_search, load_export, translate_stream_ct2

    exported = load_export(folder)
    search = search_settings(decode, exported.search, n_best)
    check_search(search)  # before reading any input
    return translate_stream_ct2(
        exported,
        _input_lines(input),
        search,
        decode.max_tokens,
        progress=progress,
        max_source_len=decode.max_source_len,
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


@command
def evaluate(
    src: str,
    ref: str,
    ckpt: list[str] | None = None,
    ctranslate2: str | None = None,
    decode: DecodeOptions = BEAM_SEARCH,
    lang: str | None = None,
    output: str | None = None,
    json: bool = False,
) -> None:
    """Translate a test set and score it: BLEU, chrF.

    Translates --src and scores it against --ref: BLEU, chrF, and the literature's BLEU.

    Args:
        src: source sentences
        ref: reference translations
        ckpt: checkpoint written by `seq2seq fit`; repeat it to decode with an ensemble
        ctranslate2: score a CTranslate2 export (`seq2seq export`, a folder) instead of a
            checkpoint; search options as with --ckpt, --bf16 excepted
        decode: the search and its batches
        lang: target language for the literature scoring (default: config)
        output: also write the translations here
        json: print the scores as JSON
    """
    from seq2seq.metrics import literature_bleu, score_corpus

    _check_one_model(ckpt, ctranslate2, "evaluate")
    for path in ckpt or []:
        check_checkpoint_path(path)
    check_output_file(output)
    sources, refs = read_lines(src), read_lines(ref)
    check_parallel(src, sources, ref, refs)
    start = time.perf_counter()
    if ctranslate2:
        from seq2seq.ct2_translate import check_search, load_export, translate_stream_ct2

        exported = load_export(ctranslate2)
        search = search_settings(decode, exported.search)
        check_search(search)
        translations = list(translate_stream_ct2(
            exported, sources, search, decode.max_tokens, progress=True,
            max_source_len=decode.max_source_len,
        ))  # fmt: skip
        model_lang = exported.tgt_lang
    else:
        trained = load_ensemble(ckpt)
        search = search_settings(decode, trained.search)
        translations = translate_lines(
            trained, sources, search, decode.max_tokens, progress=True,
            max_source_len=decode.max_source_len,
        )  # fmt: skip
        model_lang = trained.tgt_lang
    seconds = time.perf_counter() - start
    hyps = [t.text for t in translations]
    if output:
        text = "".join(h + "\n" for h in hyps).encode("utf-8")
        write_atomically(output, lambda file: file.write(text))
    scores = score_corpus(hyps, refs)
    lang = lang or model_lang
    if lang:
        scores["bleu_literature"] = literature_bleu(hyps, refs, lang)
    decoding = {
        "sentences": len(sources),
        "seconds": round(seconds, 3),
        "sentences_per_s": round(len(sources) / seconds, 2),
        "beam": decode.beam,
        "length_penalty": search.length_penalty,
        "threads": torch.get_num_threads(),
        "bf16": decode.bf16,
    }
    if json:
        print(dumps({**scores, "decoding": decoding}, indent=2))
        return
    for name, result in scores.items():
        print(f"{name:16s} {result['score']:6.2f}  {result['signature']}")
    print(
        f"decoding         {decoding['sentences']} sentences in {seconds:.1f} s "
        f"({decoding['sentences_per_s']} sentences/s, beam {decode.beam}, "
        f"length penalty {search.length_penalty:g}, "
        f"{decoding['threads']} threads{', bf16' if decode.bf16 else ''})"
    )


@command
def average(ckpts: list[str], out: str) -> None:
    """Average the weights of several checkpoints.

    Writes one checkpoint whose weights are the mean of theirs (e.g. of the last five
    epochs).

    Args:
        ckpts: checkpoints to average
        out: where to write the averaged checkpoint
    """
    for ckpt in ckpts:
        check_checkpoint_path(ckpt)
    check_output_file(out, "--out", new_folder=True)
    print(save_checkpoint(average_checkpoints(ckpts), out))


@command
def corpus(out: str, seed: int = 1, src_lang: str = "en", tgt_lang: str = "de") -> None:
    """Write the embedded corpus as parallel text files.

    The corpus `make demo` and the tests train on: numbers and dates, written out.

    Args:
        out: folder to write {split}.{lang} files into
        seed: the draw of sentence pairs
        src_lang: source language code
        tgt_lang: target language code
    """
    from seq2seq.data.demo_corpus import write_corpus

    paths = write_corpus(Path(out), seed=seed, src_lang=src_lang, tgt_lang=tgt_lang)
    for path in paths.values():
        print(path)


@command
def export(
    ckpt: str, to: Literal["ctranslate2"], out: str, quantization: Quantization = "float32"
) -> None:
    """Export a Transformer checkpoint to CTranslate2.

    Its weights, its SentencePiece model(s) and vocabulary, in one folder that `seq2seq
    translate --ctranslate2 DIR` and ctranslate2.Translator read.

    Args:
        ckpt: Transformer checkpoint written by `seq2seq fit`
        to: the engine to export for
        out: folder to write the model into
        quantization: type of the stored weights (int8: about 4 times smaller and faster on
            CPUs)
    """
    from seq2seq.export import export_ctranslate2, import_ctranslate2

    check_checkpoint_path(ckpt)
    check_output_folder(out)
    import_ctranslate2()  # before loading the checkpoint: a missing package fails fast
    print(export_ctranslate2(load_trained(ckpt), out, quantization))
