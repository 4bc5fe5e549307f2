"""The commands that inspect attention: attention (heatmaps, alignments, a report),
align-score (alignments against gold ones) and positional-encoding (the sinusoidal table's
plots). Each imports the inspection code (matplotlib) only when it runs."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Annotated

from seq2seq.commands.decoding import (
    DecodeSettings,
    check_model_files,
    released_list,
    search_options,
)
from seq2seq.commands.options import check_output_folder, check_parallel, command
from seq2seq.common.errors import DataError, Seq2SeqError, UsageError
from seq2seq.common.ranges import Range
from seq2seq.inference.checkpoint import Trained, check_checkpoint_path, load_trained
from seq2seq.inspection.word_alignments import Method, Symmetrization
from seq2seq.text.lines import read_lines
from seq2seq.translation_model import CheckpointModel, load

GREEDY_SEARCH = DecodeSettings(beam=1)  # what attention draws unless --beam says otherwise


@dataclass(frozen=True)
class InspectedModel:
    """The model the attention command inspects: --model, --ckpt or --hf, one of them.

    Attributes:
        model: a released model, by name (`seq2seq models` lists them)
        ckpt: checkpoint written by `seq2seq fit`; repeat it to inspect an ensemble
        hf: a Hugging Face transformers MarianMT model (a save_pretrained folder or a Hub id)
        ensemble_weights: with several --ckpt, the members' weights, one per --ckpt in the
            same order (scaled to sum to 1; default: equal); the mean attention is weighted
            alike
        ensemble_attention: with several --ckpt: draw and align with this member's own
            attention (0 is the first) instead of the members' mean over heads, layers and
            members
    """

    model: str | None = None
    ckpt: list[str] | None = None
    hf: str | None = None
    ensemble_weights: list[float] | None = None
    ensemble_attention: Annotated[int, Range(0)] | None = None

    def check(self) -> None:
        """The checks that need no loading, each a one-line error."""
        if sum(x is not None for x in (self.model, self.ckpt, self.hf)) != 1:
            raise UsageError(
                f"attention needs --model, --ckpt or --hf, one of them ({released_list()})"
            )
        check_model_files(self.model, self.ckpt, self.ensemble_weights)
        members = len(self.ckpt or [self.model or self.hf])
        if self.ensemble_attention is not None and self.ensemble_attention >= members:
            raise Seq2SeqError(
                f"--ensemble-attention {self.ensemble_attention} names no member: "
                f"{members} --ckpt given (0 to {members - 1})"
            )

    @property
    def name(self) -> str:
        return self.model or self.hf or " + ".join(self.ckpt or [])

    def open(self, decode: DecodeSettings) -> CheckpointModel:
        """The model, searching as ``decode`` says (checked first: ``check``)."""
        opened = load(
            self.ckpt or self.model or self.hf or "", ensemble_weights=self.ensemble_weights,
            ensemble_attention=self.ensemble_attention, export=False,
            hf=self.hf is not None or None, max_tokens=decode.max_tokens,
            max_source_len=decode.max_source_len, **search_options(decode),
        )  # fmt: skip
        assert isinstance(opened, CheckpointModel)  # export=False: checkpoints
        return opened


@dataclass(frozen=True)
class LinkSettings:
    """How the attention command reads word links from the maps.

    Attributes:
        layer: Transformer layer to align with (default: mean of all)
        method: one link per target word (argmax), only the pairs that are each other's best
            match both ways (mutual-argmax), or every weight above --threshold
        threshold: link weight for --method threshold
        reverse_ckpt: a target->source model: symmetrize both directions
        symmetrization: how --reverse-ckpt's links are combined with the forward ones
    """

    layer: int | None = None
    method: Method = "argmax"
    threshold: Annotated[float, Range(0, 1, above=True)] = 0.3
    reverse_ckpt: str | None = None
    symmetrization: Symmetrization = "grow-diag"


NO_INSPECTED_MODEL = InspectedModel()  # the default, before the options: one is required
DEFAULT_LINKS = LinkSettings()


@command
def attention(
    sentences: list[str] | None = None,
    /,
    out: str = "attention",
    inspected: InspectedModel = NO_INSPECTED_MODEL,
    decode: DecodeSettings = GREEDY_SEARCH,
    src: str | None = None,
    ref: str | None = None,
    limit: Annotated[int, Range(1)] = 20,
    links: LinkSettings = DEFAULT_LINKS,
) -> None:
    """Draw and report what a decoder attends to.

    Heatmaps, word alignments (Pharaoh), attention statistics and an HTML report of the
    sentences given (or of --src) translated, or of --ref forced, written to --out:
    `seq2seq attention --model multi30k-en-de "A dog runs on the beach."`. (The sinusoidal
    positional encoding's plots: `seq2seq positional-encoding`.)

    Args:
        sentences: source sentences to inspect, instead of --src
        out: folder for the heatmaps, alignments and report
        inspected: the model
        decode: the search and its batches
        src: source sentences
        ref: reference translations: align them (forced decoding)
        limit: draw and report the first N lines; alignments and statistics cover all
        links: how word links are read
    """
    from seq2seq.inspection.pipeline import InspectSettings, inspect_attention
    from seq2seq.inspection.stats import format_summary

    check_output_folder(out)
    inspected.check()
    if (sentences is None) == (src is None):
        raise UsageError("attention needs sentences or --src, one of them")
    if links.reverse_ckpt is not None:
        check_checkpoint_path(links.reverse_ckpt)
    sources = sentences if sentences is not None else read_lines(src or "")
    references = read_lines(ref) if ref else None
    if references is not None:
        check_parallel(src or "the sentences", sources, ref or "", references)
    opened = inspected.open(decode)
    reverse = load_trained(links.reverse_ckpt) if links.reverse_ckpt else None
    if reverse is not None:
        _check_reverse(opened.trained, reverse)
    options = InspectSettings(
        layer=links.layer, method=links.method, threshold=links.threshold,
        symmetrization=links.symmetrization, limit=limit, max_tokens=decode.max_tokens,
        max_source_len=decode.max_source_len, progress=True,
    )  # fmt: skip
    result = inspect_attention(
        opened.trained, sources, out, options, references=references, search=opened.search,
        reverse=reverse, title=f"Attention of {inspected.name}",
    )  # fmt: skip
    for written in [*result.heatmaps, *result.files]:
        print(written)
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


@command
def align_score(
    gold: str,
    hyp: str,
    one_indexed: bool = False,
    text: str | None = None,
    baseline: str | None = None,
) -> None:
    """Score word alignments against gold ones (AER).

    AER, precision and recall (Och & Ney 2003; gold links written 3p4 or 3-4-P are
    possible, the others sure), with a 95% bootstrap interval of the AER over sentences.

    Args:
        gold: gold alignments, one line per sentence
        hyp: alignments to score, Pharaoh i-j, 0-indexed
        one_indexed: the gold file counts from 1
        text: the aligned sentences, "source ||| target" per line: gold links outside
            their sentence are dropped, each said on stderr
        baseline: alignments of the same sentences by another system: the interval of
            the AER difference (hyp - baseline), from the same resampled sentences
    """
    from seq2seq.inspection.word_alignments import (
        aer_interval,
        corpus_score,
        drop_outside,
        read_gold,
        sentence_scores,
    )
    from seq2seq.text.pharaoh import read_links

    gold_links, hyp_links = read_gold(gold, one_indexed), read_links(hyp)
    check_parallel(gold, gold_links, hyp, hyp_links)
    if text is not None:
        lengths = sentence_lengths(text)
        check_parallel(gold, gold_links, text, lengths)
        gold_links, dropped = drop_outside(gold_links, lengths)
        for message in dropped:
            print(f"seq2seq: {gold} {message}: dropped", file=sys.stderr)
    sentences = sentence_scores(gold_links, hyp_links)
    score = corpus_score(sentences)
    low, high = aer_interval(sentences)
    print(f"{'AER':10s} {_value(score.aer)}  (95% interval {low:.4f}-{high:.4f}, "
          f"{len(sentences)} sentences resampled)")  # fmt: skip
    print(f"{'precision':10s} {_value(score.precision)}")
    print(f"{'recall':10s} {_value(score.recall)}")
    print(f"{'links':10s} {score.hyp} hypothesis, {score.sure} sure")
    if baseline is not None:
        base_links = read_links(baseline)
        check_parallel(gold, gold_links, baseline, base_links)
        base = sentence_scores(gold_links, base_links)
        low, high = aer_interval(sentences, baseline=base)
        base_aer = corpus_score(base).aer
        difference = None if score.aer is None or base_aer is None else score.aer - base_aer
        print(
            f"{'vs baseline':10s} AER {_value(difference)} (95% interval {low:+.4f} to {high:+.4f})"
        )


def _value(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def sentence_lengths(path: str) -> list[tuple[int, int]]:
    """Source and target word counts of each ``source ||| target`` line of ``path``."""
    lengths = []
    for n, line in enumerate(read_lines(path), start=1):
        source, separator, target = line.partition(" ||| ")
        if not separator:
            raise DataError(f"{path}:{n}: no ' ||| ' between source and target")
        lengths.append((len(source.split()), len(target.split())))
    return lengths


@command
def positional_encoding(
    out: str, dim: Annotated[int, Range(2)], positions: Annotated[int, Range(1)] = 50
) -> None:
    """Plot the Transformer's sinusoidal positional encoding.

    Two figures in --out: each dimension's curve over the positions, and the table as a
    heatmap (positions x dimensions).

    Args:
        out: folder for the two figures
        dim: the model size (dimensions of the encoding)
        positions: how many positions to draw
    """
    from seq2seq.inspection.positional_encoding import plot_positional_encoding

    check_output_folder(out)
    for path in plot_positional_encoding(dim, positions, out):
        print(path)
