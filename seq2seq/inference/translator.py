"""Translating text with a trained model: tokenize, batch by length, search, detokenize;
all lines at once (``translate_lines``) or streamed in chunks (``translate_stream``)."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from tqdm.auto import tqdm

from seq2seq.inference.batching import source_batches
from seq2seq.inference.checkpoint import Trained
from seq2seq.inference.search import Hypothesis, SearchSettings, translate_batch
from seq2seq.speedups.onednn_linear import onednn_linears

log = logging.getLogger("seq2seq")

# A streamed chunk holds about this many batches' worth of source pieces: enough for
# batching by length to pay, few enough that the first output comes within seconds.
CHUNK_BATCHES = 4


@dataclass
class Translation:
    """The n-best hypotheses (best first) of one source line, detokenized; with
    ``alignments`` (when asked for), each hypothesis's links (source word, target word),
    0-indexed over the whitespace-separated words of ``source`` and of its text."""

    source: str
    texts: list[str]
    hypotheses: list[Hypothesis]
    alignments: list[list[tuple[int, int]]] | None = None

    @property
    def text(self) -> str:
        return self.texts[0]


def translate_lines(
    trained: Trained,
    lines: Sequence[str],
    search: SearchSettings,
    max_tokens: int = 4096,
    need_weights: bool = False,
    progress: bool = False,
    max_source_len: int = 512,
) -> list[Translation]:
    """Translate ``lines`` in their order, all in one pass (batched by length over all of
    them); blank lines give empty translations.

    A line longer than ``max_source_len`` pieces is cut to that length, with a warning
    naming the line: the output of one very long line would otherwise take minutes.
    """
    bar = tqdm(total=len(lines), desc="translating", unit="sent", disable=not progress)
    src_ids = [
        cut_source(ids, number + 1, max_source_len)
        for number, ids in enumerate(trained.vocab.src.encode_batch(list(lines)))
    ]
    results = _translate_chunk(trained, list(lines), src_ids, search, max_tokens, need_weights)
    bar.update(len(lines))
    bar.close()
    return results


def translate_stream(
    trained: Trained,
    lines: Iterable[str | None],
    search: SearchSettings,
    max_tokens: int = 4096,
    progress: bool = False,
    max_source_len: int = 512,
    finish: Callable[[list[Translation]], list[Translation]] | None = None,
) -> Iterator[Translation]:
    """Translate ``lines`` as they come, yielding translations in input order.

    Lines are translated in chunks of about ``CHUNK_BATCHES * max_tokens`` source pieces,
    sorted by length inside a chunk for batching; a ``None`` in ``lines`` (the input
    paused, see ``arriving_lines``) ends a chunk early. Memory holds one chunk, whatever
    the length of the input, and the first translations come after the first chunk.
    ``finish`` (word alignments, say) is given each chunk's translations before they go.
    """

    def translate_chunk(chunk: list[str], src_ids: list[Sequence[Any]]) -> list[Translation]:
        translations = _translate_chunk(trained, chunk, src_ids, search, max_tokens)
        return finish(translations) if finish is not None else translations

    return translated_chunks(
        lines,
        trained.vocab.src.encode,
        translate_chunk,
        max_tokens,
        progress,
        max_source_len,
    )


ChunkTranslator = Callable[[list[str], list[Sequence[Any]]], list[Translation]]


def translated_chunks(
    lines: Iterable[str | None],
    encode: Callable[[str], Sequence[Any]],
    translate_chunk: ChunkTranslator,
    max_tokens: int,
    progress: bool,
    max_source_len: int,
) -> Iterator[Translation]:
    """The streaming shared by every engine: ``lines`` encoded and cut in chunks of about
    ``CHUNK_BATCHES * max_tokens`` source pieces (``encoded_chunks``), each chunk's
    translations from ``translate_chunk(lines, encodings)`` yielded in input order, with a
    progress bar when asked."""
    bar = tqdm(desc="translating", unit="sent", disable=not progress)
    budget = CHUNK_BATCHES * max_tokens
    for chunk, sources in encoded_chunks(lines, encode, budget, max_source_len):
        yield from translate_chunk(chunk, sources)
        bar.update(len(chunk))
    bar.close()


def cut_source(pieces: Sequence[Any], line: int, longest: int) -> Sequence[Any]:
    """A source's first ``longest`` pieces, with a warning naming its ``line`` (1-based) if
    it had more: one very long line would otherwise take minutes to translate."""
    if len(pieces) <= longest:
        return pieces
    log.warning(
        "line %d has %d pieces: translating its first %d (raise --max-source-len)",
        line, len(pieces), longest,
    )  # fmt: skip
    return pieces[:longest]


def encoded_chunks(
    lines: Iterable[str | None],
    encode: Callable[[str], Sequence[Any]],
    budget: int,
    longest: int,
) -> Iterator[tuple[list[str], list[Sequence[Any]]]]:
    """Input lines with their encodings (cut to ``longest`` pieces, see ``cut_source``), in
    input order, in chunks of about ``budget`` source pieces (a line counts its pieces plus
    EOS; a blank line encodes to nothing); a ``None`` in ``lines`` (the input paused) ends a
    chunk early. Yields (a chunk's lines, their encodings)."""
    before, used = 0, 0  # before: lines of earlier chunks
    chunk: list[str] = []
    encoded: list[Sequence[Any]] = []
    for line in itertools.chain(lines, [None]):
        if line is not None:
            pieces = encode(line) if line.strip() else []
            pieces = cut_source(pieces, before + len(chunk) + 1, longest)
            chunk.append(line)
            encoded.append(pieces)
            used += len(pieces) + 1
        if chunk and (line is None or used >= budget):
            yield chunk, encoded
            before, chunk, encoded, used = before + len(chunk), [], [], 0


def _translate_chunk(
    trained: Trained,
    lines: list[str],
    src_ids: Sequence[Sequence[int]],
    search: SearchSettings,
    max_tokens: int,
    need_weights: bool = False,
) -> list[Translation]:
    """The translations of ``lines`` (``src_ids``: their pieces, already cut, see
    ``cut_source``) in their order, batched by length, on the device of the model."""
    vocab = trained.vocab
    device = next(trained.model.parameters()).device
    results: list[Translation | None] = [None] * len(lines)
    nonblank = []
    for i, line in enumerate(lines):
        if line.strip():
            nonblank.append(i)
        else:
            results[i] = Translation(line, [""], [Hypothesis([], 0.0, 0.0)])
    src_ids = [src_ids[i] for i in nonblank]
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=search.bf16)
    with torch.inference_mode(), autocast, onednn_linears(trained.model):
        for batch in source_batches(src_ids, max_tokens, vocab.spec.pad_id, vocab.spec.eos_id):
            src, src_lens = batch.src.to(device), batch.src_lens.to(device)
            nbests = translate_batch(trained.model, src, src_lens, search, need_weights)
            for position, hyps in zip(batch.ids.tolist(), nbests, strict=True):
                line = lines[nonblank[position]]
                texts = [vocab.tgt.decode(h.tokens) for h in hyps]
                results[nonblank[position]] = Translation(line, texts, hyps)
    return results  # type: ignore[return-value]
