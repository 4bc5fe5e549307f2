"""Greedy and batched beam search, written once against the encoder-decoder contract.

Both drop a sentence from the batch as soon as it is finished, so the remaining
sentences run on a smaller state; beam search's first step runs one row per sentence
(all K beams would be the same), not K. Shapes: B sentences, K beam size, V vocabulary,
S source length, A sentences still active.

On a GPU the search waits for the device once per step: the bookkeeping (which sentence
each row is, length limits, finished hypotheses) lives on the host, and a step reads back
only which rows ended (a GPU step's one host synchronization), then, when some did, their
rows, scores and tokens in one read. The rows that go on are sent to the device from
pinned memory, which the host does not wait for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from seq2seq.common.errors import Seq2SeqError
from seq2seq.model import EncoderDecoder, State
from seq2seq.speedups.beam_shared_source import select_sharing_source
from seq2seq.speedups.switch import trick_enabled


@dataclass(frozen=True)
class SearchSettings:
    """How to search, passed whole from the command line, the task and the checkpoint's
    config: beam size (1 = greedy), n-best, GNMT length penalty, the length limit
    floor(max_len_ratio * S_i + max_len_offset), and whether the caller runs the model
    under bfloat16 autocast (faster on CPUs with AVX512-BF16 or AMX, slower elsewhere)."""

    beam: int = 5
    n_best: int = 1
    length_penalty: float = 1.0
    max_len_ratio: float = 1.5
    max_len_offset: int = 10
    bf16: bool = False


DEFAULT_SEARCH = SearchSettings()  # the one home of the search defaults: every other reads it


def check_search(search: SearchSettings) -> None:
    """Settings no model searches with: one line, before any work."""
    if search.beam < 1:
        raise Seq2SeqError(f"beam must be at least 1, got {search.beam}")
    if not 1 <= search.n_best <= search.beam:
        raise Seq2SeqError(f"n_best must be in [1, beam {search.beam}], got {search.n_best}")


@dataclass
class Hypothesis:
    """One translation. ``tokens`` exclude BOS and EOS.

    score: the log-probability divided by the GNMT length penalty (what beams are ranked by);
    attention: [len(tokens) + 1, *heads, S_i] (the last row is the EOS step), or None.
    """

    tokens: list[int]
    score: float
    logprob: float
    attention: Tensor | None = None


def max_output_lengths(src_lens: Tensor, ratio: float, offset: int) -> Tensor:
    """Longest output (tokens before EOS) per sentence: floor(ratio * S_i + offset). [B]."""
    return (src_lens.float() * ratio + offset).floor().long().clamp(min=1)


def length_penalty(length: int, alpha: float) -> float:
    """GNMT length penalty ((5 + |Y|) / 6) ** alpha (Wu et al., 2016); |Y| counts EOS."""
    return ((5.0 + length) / 6.0) ** alpha


class AttentionTrail:
    """The attention of every step, read back per hypothesis only once the search ends.

    Search reorders and drops rows at every step; copying each row's whole history along
    with it costs O(T^2). The trail instead keeps each step's maps [N_t, *heads, S] and,
    for each row, the row of the step before it came from, and follows those links
    backwards once at the end.
    """

    def __init__(self) -> None:
        self.maps: list[Tensor] = []  # step t: [N_t, *heads, S]
        self.parents: list[Tensor | None] = []  # step t: [N_t] rows of step t - 1; None: same
        self.ends: list[tuple[int, int, Hypothesis, int]] = []  # (step, row, hyp, S_i)

    def add(self, maps: Tensor, parents: Tensor | None) -> None:
        """This step's maps [N_t, *heads, S]; ``parents`` [N_t]: the previous step's row of
        each row (None: the rows are the previous step's, in order)."""
        self.maps.append(maps)
        self.parents.append(parents)

    def end(self, row: int, hypothesis: Hypothesis, src_len: int) -> None:
        """``hypothesis`` ended at this step's ``row``: give it its maps in ``fill``."""
        self.ends.append((len(self.maps) - 1, row, hypothesis, src_len))

    def fill(self) -> None:
        """Set ``attention`` [t + 1, *heads, S_i] of every ended hypothesis."""
        if not self.ends:
            return
        ends = sorted(self.ends, key=lambda end: -end[0])  # latest first: a prefix per step
        last = ends[0][0]
        maps = self.maps[0].new_zeros(len(ends), last + 1, *self.maps[0].shape[1:])
        rows = torch.empty(0, dtype=torch.long, device=maps.device)  # of the hyps so far
        added = 0
        for t in range(last, -1, -1):
            new = [row for step, row, _, _ in ends[added:] if step == t]
            if new:
                rows = torch.cat([rows, torch.tensor(new, device=maps.device)])
                added += len(new)
            maps[:added, t] = self.maps[t][rows]
            parents = self.parents[t]
            if parents is not None:
                rows = parents[rows]
        for k, (step, _, hypothesis, src_len) in enumerate(ends):
            hypothesis.attention = maps[k, : step + 1, ..., :src_len].clone()


@torch.no_grad()
def translate_batch(
    model: EncoderDecoder,
    src: Tensor,
    src_lens: Tensor,
    search: SearchSettings,
    need_weights: bool = False,
) -> list[list[Hypothesis]]:
    """The ``search.n_best`` translations of each sentence in src [B, S] (best first)."""
    check_search(search)
    K, n_best, alpha = search.beam, search.n_best, search.length_penalty
    max_lens = max_output_lengths(src_lens, search.max_len_ratio, search.max_len_offset)
    state = model.start(model.encode(src, src_lens))
    select = row_selection(src.device)
    if K == 1:
        hyps = _greedy(model, state, select, src_lens, max_lens, alpha, need_weights)
        return [[h] for h in hyps]
    return _beam(model, state, select, src_lens, max_lens, K, alpha, n_best, need_weights)


Select = Callable[[State, Tensor, int], State]  # (state, rows to keep, its rows) -> state


def row_selection(device: torch.device) -> Select:
    """How a search keeps and reorders the state's rows: with each sentence's source side
    kept once (``speedups.beam_shared_source``), or the contract's plain ``state.select``."""
    if trick_enabled("beam_shared_source", device.type):
        return select_sharing_source
    return lambda state, indices, rows: state.select(indices)


def _to_device(values: list[int] | list[bool], dtype: torch.dtype, device: torch.device) -> Tensor:
    """``values`` [len(values)] on ``device``; a CUDA copy goes from pinned memory, so the host
    queues it and goes on instead of waiting for the device to finish its queue."""
    host = torch.tensor(values, dtype=dtype, device="cpu")  # whatever the default device
    if device.type == "cuda":
        return host.pin_memory().to(device, non_blocking=True)
    return host.to(device)


def _read_ended(
    places: Tensor, totals: Tensor, tokens: Tensor
) -> list[tuple[list[int], float, list[int]]]:
    """(place, total, tokens) of each of E ended hypotheses from places [E, k] (row numbers),
    totals [E] and tokens [E, t], read to the host at once: a device's one wait instead of
    one per tensor. float64 holds row numbers, token ids and float32 scores exactly."""
    k = places.size(1)
    joined = torch.cat([places.double(), totals.double().unsqueeze(1), tokens.double()], dim=1)
    return [
        ([int(x) for x in row[:k]], row[k], [int(x) for x in row[k + 1 :]])
        for row in joined.tolist()
    ]


def _force_eos(logprobs: Tensor, at_limit: list[bool], beams: int, eos_id: int) -> Tensor:
    """Only EOS (at its own log-probability) remains possible in the rows of [N, V] whose
    sentence is ``at_limit`` (one flag per sentence, each with ``beams`` consecutive rows).

    In place: ``logprobs`` is the step's own output. Most steps have no such row and
    touch nothing (a masked copy of [N, V] was a tenth of beam search's time).
    """
    if any(at_limit):
        rows = _to_device(at_limit, torch.bool, logprobs.device).repeat_interleave(beams)
        eos_logprobs = logprobs[rows, eos_id]
        logprobs[rows] = float("-inf")
        logprobs[rows, eos_id] = eos_logprobs
    return logprobs


BLOCK = 64  # vocabulary entries per block in best_continuations


def best_continuations(logprobs: Tensor, scores: Tensor, count: int) -> tuple[Tensor, Tensor]:
    """The ``count`` best continuations of each sentence's beams, best first.

    logprobs [A * beams, V] (row a * beams + b: beam b of sentence a), scores [A, beams].
    Returns the largest sums scores[a, b] + logprobs[a * beams + b, v] over (b, v), [A, count],
    and their ids b * V + v [A, count]: a top-k over the [A, beams * V] sums, without
    writing them or searching them all. Each row is cut into blocks of BLOCK entries; with
    no ties, a block holding one of the ``count`` best sums has a larger maximum than every
    block holding none, so the ``count`` blocks of largest maxima hold them all.
    """
    A, beams = scores.shape
    N, V = logprobs.shape
    full = V // BLOCK
    maxima = logprobs[:, : full * BLOCK].view(N, full, BLOCK).amax(-1)  # [N, full]
    if full * BLOCK < V:  # a shorter last block
        maxima = torch.cat([maxima, logprobs[:, full * BLOCK :].amax(-1, keepdim=True)], dim=1)
    blocks = maxima.size(1)
    block_sums = (maxima + scores.view(-1, 1)).view(A, beams * blocks)
    chosen = block_sums.topk(min(count, beams * blocks), dim=1).indices  # [A, C]
    first_row = torch.arange(A, device=scores.device).unsqueeze(1) * beams  # [A, 1]
    rows = (first_row + chosen // blocks).unsqueeze(2)  # [A, C, 1]
    entries = (chosen % blocks).unsqueeze(2) * BLOCK + torch.arange(BLOCK, device=scores.device)
    inside = entries < V  # [A, C, BLOCK]: False past the end of a shorter last block
    entries = entries.clamp(max=V - 1)
    sums = logprobs[rows, entries] + scores.view(-1)[rows]  # [A, C, BLOCK]
    sums = sums.masked_fill(~inside, float("-inf")).view(A, -1)
    best, where = sums.topk(count, dim=1)  # [A, count]
    beam = (rows.expand_as(entries).reshape(A, -1) - first_row).gather(1, where)
    return best, beam * V + entries.view(A, -1).gather(1, where)


def _greedy(
    model: EncoderDecoder,
    state: State,
    select: Select,
    src_lens: Tensor,
    max_lens: Tensor,
    alpha: float,
    need_weights: bool,
) -> list[Hypothesis]:
    B, eos, device = src_lens.size(0), model.vocab.eos_id, src_lens.device
    limits, lengths = max_lens.tolist(), src_lens.tolist()
    active = list(range(B))  # original index of each row
    prev = torch.full((B,), model.vocab.bos_id, dtype=torch.long, device=device)
    tokens = prev.new_zeros(B, 0)
    logprob = torch.zeros(B, device=device)
    trail = AttentionTrail() if need_weights else None
    parents: Tensor | None = None  # rows of the step before, when they changed
    results: list[Hypothesis | None] = [None] * B
    t = 0
    while active:
        logprobs, state, attn = model.step(prev, state, need_weights=need_weights)
        logprobs = _force_eos(logprobs, [limits[i] <= t for i in active], 1, eos)
        best, prev = logprobs.max(dim=-1)
        logprob = logprob + best
        if trail is not None:
            assert attn is not None  # the step was asked for its weights (need_weights)
            trail.add(attn, parents)
        done = (prev == eos).nonzero().flatten()  # the step's one wait for the device
        ended = []
        if done.numel():
            read = _read_ended(done.unsqueeze(1), logprob[done], tokens[done])
            for (row,), total, row_tokens in read:
                ended.append(row)
                i = active[row]
                hypothesis = Hypothesis(row_tokens, total / length_penalty(t + 1, alpha), total)
                results[i] = hypothesis
                if trail is not None:
                    trail.end(row, hypothesis, lengths[i])
        tokens = torch.cat([tokens, prev.unsqueeze(1)], dim=1)
        parents = None
        if ended:
            gone = set(ended)
            kept = [row for row in range(len(active)) if row not in gone]
            keep = _to_device(kept, torch.long, device)
            active = [active[row] for row in kept]
            prev, tokens, logprob = prev[keep], tokens[keep], logprob[keep]
            state = select(state, keep, logprobs.size(0))
            parents = keep
        t += 1
    if trail is not None:
        trail.fill()
    return results  # type: ignore[return-value]


def _beam(  # the search's state and settings, unpacked once by translate_batch
    model: EncoderDecoder,
    state: State,
    select: Select,
    src_lens: Tensor,
    max_lens: Tensor,
    K: int,
    alpha: float,
    n_best: int,
    need_weights: bool,
) -> list[list[Hypothesis]]:
    B, eos, device = src_lens.size(0), model.vocab.eos_id, src_lens.device
    limits, lengths = max_lens.tolist(), src_lens.tolist()
    # All K beams would start identical: the first step runs one row per sentence, and the
    # choice of its best candidates expands the state to (up to) K rows.
    scores = torch.zeros(B, 1, device=device)  # [A, beams]
    active = list(range(B))  # original index of each sentence
    prev = torch.full((B,), model.vocab.bos_id, dtype=torch.long, device=device)
    tokens = prev.new_zeros(B, 0)
    trail = AttentionTrail() if need_weights else None
    parents: Tensor | None = None  # rows of the step before
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    t = 0
    while active:
        A, beams = scores.shape  # beams: 1 on the first step, then K (fewer: a tiny vocabulary)
        logprobs, state, attn = model.step(prev, state, need_weights=need_weights)  # [A*beams, V]
        at_limit = [limits[i] <= t for i in active]  # [A]
        logprobs = _force_eos(logprobs, at_limit, beams, eos)
        V = logprobs.size(-1)
        C = min(2 * K, beams * V)  # candidates: 2K, unless the beams have fewer continuations
        cand_scores, cand_ids = best_continuations(logprobs, scores, C)  # [A, C]
        beam, token = cand_ids // V, cand_ids % V
        rows = beam + torch.arange(A, device=device).unsqueeze(1) * beams  # [A, C] of state
        if trail is not None:
            assert attn is not None  # the step was asked for its weights (need_weights)
            trail.add(attn, parents)

        # Finish EOS candidates ranked within the top K (at most one per beam).
        is_eos = token == eos
        finishing = is_eos & (torch.arange(C, device=device) < K) & cand_scores.isfinite()
        penalty = length_penalty(t + 1, alpha)
        ends = finishing.nonzero()  # [E, 2]: (a, c); the step's one wait for the device
        if ends.numel():
            a_of, c_of = ends.unbind(1)
            end_rows = rows[a_of, c_of]  # [E]
            # per hypothesis: (its sentence's row a, its row), its score, its tokens
            places = torch.stack([a_of, end_rows], dim=1)  # [E, 2]
            ended = _read_ended(places, cand_scores[a_of, c_of], tokens[end_rows])
            for (a, row), total, row_tokens in ended:
                hypothesis = Hypothesis(row_tokens, score=total / penalty, logprob=total)
                finished[active[a]].append(hypothesis)
                if trail is not None:
                    trail.end(row, hypothesis, lengths[active[a]])
        # Sentences with K finished hypotheses or at their length limit leave the batch.
        kept = [a for a in range(A) if len(finished[active[a]]) < K and not at_limit[a]]
        keep = _to_device(kept, torch.long, device)  # [A']
        # The others continue with their K best candidates that are not EOS (each beam gives
        # at most one EOS, so C - beams are not): one selection of the state's rows per
        # step, for reordering and dropping alike.
        width = min(K, C - beams)
        order = (torch.arange(C, device=device) + is_eos[keep] * C).argsort(dim=1)[:, :width]
        active, scores = [active[a] for a in kept], cand_scores[keep].gather(1, order)
        chosen_rows = rows[keep].gather(1, order).flatten()  # [A'*width]
        prev = token[keep].gather(1, order).flatten()
        tokens = torch.cat([tokens[chosen_rows], prev.unsqueeze(1)], dim=1)
        state = select(state, chosen_rows, A * beams)
        parents = chosen_rows
        t += 1
    if trail is not None:
        trail.fill()
    return [sorted(hyps, key=lambda h: -h.score)[:n_best] for hyps in finished]
