"""Collecting a model's attention over a corpus, one sentence pair at a time.

Every map comes from teacher forcing, ``model(src, src_lens, tgt_in, need_weights=True)``
on a target: the reference (forced decoding: the alignment of a given translation) or the
model's own translation from greedy or beam search. For its own translation, teacher
forcing gives the same attention as the search's steps did (the encoder-decoder contract:
teacher-forced and step-by-step decoding agree), in one batched pass, and lets a probe
read local attention's window centers, which search does not expose.

Luong's local attention (``seq2seq.attention.LuongLocalAttention``) looks at a window around a
center ``p_t``: the target position for local-m, a prediction from the decoder state for
local-p. The attention contract returns the weights only, and an attention module must
not keep state between calls, so ``p_t`` is not part of any output. ``LocalWindowProbe``
gets it from outside: while the probe is active, a forward hook on the ``LuongLocalAttention``
module (decoders call their attention as a module, so the hook sees every call) asks the
module's own public ``centers`` and ``window_positions`` for the center and window of the
queries it was called with. Leaving the probe removes the hook; the outputs are
untouched, and a model that nobody inspects pays nothing.

Shapes: S_i source pieces + EOS, T_i target pieces + EOS; B sentences, T target
positions, Tq queries per attention call.
"""

from __future__ import annotations

import inspect
from collections.abc import Generator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle
from tqdm.auto import tqdm

from seq2seq.attention.luong import LuongLocalAttention
from seq2seq.common.errors import DataError
from seq2seq.inference.batching import TokenBucketBatchSampler, collate
from seq2seq.inference.checkpoint import Trained
from seq2seq.inference.search import SearchSettings
from seq2seq.inference.translator import Translation, translate_lines
from seq2seq.inspection.maps import step_map
from seq2seq.text.words import merge_to_words, word_spans, words

EOS_LABEL = "</s>"


@dataclass
class SentenceAttention:
    """One sentence pair's attention, ready to draw, align and measure.

    weights: [T_i, *heads, S_i] float32 (rows: ``tgt_pieces``, columns: ``src_pieces``,
    both ending with EOS); centers: [T_i] local attention's window centers p_t and
    windows: [T_i, 2] the first and last source position inside each window (both None
    for other attention).
    """

    index: int
    source: str
    target: str
    src_pieces: list[str]
    tgt_pieces: list[str]
    weights: Tensor
    centers: Tensor | None = None
    windows: Tensor | None = None


def head_axes(trained: Trained) -> tuple[int, ...]:
    """The head axes of the model's attention maps: ``()`` for single-head attention, ``(H,)``
    for multi-head RNN attention, ``(L, H)`` for the Transformer. From one forward pass over
    a one-token sentence, so that a bad choice of layer fails before any real work."""
    spec = trained.vocab.spec
    with torch.inference_mode():
        _, attn = trained.model(
            torch.tensor([[spec.eos_id]]),
            torch.tensor([1]),
            torch.tensor([[spec.bos_id]]),
            need_weights=True,
        )
    return tuple(attn.shape[1:-2])  # attn: [1, *heads, 1, 1]


def find_local_attention(model: nn.Module) -> LuongLocalAttention | None:
    """The model's local attention module, or None; more than one is an error."""
    found = [m for m in model.modules() if isinstance(m, LuongLocalAttention)]
    if len(found) > 1:
        raise ValueError(f"the model has {len(found)} local attention modules; expected one")
    return found[0] if found else None


class LocalWindowProbe:
    """Records the window centers and bounds of one ``LuongLocalAttention`` over a forward pass.

    Use around a single teacher-forced call, whose decoder calls the attention once per
    target position (or once for all of them) on the same batch::

        with LocalWindowProbe(attention) as probe:
            model(src, src_lens, tgt_in)
        centers, windows = probe.result()  # [B, T], [B, T, 2]
    """

    def __init__(self, attention: LuongLocalAttention) -> None:
        self.attention = attention
        self._centers: list[Tensor] = []
        self._windows: list[Tensor] = []
        self._hook: RemovableHandle | None = None

    def _record(
        self,
        module: LuongLocalAttention,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        output: tuple[Tensor, Tensor],
    ) -> None:
        """A forward hook: the centers [B, Tq] and windows [B, Tq, 2] of the call's queries."""
        call = inspect.signature(module.forward).bind(*args, **kwargs)
        call.apply_defaults()
        queries, keys = call.arguments["queries"], call.arguments["keys"]
        valid_lens, query_pos = call.arguments["valid_lens"], call.arguments["query_pos"]
        B, S = queries.size(0), keys.size(1)
        lengths = valid_lens if valid_lens is not None else torch.full((B,), S, device=keys.device)
        with torch.no_grad():
            centers = module.centers(queries, lengths, query_pos)
            positions, inside = module.window_positions(centers, lengths)
        first = positions.masked_fill(~inside, S).min(dim=-1).values
        last = positions.masked_fill(~inside, -1).max(dim=-1).values
        self._centers.append(centers.float().cpu())
        self._windows.append(torch.stack([first, last], dim=-1).cpu())

    def __enter__(self) -> LocalWindowProbe:
        self._centers.clear()
        self._windows.clear()
        self._hook = self.attention.register_forward_hook(self._record, with_kwargs=True)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def result(self) -> tuple[Tensor, Tensor]:
        """(centers p_t [B, T] float, windows [B, T, 2] the first and last position inside)."""
        if not self._centers:
            raise RuntimeError("the local attention was not called while the probe was active")
        return torch.cat(self._centers, dim=1), torch.cat(self._windows, dim=1)


def forced_attention(
    trained: Trained,
    src_ids: Sequence[Sequence[int]],
    tgt_ids: Sequence[Sequence[int]],
    texts: Sequence[tuple[str, str]],
    max_tokens: int = 4096,
    progress: bool = False,
) -> Generator[SentenceAttention, None, None]:
    """Teacher-force every target (ids without BOS/EOS) on its source (ids without EOS).

    Yields one SentenceAttention per pair, in length-bucketed batch order (``index`` is
    the position in the inputs); ``texts`` are the (source, target) strings to show.
    """
    model, vocab, spec = trained.model, trained.vocab, trained.vocab.spec
    local = find_local_attention(model)
    lengths = [max(len(s), len(t)) + 1 for s, t in zip(src_ids, tgt_ids, strict=True)]
    sampler = TokenBucketBatchSampler(lengths, max_tokens, num_replicas=1, rank=0)
    bar = tqdm(total=len(lengths), desc="attention", unit="sent", disable=not progress)
    with torch.inference_mode():
        for indices in sampler:
            rows = [{"id": i, "src_ids": src_ids[i], "tgt_ids": tgt_ids[i]} for i in indices]
            batch = collate(rows, spec.pad_id, spec.bos_id, spec.eos_id)
            probe = LocalWindowProbe(local) if local is not None else None
            with probe or nullcontext():
                _, attn = model(batch.src, batch.src_lens, batch.tgt_in, need_weights=True)
            centers, windows = probe.result() if probe is not None else (None, None)
            for row, i in enumerate(indices):
                S, T = int(batch.src_lens[row]), int(batch.tgt_lens[row])
                yield SentenceAttention(
                    index=i,
                    source=texts[i][0],
                    target=texts[i][1],
                    src_pieces=[*vocab.src.id_to_piece(src_ids[i]), EOS_LABEL],
                    tgt_pieces=[*vocab.tgt.id_to_piece(tgt_ids[i]), EOS_LABEL],
                    # [T, *heads, S], copied out so that no view keeps the batch alive
                    weights=attn[row, ..., :T, :S].movedim(-2, 0).float().cpu().clone(),
                    centers=centers[row, :T] if centers is not None else None,
                    windows=windows[row, :T] if windows is not None else None,
                )
            bar.update(len(indices))
    bar.close()


def reference_attention(
    trained: Trained,
    sources: Sequence[str],
    references: Sequence[str],
    max_tokens: int = 4096,
    progress: bool = False,
) -> Generator[SentenceAttention, None, None]:
    """Forced decoding: the attention of each reference given its source."""
    if len(sources) != len(references):
        raise DataError(f"{len(sources)} source lines but {len(references)} reference lines")
    src_ids = trained.vocab.src.encode_batch(sources)
    tgt_ids = trained.vocab.tgt.encode_batch(references)
    texts = list(zip(sources, references, strict=True))
    return forced_attention(trained, src_ids, tgt_ids, texts, max_tokens, progress)


def translation_attention(
    trained: Trained,
    sources: Sequence[str],
    search: SearchSettings,
    max_tokens: int = 4096,
    progress: bool = False,
    max_source_len: int = 512,
) -> Generator[SentenceAttention, None, None]:
    """The attention of the model's own (best) translation of each source; a source longer
    than ``max_source_len`` pieces is cut, as ``translate_lines`` cuts it."""
    translations = translate_lines(
        trained, sources, search, max_tokens, progress=progress, max_source_len=max_source_len
    )
    best = [(i, 0) for i in range(len(translations))]
    return _forced_hypotheses(trained, translations, best, max_tokens, max_source_len, progress)


def _forced_hypotheses(
    trained: Trained,
    translations: Sequence[Translation],
    wanted: Sequence[tuple[int, int]],
    max_tokens: int,
    max_source_len: int,
    progress: bool = False,
) -> Generator[SentenceAttention, None, None]:
    """Each (sentence, hypothesis) of ``wanted`` teacher-forced on its source, cut to
    ``max_source_len`` pieces as the translator cut it; ``index``: its position in
    ``wanted``."""
    sources = trained.vocab.src.encode_batch([translations[i].source for i, _ in wanted])
    src_ids = [ids[:max_source_len] for ids in sources]
    tgt_ids = [translations[i].hypotheses[k].tokens for i, k in wanted]
    texts = [(translations[i].source, translations[i].texts[k]) for i, k in wanted]
    return forced_attention(trained, src_ids, tgt_ids, texts, max_tokens, progress)


def word_attention(
    sentence: SentenceAttention,
    layer: int | None,
    head: int | None = None,
    shift: bool = False,
) -> tuple[Tensor, Tensor, list[str]]:
    """(piece rows [T_i - 1, S_i] normalized, one per target piece: ``maps.step_map`` of
    ``layer``, ``head`` and ``shift``; word map [Tw, Sw] without either EOS; the source
    words)."""
    rows = step_map(sentence.weights, layer, head, shift)
    src, tgt = sentence.src_pieces[:-1], sentence.tgt_pieces[:-1]
    word_map = merge_to_words(rows[:, :-1], word_spans(tgt), word_spans(src))
    return rows, word_map, words(src)


def hypotheses_attention(
    trained: Trained,
    translations: Sequence[Translation],
    wanted: Sequence[tuple[int, int]] | None = None,
    max_tokens: int = 4096,
    max_source_len: int = 512,
) -> dict[tuple[int, int], SentenceAttention]:
    """The attention of hypotheses of ``translations`` (teacher-forced on their sources, cut
    to ``max_source_len`` pieces as the translator cut them), by (sentence, hypothesis):
    those ``wanted``, else every hypothesis. A blank source has none."""
    if wanted is None:
        wanted = [(i, k) for i, t in enumerate(translations) for k in range(len(t.hypotheses))]
    wanted = [(i, k) for i, k in wanted if translations[i].source.strip()]
    if not wanted:
        return {}
    stream = _forced_hypotheses(trained, translations, wanted, max_tokens, max_source_len)
    return {wanted[sentence.index]: sentence for sentence in stream}
