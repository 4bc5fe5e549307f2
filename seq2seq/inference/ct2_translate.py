"""Translating with a CTranslate2 export (``seq2seq translate --ctranslate2 DIR``) under
seq2seq's own search semantics, so that a float32 export translates as the checkpoint does.

How the search options map onto CTranslate2's ``translate_batch``:

- ``--beam K`` is ``beam_size``. Both beam searches keep the K best candidates that are not
  EOS at every step, end a hypothesis when EOS is among the K best candidates, and end a
  sentence once K hypotheses have ended (CTranslate2: ``patience`` 1, and a length
  penalty that is not 0, which would turn on its early exit). An empty translation is
  allowed (``min_decoding_length`` 0), as in seq2seq.
- ``--length-penalty A`` (GNMT, ((5 + |Y|) / 6) ** A, |Y| counting EOS) is applied here:
  CTranslate2 returns its K best ended hypotheses by log-probability (its own penalty is
  ~0) with EOS (``return_end_token``), and they are ranked by GNMT. The penalty only ranks
  ended hypotheses, in both searches, so it never changes which are found; the best one is
  always among those K (a hypothesis that beats it by log-probability and ended at the last
  step is also longer, so it beats it by GNMT too).
- ``--n-best N`` keeps the N best of those K. With a length penalty above 0 and more than K
  hypotheses ending by the last step, seq2seq ranks them all and CTranslate2 kept the K most
  probable: the list below the best may then differ.
- ``--max-len-ratio R --max-len-offset O``: the same per-sentence limit floor(R * S + O)
  pieces (S counting the source's EOS), as ``max_decoding_length`` (limit + 1 steps) for
  each group of sentences with one limit. At the limit seq2seq forces EOS while CTranslate2
  stops on whatever piece it chose (dropped here): a translation that reaches the limit
  may differ, and its score does.
- ``--max-tokens`` is ``max_batch_size`` in tokens; ``--max-source-len`` cuts sources as
  seq2seq does (at most the export's positions - 1 pieces).
- ``--bf16`` is refused: an export's arithmetic is its ``--quantization``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from seq2seq.common.errors import Seq2SeqError
from seq2seq.inference.export import DESCRIPTION, DESCRIPTION_FORMAT, import_ctranslate2
from seq2seq.inference.search import Hypothesis, SearchSettings, length_penalty, max_output_lengths
from seq2seq.inference.translator import Translation, translated_chunks
from seq2seq.inference.upgrade import export_search
from seq2seq.text.tokenizer import Tokenizer

log = logging.getLogger("seq2seq")
# CTranslate2's own length penalty (scores / |Y| ** this): so small that it ranks by
# log-probability, not 0, which would end a sentence as soon as its best beam ends.
NEAR_ZERO_PENALTY = 1e-6


@dataclass
class Exported:
    """A loaded export: CTranslate2's translator, the SentencePiece models, the settings."""

    translator: Any  # ctranslate2.Translator
    src: Tokenizer
    tgt: Tokenizer
    search: SearchSettings  # the checkpoint's (Trained.search): what the search options change
    positions: int
    tgt_lang: str | None = None  # the checkpoint's target language (exports before it: None)

    def __post_init__(self) -> None:
        pieces = self.tgt.id_to_piece(range(self.tgt.size))
        self._tgt_ids = {piece: i for i, piece in enumerate(pieces)}

    def ids(self, pieces: Sequence[str]) -> list[int]:
        """Target pieces -> their ids."""
        return [self._tgt_ids[piece] for piece in pieces]


def check_export_search(search: SearchSettings) -> None:
    """Refuse the settings an export cannot search with (one line)."""
    if search.bf16:
        raise Seq2SeqError(
            "--bf16 does not apply to --ctranslate2: the export's --quantization sets its "
            "arithmetic"
        )


def load_export(folder: str | Path, threads: int = 0, workers: int = 1) -> Exported:
    """The export in ``folder`` on the CPU, with ``threads`` threads (0: CTranslate2's
    default; with several ``workers``: PyTorch's thread count) shared among ``workers``
    that translate batches side by side (CTranslate2's ``inter_threads``)."""
    if workers > 1:
        threads = max(1, (threads or torch.get_num_threads()) // workers)
    folder = Path(folder)
    description_path = folder / DESCRIPTION
    if not description_path.is_file():
        raise Seq2SeqError(
            f"{folder} is not a CTranslate2 export of seq2seq (no {DESCRIPTION}; "
            f"write one with `seq2seq export --to ctranslate2`)"
        )
    description = json.loads(description_path.read_text())
    if description.get("format") not in (1, DESCRIPTION_FORMAT):
        raise Seq2SeqError(f"{description_path}: unknown format {description.get('format')}")
    ctranslate2 = import_ctranslate2()
    try:
        translator = ctranslate2.Translator(
            str(folder), device="cpu", inter_threads=workers, intra_threads=threads
        )
    except (RuntimeError, ValueError) as error:
        raise Seq2SeqError(f"CTranslate2 cannot load {folder}: {error}") from error
    models = description["sentencepiece"]
    src = Tokenizer((folder / models["source"]).read_bytes())
    tgt = (
        src
        if models["target"] == models["source"]
        else Tokenizer((folder / models["target"]).read_bytes())
    )
    search = export_search(description)
    return Exported(
        translator, src, tgt, search, description["positions"], description.get("tgt_lang")
    )


def _hypotheses(
    exported: Exported, result: Any, search: SearchSettings, with_attention: bool
) -> list[Hypothesis]:
    """seq2seq's n-best from CTranslate2's ended hypotheses (EOS kept, scores / |Y|)."""
    hypotheses = []
    for k, pieces in enumerate(result.hypotheses):
        length = len(pieces)  # EOS included, or the limit was reached
        logprob = result.scores[k] * length**NEAR_ZERO_PENALTY
        tokens = exported.ids(pieces[:-1])  # without EOS, or without the piece past the limit
        attention = torch.tensor(result.attention[k]) if with_attention else None
        score = logprob / length_penalty(len(tokens) + 1, search.length_penalty)
        hypotheses.append(Hypothesis(tokens, score, logprob, attention))
    return sorted(hypotheses, key=lambda h: -h.score)[: search.n_best]


def translate_pieces(
    exported: Exported,
    sources: Sequence[Sequence[str]],
    search: SearchSettings,
    max_tokens: int = 4096,
    need_weights: bool = False,
) -> list[list[Hypothesis]]:
    """The n-best hypotheses of each source (pieces, without EOS), each searched within its
    own length limit.

    CTranslate2 takes one limit per call. All sources are first translated in one call
    under the largest limit: a source whose search ended before its own limit (every
    hypothesis shorter) got what its own limit gives, since a search does not look ahead.
    The others, usually few, are translated again in one call per limit. One call lets
    CTranslate2 sort and batch all the sources by length, instead of a call per limit.

    Attention, with ``need_weights``: [len(tokens) + 1, S] per hypothesis, the last
    decoder layer's mean over heads (the last row is the EOS step; CTranslate2 leaves out
    the column of the EOS it appends to the source, so rows sum to at most 1). Beam search
    then translates one sentence at a time: batched, CTranslate2 4.8 gives every sentence
    but the first of a batch the first step's attention of another sentence.
    """
    check_export_search(search)
    if not sources:
        return []
    src_lens = torch.tensor([len(pieces) + 1 for pieces in sources])  # with EOS, as seq2seq
    longest = max_output_lengths(src_lens, search.max_len_ratio, search.max_len_offset)
    limits: list[int] = longest.clamp(max=exported.positions - 1).tolist()
    everything = range(len(sources))
    results = _translate_within(
        exported, sources, everything, max(limits), search, max_tokens, need_weights
    )
    at_limit: dict[int, list[int]] = {}  # by limit: the sources whose search reached it
    for i, output in enumerate(results):
        if max(map(len, output.hypotheses)) > limits[i]:  # pieces, EOS included
            at_limit.setdefault(limits[i], []).append(i)
    for limit, members in at_limit.items():
        again = _translate_within(
            exported, sources, members, limit, search, max_tokens, need_weights
        )
        for i, output in zip(members, again, strict=True):
            results[i] = output
    return [_hypotheses(exported, output, search, need_weights) for output in results]


def _translate_within(
    exported: Exported,
    sources: Sequence[Sequence[str]],
    members: Sequence[int],
    limit: int,
    search: SearchSettings,
    max_tokens: int,
    need_weights: bool,
) -> list[Any]:
    """CTranslate2's results for ``sources[i]`` for i in ``members``, searched within
    ``limit`` pieces (``limit + 1`` steps, the last one EOS or a piece that is dropped)."""
    one_by_one = need_weights and search.beam > 1
    return exported.translator.translate_batch(
        [list(sources[i]) for i in members],
        max_batch_size=1 if one_by_one else max_tokens,
        batch_type="examples" if one_by_one else "tokens",
        beam_size=search.beam,
        num_hypotheses=search.beam,
        length_penalty=NEAR_ZERO_PENALTY,
        return_end_token=True,
        return_scores=True,
        return_attention=need_weights,  # CTranslate2's name for it
        max_input_length=0,
        min_decoding_length=0,
        max_decoding_length=limit + 1,
    )


def translate_stream_ct2(
    exported: Exported,
    lines: Iterable[str | None],
    search: SearchSettings,
    max_tokens: int = 4096,
    progress: bool = False,
    max_source_len: int = 512,
) -> Iterator[Translation]:
    """``translator.translate_stream`` with a CTranslate2 export: lines translated in chunks
    of about ``CHUNK_BATCHES * max_tokens`` source pieces (a ``None`` ends a chunk early),
    yielded in input order; blank lines give empty translations, and a source longer than
    ``max_source_len`` pieces is cut, with a warning."""
    return translated_chunks(
        lines,
        exported.src.pieces,
        lambda chunk, sources: _translate_chunk(exported, chunk, sources, search, max_tokens),
        max_tokens,
        progress,
        min(max_source_len, exported.positions - 1),
    )


def _translate_chunk(
    exported: Exported,
    lines: list[str],
    sources: Sequence[Sequence[str]],
    search: SearchSettings,
    max_tokens: int,
) -> list[Translation]:
    """The translations of ``lines`` (``sources``: their pieces) in their order."""
    results = [Translation(line, [""], [Hypothesis([], 0.0, 0.0)]) for line in lines]
    nonblank = [i for i, line in enumerate(lines) if line.strip()]
    nbests = translate_pieces(exported, [sources[i] for i in nonblank], search, max_tokens)
    for i, hyps in zip(nonblank, nbests, strict=True):
        results[i] = Translation(lines[i], [exported.tgt.decode(h.tokens) for h in hyps], hyps)
    return results
