"""RNN encoder-decoders: a bidirectional packed encoder and attentional decoders.

Decoder styles (the attention is a pluggable part of either, never named in here):
- ``bahdanau``: attend with the previous state s_{t-1}, then step the RNN on
  [embedding; context]; predict from tanh(W_o [s_t; c_t; embedding]).
- ``luong``: step the RNN on [embedding; h~_{t-1}] (input feeding), attend with h_t,
  form h~_t = tanh(W_c [c_t; h_t]) and predict from it.

Shapes: B batch, S source length, T target length, E embedding size, H hidden size,
L decoder layers, C context size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Literal

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seq2seq.attention import AdditiveAttention, Attention
from seq2seq.model import SOURCE_SIDE, EncoderDecoder, Memory, State, VocabSpec

CellType = Literal["gru", "lstm"]
MergeType = Literal["concat", "sum"]
Hidden = Tensor | tuple[Tensor, Tensor]  # GRU: [B, L, H]; LSTM: (h, c), each [B, L, H]

_CELLS: dict[str, type[nn.GRU] | type[nn.LSTM]] = {"gru": nn.GRU, "lstm": nn.LSTM}


def _to_torch(hidden: Hidden) -> Hidden:
    """Batch-first state [B, L, H] -> the layer-first layout [L, B, H] nn.GRU/LSTM take."""
    if isinstance(hidden, tuple):
        return tuple(h.transpose(0, 1).contiguous() for h in hidden)  # type: ignore[return-value]
    return hidden.transpose(0, 1).contiguous()


def _from_torch(hidden: Hidden) -> Hidden:
    if isinstance(hidden, tuple):
        return tuple(h.transpose(0, 1) for h in hidden)  # type: ignore[return-value]
    return hidden.transpose(0, 1)


def _top_layer(hidden: Hidden) -> Tensor:
    """The last layer's hidden state h [B, H] (for an LSTM, not its cell)."""
    h = hidden[0] if isinstance(hidden, tuple) else hidden
    return h[:, -1]


class RNNEncoder(nn.Module):
    """Embedding, dropout and a (bidirectional) GRU/LSTM over packed sequences.

    ``merge`` joins the two directions' states: ``concat`` (size 2H, as Bahdanau et al.)
    or ``sum`` (size H, so parameter-free scores such as dot can compare them with a
    decoder of size H).
    """

    def __init__(  # the RNN encoder's settings, passed on whole by RNNSeq2Seq
        self,
        vocab_size: int,
        pad_id: int,
        embed_size: int,
        hidden_size: int,
        num_layers: int,
        cell: CellType,
        bidirectional: bool,
        dropout: float,
        merge: MergeType = "concat",
    ) -> None:
        super().__init__()
        self.merge = merge
        self.embed = nn.Embedding(vocab_size, embed_size, padding_idx=pad_id)
        self.dropout = nn.Dropout(dropout)
        self.rnn = _CELLS[cell](
            embed_size,
            hidden_size,
            num_layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.output_size = hidden_size * (2 if bidirectional and merge == "concat" else 1)

    def forward(self, src: Tensor, src_lens: Tensor) -> Memory:
        """src [B, S], src_lens [B] -> Memory(states [B, S, Do], lens, final [B, Do])."""
        B, S = src.shape
        embedded = self.dropout(self.embed(src))  # [B, S, E]
        packed = pack_padded_sequence(
            embedded, src_lens.cpu().clamp(min=1), batch_first=True, enforce_sorted=False
        )
        outputs, hidden = self.rnn(packed)
        states, _ = pad_packed_sequence(outputs, batch_first=True, total_length=S)  # [B, S, Do]
        h_n = hidden[0] if isinstance(hidden, tuple) else hidden  # [layers*dirs, B, H]
        directions = 2 if self.rnn.bidirectional else 1
        final = h_n[-directions:].transpose(0, 1)  # the last layer, each way: [B, dirs, H]
        if self.merge == "sum":
            states = states.view(B, S, directions, -1).sum(dim=2)  # [B, S, H]
            final = final.sum(dim=1)  # [B, H]
        return Memory(states=self.dropout(states), lens=src_lens, final=final.reshape(B, -1))


@dataclass
class RNNState(State):
    """Decoder state between steps for B rows; the source side has B rows, or G when a
    search keeps it once per sentence (``model.SOURCE_SIDE``). Every tensor is batch-first."""

    hidden: Hidden  # [B, L, H] (or (h, c))
    keys: Annotated[Tensor, SOURCE_SIDE]  # attention-prepared keys [G, S, *]
    values: Annotated[Tensor, SOURCE_SIDE]  # attention-prepared values [G, S, *]
    src_lens: Annotated[Tensor, SOURCE_SIDE]  # [G]
    # Luong input feeding h~_{t-1} [B, H]; unused ([B, 0]) otherwise
    feed: Tensor  # Luong input feeding h~_{t-1} [B, H]; unused ([B, 0]) otherwise
    position: int  # target position t of the next step


class RNNDecoder(nn.Module):
    """What both decoder styles share: embedding, bridge, RNN stack, attention, output layer.

    A style defines the RNN's input size, the size of the vector ``combine`` turns into
    the pre-output, ``_recur`` (what the next step depends on) and ``_pre_output`` (what it
    does not).
    """

    def __init__(  # the RNN decoder's settings, passed on whole by RNNSeq2Seq
        self,
        vocab_size: int,
        pad_id: int,
        embed_size: int,
        hidden_size: int,
        num_layers: int,
        cell: CellType,
        memory_size: int,
        attention: Callable[[int, int], Attention],
        dropout: float,
        input_feeding: bool,
    ) -> None:
        super().__init__()
        self.embed_size, self.hidden_size, self.num_layers = embed_size, hidden_size, num_layers
        self.cell, self.input_feeding = cell, input_feeding
        self.embed = nn.Embedding(vocab_size, embed_size, padding_idx=pad_id)
        self.dropout = nn.Dropout(dropout)
        self.attention = attention(hidden_size, memory_size)
        self.context_size = self.attention.context_size(memory_size)
        self.bridge = nn.Linear(memory_size, num_layers * hidden_size)
        self.rnn = _CELLS[cell](
            self.rnn_input_size(),
            hidden_size,
            num_layers,
            batch_first=True,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.combine = nn.Linear(self.combine_size(), hidden_size)
        self.output = nn.Linear(hidden_size, vocab_size)

    def rnn_input_size(self) -> int:
        raise NotImplementedError

    def combine_size(self) -> int:
        raise NotImplementedError

    def start(self, memory: Memory) -> RNNState:
        """Bridge the encoder summary to every layer's initial state; prepare the keys once."""
        B = memory.states.size(0)
        h0 = torch.tanh(self.bridge(memory.final)).view(B, self.num_layers, self.hidden_size)
        hidden: Hidden = (h0, torch.zeros_like(h0)) if self.cell == "lstm" else h0
        keys, values = self.attention.prepare(memory.states, memory.states)
        feed = memory.states.new_zeros(B, self.hidden_size if self.input_feeding else 0)
        return RNNState(hidden, keys, values, memory.lens, feed, position=0)

    def _attend(
        self, query: Tensor, state: RNNState, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """query [B, Dq] -> (context [B, C], weights [B, *heads, S] or None)."""
        queries = query.unsqueeze(1)  # [B, 1, Dq]
        position = torch.full(queries.shape[:2], state.position, device=query.device)
        context, weights = self.attention(
            queries, state.keys, state.values, state.src_lens, position, prepared=True
        )  # [B, 1, C], [B, *heads, 1, S]
        return context.squeeze(1), weights.squeeze(-2) if need_weights else None

    def _run_rnn(self, rnn_input: Tensor, hidden: Hidden) -> tuple[Tensor, Hidden]:
        """One RNN step: rnn_input [B, I], hidden [B, L, H] -> (top output [B, H], hidden)."""
        output, new_hidden = self.rnn(rnn_input.unsqueeze(1), _to_torch(hidden))
        return output.squeeze(1), _from_torch(new_hidden)

    def _recur(
        self, embedded: Tensor, state: RNNState, need_weights: bool
    ) -> tuple[Tensor, RNNState, Tensor | None]:
        """The part of a step the next step depends on: embedded [B, E] ->
        (features [B, F] for ``_pre_output``, next state, attention [B, *heads, S] or None)."""
        raise NotImplementedError

    def _pre_output(self, features: Tensor) -> Tensor:
        """features [..., F] -> pre-output [..., H]: the part of a step that nothing feeds
        back, so teacher forcing runs it once over all T steps."""
        raise NotImplementedError

    def forward(
        self, memory: Memory, tgt_in: Tensor, need_weights: bool = True
    ) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing: tgt_in [B, T] -> (logits [B, T, V], attention [B, *heads, T, S]
        or None)."""
        state = self.start(memory)
        embedded = self.dropout(self.embed(tgt_in))  # [B, T, E]
        features: list[Tensor] = []
        weights: list[Tensor] = []  # with need_weights, every step's
        # unbind, not embedded[:, t]: its backward stacks T gradients once instead of
        # filling a zero [B, T, E] tensor per step.
        for step_input in embedded.unbind(dim=1):
            step_features, state, attn = self._recur(step_input, state, need_weights)
            features.append(step_features)
            if attn is not None:
                weights.append(attn)
        # One pre-output and one output projection for all steps instead of T small ones.
        logits = self.output(self._pre_output(torch.stack(features, dim=1)))  # [B, T, V]
        return logits, torch.stack(weights, dim=-2) if need_weights else None

    def step(
        self, prev_tokens: Tensor, state: RNNState, need_weights: bool = True
    ) -> tuple[Tensor, RNNState, Tensor | None]:
        """prev_tokens [B] -> (log-probs [B, V], next state, attention [B, *heads, S] or None)."""
        embedded = self.dropout(self.embed(prev_tokens))
        features, state, attn = self._recur(embedded, state, need_weights)
        return torch.log_softmax(self.output(self._pre_output(features)), dim=-1), state, attn


class BahdanauDecoder(RNNDecoder):
    """Attend with s_{t-1}; step on [y_{t-1}; c_t]; pre-output tanh(W [s_t; c_t; y_{t-1}])."""

    def rnn_input_size(self) -> int:
        return self.embed_size + self.context_size

    def combine_size(self) -> int:
        return self.hidden_size + self.context_size + self.embed_size

    def _recur(
        self, embedded: Tensor, state: RNNState, need_weights: bool
    ) -> tuple[Tensor, RNNState, Tensor | None]:
        context, weights = self._attend(_top_layer(state.hidden), state, need_weights)
        output, hidden = self._run_rnn(torch.cat([embedded, context], dim=-1), state.hidden)
        next_state = dataclasses.replace(state, hidden=hidden, position=state.position + 1)
        return torch.cat([output, context, embedded], dim=-1), next_state, weights

    def _pre_output(self, features: Tensor) -> Tensor:
        return self.dropout(torch.tanh(self.combine(features)))


class LuongDecoder(RNNDecoder):
    """Step on [y_{t-1}; h~_{t-1}] (input feeding), attend with h_t, h~_t = tanh(W_c [c_t; h_t])."""

    def rnn_input_size(self) -> int:
        return self.embed_size + (self.hidden_size if self.input_feeding else 0)

    def combine_size(self) -> int:
        return self.context_size + self.hidden_size

    def _recur(
        self, embedded: Tensor, state: RNNState, need_weights: bool
    ) -> tuple[Tensor, RNNState, Tensor | None]:
        output, hidden = self._run_rnn(torch.cat([embedded, state.feed], dim=-1), state.hidden)
        context, weights = self._attend(output, state, need_weights)
        attentional = torch.tanh(self.combine(torch.cat([context, output], dim=-1)))  # h~_t
        feed = attentional if self.input_feeding else state.feed
        next_state = dataclasses.replace(
            state, hidden=hidden, feed=feed, position=state.position + 1
        )
        return attentional, next_state, weights  # h~_t feeds the next step: computed here

    def _pre_output(self, features: Tensor) -> Tensor:
        return self.dropout(features)


_DECODERS: dict[str, type[RNNDecoder]] = {"bahdanau": BahdanauDecoder, "luong": LuongDecoder}


class RNNSeq2Seq(EncoderDecoder):
    """A (bi)directional RNN encoder and an attentional RNN decoder of either style.

    Args:
        vocab: The vocabulary sizes and special ids (linked from the data, never configured).
        embed_size: Size E of the source and target token embeddings.
        hidden_size: Size H of each RNN layer's state (per direction in the encoder).
        encoder_layers: Stacked RNN layers in the encoder.
        decoder_layers: Stacked RNN layers in the decoder.
        cell: The recurrent cell of both encoder and decoder, ``gru`` or ``lstm``.
        bidirectional: Read the source in both directions (Bahdanau et al.) or left to
            right only.
        encoder_output: How a bidirectional encoder's two directions are joined: ``concat``
            (size 2H, as Bahdanau et al.) or ``sum`` (size H, so that parameter-free scores
            such as dot can compare them with the decoder's state).
        style: The decoder: ``bahdanau`` attends with the previous state, then steps on
            [embedding; context]; ``luong`` steps first, attends with the new state and
            predicts from tanh(W_c [context; state]) (see the module docstring).
        attention: The pluggable part: any ``Attention`` class (``class_path``, and
            ``init_args`` without the sizes), built by the decoder with query size =
            ``hidden_size`` and key size = the encoder's output size.
        input_feeding: Luong style only: feed the previous attentional vector into the next
            step (the Bahdanau style feeds the context itself).
        dropout: Dropout on the embeddings, the encoder's states, between stacked layers
            and on the decoder's pre-output.
    """

    def __init__(  # its parameters are model.network's init_args in a config
        self,
        vocab: VocabSpec,
        embed_size: int = 256,
        hidden_size: int = 256,
        encoder_layers: int = 1,
        decoder_layers: int = 1,
        cell: CellType = "gru",
        bidirectional: bool = True,
        encoder_output: MergeType = "concat",
        style: Literal["bahdanau", "luong"] = "bahdanau",
        attention: Callable[[int, int], Attention] = AdditiveAttention,
        input_feeding: bool = True,
        dropout: float = 0.2,
    ) -> None:
        super().__init__(vocab)
        self.encoder = RNNEncoder(
            vocab.src_size,
            vocab.pad_id,
            embed_size,
            hidden_size,
            encoder_layers,
            cell,
            bidirectional,
            dropout,
            encoder_output,
        )
        self.decoder = _DECODERS[style](
            vocab.tgt_size,
            vocab.pad_id,
            embed_size,
            hidden_size,
            decoder_layers,
            cell,
            self.encoder.output_size,
            attention,
            dropout,
            input_feeding,
        )

    def encode(self, src: Tensor, src_lens: Tensor) -> Memory:
        return self.encoder(src, src_lens)

    def start(self, memory: Memory) -> RNNState:
        return self.decoder.start(memory)

    def step(
        self, prev_tokens: Tensor, state: State, need_weights: bool = True
    ) -> tuple[Tensor, RNNState, Tensor | None]:
        assert isinstance(state, RNNState)
        return self.decoder.step(prev_tokens, state, need_weights)

    def decode(
        self, memory: Memory, tgt_in: Tensor, need_weights: bool = True
    ) -> tuple[Tensor, Tensor | None]:
        return self.decoder(memory, tgt_in, need_weights)
