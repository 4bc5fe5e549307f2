"""Inspecting a model's attention over a corpus: everything ``seq2seq attention`` writes.

Into the output folder:

- ``attention_NNNN.png``: the heatmap of each of the first ``limit`` lines (a blank source
  line has nothing to draw);
- ``alignments.txt``: word alignments in Pharaoh format, one line per input line (with a
  reverse-direction model also ``alignments.forward.txt`` and ``alignments.reverse.txt``,
  the two directions before symmetrization);
- ``translations.txt``: the translations aligned, when no reference was given;
- ``stats.json``: corpus and per-sentence statistics (``stats.py``);
- ``report.html``: the interactive report of the sentences drawn.

Every file is written atomically (``atomic.py``): a full disk leaves a file's old content.

Alignments and statistics use each sentence's summary map (``maps.summary_map``) with
the target EOS row left out and every row rescaled to sum to 1, merged into words.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from seq2seq.common.atomic import output_folder, write_atomically
from seq2seq.inference.checkpoint import Trained
from seq2seq.inference.search import SearchSettings
from seq2seq.inspection.collect import (
    SentenceAttention,
    head_axes,
    reference_attention,
    translation_attention,
    word_attention,
)
from seq2seq.inspection.heatmap import draw_sentence
from seq2seq.inspection.maps import check_layer_choice
from seq2seq.inspection.report import write_report
from seq2seq.inspection.stats import CorpusStats, SentenceStats, sentence_stats
from seq2seq.inspection.word_alignments import (
    Link,
    Method,
    Symmetrization,
    extract_links,
    symmetrize,
    transpose,
)
from seq2seq.text.pharaoh import format_pharaoh

log = logging.getLogger("seq2seq")


@dataclass
class InspectSettings:
    """How attention becomes alignments and pictures.

    layer: the Transformer layer whose mean over heads is aligned and measured (None: the
    mean over every layer; ignored for RNN attention); method/threshold: hard alignment
    per target word (``links.extract_links``); symmetrization: how a reverse-direction
    model's links are combined; limit: how many sentences get a heatmap and a place in
    the report (alignments and statistics cover all); max_source_len: longer sources are
    cut before translating (not when a reference is forced).
    """

    layer: int | None = None
    method: Method = "argmax"
    threshold: float = 0.3
    symmetrization: Symmetrization = "grow-diag"
    limit: int = 20
    max_tokens: int = 4096
    max_source_len: int = 512
    progress: bool = True


@dataclass
class Inspection:
    """What ``inspect_attention`` wrote, and the corpus statistics."""

    heatmaps: list[Path]
    files: list[Path]
    summary: dict[str, float | int | None]


@dataclass
class _Forward:
    """What the forward pass keeps per sentence (by index): small, whatever the corpus."""

    links: dict[int, set[Link]] = field(default_factory=dict)
    shapes: dict[int, tuple[int, int]] = field(default_factory=dict)  # (Tw, Sw)
    targets: dict[int, str] = field(default_factory=dict)
    stats: CorpusStats = field(default_factory=CorpusStats)
    shown: list[SentenceAttention] = field(default_factory=list)
    heatmaps: list[Path] = field(default_factory=list)


def _analyze(
    sentences: Iterator[SentenceAttention], options: InspectSettings, out: Path
) -> _Forward:
    kept = _Forward()
    draw_layer = options.layer if options.layer is not None else -1
    for sentence in sentences:
        i = sentence.index
        rows, word_map, src_words = word_attention(sentence, options.layer)
        kept.links[i] = extract_links(word_map, options.method, options.threshold)
        kept.shapes[i] = (word_map.size(0), word_map.size(1))
        kept.targets[i] = sentence.target
        stats: SentenceStats = sentence_stats(i, rows, word_map, sentence.src_pieces, src_words)
        kept.stats.add(stats)
        if i < options.limit and sentence.source.strip():
            kept.heatmaps.append(
                draw_sentence(sentence, out / f"attention_{i:04d}.png", draw_layer)
            )
            kept.shown.append(sentence)
    return kept


def _backward_links(
    reverse: Trained,
    sources: Sequence[str],
    targets: Sequence[str],
    shapes: dict[int, tuple[int, int]],
    options: InspectSettings,
) -> dict[int, set[Link]]:
    """The reverse model's links (as (source, target)) for sentences whose words match."""
    backward: dict[int, set[Link]] = {}
    stream = reference_attention(reverse, targets, sources, options.max_tokens, options.progress)
    for sentence in stream:
        _, word_map, _ = word_attention(sentence, options.layer)  # [Sw, Tw]
        if (word_map.size(1), word_map.size(0)) == shapes[sentence.index]:
            backward[sentence.index] = transpose(
                extract_links(word_map, options.method, options.threshold)
            )
    return backward


def _symmetrized(
    kept: _Forward,
    reverse: Trained,
    sources: Sequence[str],
    targets: Sequence[str],
    options: InspectSettings,
    out: Path,
) -> tuple[dict[int, set[Link]], list[Path]]:
    """The forward links symmetrized with ``reverse``'s (a sentence the two models split
    into different words keeps its forward links), and the files of each direction's links
    (alignments.forward.txt, alignments.reverse.txt)."""
    n, forward = len(sources), kept.links
    backward = _backward_links(reverse, sources, targets, kept.shapes, options)
    if skipped := n - len(backward):
        log.warning(
            "%d sentence(s) split into different words by the reverse model keep the "
            "forward links only",
            skipped,
        )
    files = [
        _write_lines(out / "alignments.forward.txt", _pharaoh(forward, n)),
        _write_lines(out / "alignments.reverse.txt", _pharaoh(backward, n)),
    ]
    how = options.symmetrization
    both = {i: symmetrize(forward[i], links, how) for i, links in backward.items()}
    return {**forward, **both}, files


def _write_lines(path: Path, lines: Sequence[str]) -> Path:
    text = "".join(line + "\n" for line in lines)
    return write_atomically(path, lambda file: file.write(text.encode("utf-8")))


def _pharaoh(links: Mapping[int, set[Link]], n: int) -> list[str]:
    """Pharaoh lines of sentences 0 .. n-1; a sentence without links is an empty line."""
    return [format_pharaoh(links.get(i, set())) for i in range(n)]


def inspect_attention(
    trained: Trained,
    sources: Sequence[str],
    out_dir: str | Path,
    options: InspectSettings,
    references: Sequence[str] | None = None,
    search: SearchSettings | None = None,
    reverse: Trained | None = None,
    title: str = "Attention",
) -> Inspection:
    """Collect, draw, align and measure the attention of ``trained`` on ``sources``.

    With ``references``, forced decoding of them; otherwise the model's own translation
    with ``search``. ``reverse``: a model of the other direction (target -> source) whose
    links are symmetrized with the forward ones.
    """
    for model in (trained, reverse):
        if model is not None:
            check_layer_choice(options.layer, head_axes(model))
    out = output_folder(out_dir)
    if references is not None:
        stream = reference_attention(
            trained, sources, references, options.max_tokens, options.progress
        )
    else:
        stream = translation_attention(
            trained,
            sources,
            search or SearchSettings(),
            options.max_tokens,
            options.progress,
            options.max_source_len,
        )
    with closing(stream):  # a write failing mid-way still ends the stream's inference mode
        kept = _analyze(stream, options, out)
    n = len(sources)
    targets = [kept.targets[i] for i in range(n)]
    files: list[Path] = []
    if references is None:
        files.append(_write_lines(out / "translations.txt", targets))
    links = kept.links
    if reverse is not None:
        links, written = _symmetrized(kept, reverse, sources, targets, options, out)
        files += written
    pharaoh = _pharaoh(links, n)
    files.append(_write_lines(out / "alignments.txt", pharaoh))
    stats = json.dumps(kept.stats.as_json(), indent=1, ensure_ascii=False) + "\n"
    files.append(write_atomically(out / "stats.json", lambda file: file.write(stats.encode())))
    shown = sorted(kept.shown, key=lambda s: s.index)
    files.append(
        write_report(
            shown,
            {s.index: pharaoh[s.index] for s in shown},
            out / "report.html",
            title,
            options.layer,
        )
    )
    return Inspection(sorted(kept.heatmaps), files, kept.stats.summary())
