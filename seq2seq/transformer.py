"""The Transformer (Vaswani et al., 2017) on the encoder-decoder contract.

Built from the project's own ``MultiHeadAttention`` so that every layer's and head's
cross-attention can be returned: ``forward`` gives attention [B, L, H, T, S] and ``step``
[B, L, H, S]. Decoding step by step keeps a key/value cache per layer, so beam search
is the one in ``inference/search.py``. Shapes: B batch, S source, T target, d model size,
H heads, dh = d / H, L decoder layers.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Literal, cast

import torch
from torch import Tensor, nn

from seq2seq.attention import MultiHeadAttention
from seq2seq.model import SOURCE_SIDE, EncoderDecoder, Memory, State, VocabSpec

NormPlacement = Literal["pre", "post"]
Init = Literal["xavier", "fairseq"]
Activation = Literal["relu", "gelu", "silu"]  # of the feed-forward network
ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU}
KV = tuple[Tensor, Tensor]  # projected keys and values, each [B, H, S, dh]


def sinusoidal_table(length: int, dim: int) -> Tensor:
    """P[i, 2j] = sin(i / 10000^(2j/d)), P[i, 2j+1] = cos(i / 10000^(2j/d)). [length, dim]."""
    positions = torch.arange(length, dtype=torch.float64).unsqueeze(1)  # [N, 1]
    rates = torch.pow(10000.0, -torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # [ceil(d/2)]
    angles = positions * rates  # [N, ceil(d/2)]
    table = torch.zeros(length, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : dim // 2])
    return table.float()


class PositionalEncoding(nn.Module):
    """Scale embeddings by sqrt(d), add the sinusoid of each position, apply dropout.

    The table has no fixed maximum: it is extended when a longer input arrives.
    """

    table: Tensor  # a buffer [N, d], not saved in the state dict

    def __init__(self, dim: int, dropout: float, initial_length: int = 256) -> None:
        super().__init__()
        self.dim = dim
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("table", sinusoidal_table(initial_length, dim), persistent=False)

    def forward(self, embedded: Tensor, offset: int = 0) -> Tensor:
        """embedded [B, T, d] at positions offset..offset+T-1 -> [B, T, d]."""
        end = offset + embedded.size(1)
        if end > self.table.size(0):
            self.table = sinusoidal_table(max(end, 2 * self.table.size(0)), self.dim).to(
                self.table.device
            )
        positions = self.table[offset:end].to(embedded.dtype)
        return self.dropout(embedded * math.sqrt(self.dim) + positions)


class FeedForward(nn.Sequential):
    """Position-wise Linear(d, ff) -> activation (ReLU) [-> dropout] -> Linear(ff, d)."""

    def __init__(
        self, dim: int, ff_size: int, activation_dropout: float, activation: Activation = "relu"
    ) -> None:
        inner = [nn.Dropout(activation_dropout)] if activation_dropout else []
        act = ACTIVATIONS[activation]()
        super().__init__(nn.Linear(dim, ff_size), act, *inner, nn.Linear(ff_size, dim))
        self.activation = activation  # its name, for exporters


@dataclass(frozen=True)
class Dropouts:
    """Residual/embedding dropout (Vaswani et al.'s P_drop), and the optional extras on the
    attention weights and inside the feed-forward network (0 in the paper)."""

    residual: float = 0.1
    attention: float = 0.0
    activation: float = 0.0


class Sublayer(nn.Module):
    """A residual connection around a sublayer, with layer norm before (pre) or after (post)."""

    def __init__(self, dim: int, dropout: float, norm: NormPlacement) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.dropout = nn.Dropout(dropout)
        self.pre = norm == "pre"

    def inputs(self, x: Tensor) -> Tensor:
        return self.norm(x) if self.pre else x

    def output(self, x: Tensor, sublayer_out: Tensor) -> Tensor:
        y = x + self.dropout(sublayer_out)
        return y if self.pre else self.norm(y)


@dataclass(frozen=True)
class LayerSettings:
    """What every layer of both stacks shares: width, heads, feed-forward size and
    activation, dropouts, where the norms sit, and whether attention may take SDPA."""

    dim: int
    heads: int
    ff_size: int
    dropout: Dropouts
    norm: NormPlacement
    sdpa: bool = False
    activation: Activation = "relu"

    def attention(self) -> MultiHeadAttention:
        return MultiHeadAttention(
            self.dim, self.dim, self.heads, dropout=self.dropout.attention, sdpa=self.sdpa
        )

    def feed_forward(self) -> FeedForward:
        return FeedForward(self.dim, self.ff_size, self.dropout.activation, self.activation)

    def sublayer(self) -> Sublayer:
        return Sublayer(self.dim, self.dropout.residual, self.norm)


class EncoderLayer(nn.Module):
    """Self-attention over the valid source positions, then the feed-forward network."""

    def __init__(self, settings: LayerSettings) -> None:
        super().__init__()
        self.self_attn = settings.attention()
        self.feed_forward = settings.feed_forward()
        self.attn_block = settings.sublayer()
        self.ff_block = settings.sublayer()

    def forward(self, x: Tensor, src_lens: Tensor) -> Tensor:
        """x [B, S, d] -> [B, S, d]."""
        h = self.attn_block.inputs(x)
        keys, values = self.self_attn.prepare(h, h)
        attended, _ = self.self_attn(h, keys, values, src_lens, prepared=True, need_weights=False)
        x = self.attn_block.output(x, attended)
        return self.ff_block.output(x, self.feed_forward(self.ff_block.inputs(x)))


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention over the memory, feed-forward network."""

    def __init__(self, settings: LayerSettings) -> None:
        super().__init__()
        self.self_attn = settings.attention()
        self.cross_attn = settings.attention()
        self.feed_forward = settings.feed_forward()
        self.self_block = settings.sublayer()
        self.cross_block = settings.sublayer()
        self.ff_block = settings.sublayer()

    def forward(
        self,
        x: Tensor,
        past: tuple[KV, Tensor] | None,
        self_lens: Tensor | None,
        cross_kv: KV,
        src_lens: Tensor,
        need_weights: bool,
    ) -> tuple[Tensor, Tensor | None, KV]:
        """x [B, T, d] at the positions after ``past``: the earlier keys/values [M, H, t, dh]
        and, for each row of x, the row of them it continues [B] (None: no earlier positions).

        self_lens: [B, T] causal valid lengths, or None when every key is visible.
        cross_kv [G, H, S, dh] and src_lens [G]: the memory, G = B rows, or one row per
        sentence serving B / G consecutive rows of x (a sentence's beams in search).
        Returns (x [B, T, d], cross-attention [B, H, T, S] or None, keys/values so far).
        """
        h = self.self_block.inputs(x)
        keys, values = self.self_attn.prepare(h, h)  # [B, H, T, dh]
        if past is not None:
            (past_keys, past_values), rows = past
            keys, values = appended(past_keys, rows, keys), appended(past_values, rows, values)
        attended, _ = self.self_attn(h, keys, values, self_lens, prepared=True, need_weights=False)
        x = self.self_block.output(x, attended)
        h = self.cross_block.inputs(x)
        attended, weights = self.cross_attn(
            h, *cross_kv, src_lens, prepared=True, need_weights=need_weights
        )  # [B, T, d], [B, H, T, S]
        x = self.cross_block.output(x, attended)
        x = self.ff_block.output(x, self.feed_forward(self.ff_block.inputs(x)))
        return x, weights, (keys, values)


def appended(past: Tensor, rows: Tensor, new: Tensor) -> Tensor:
    """past [M, H, t, dh] at ``rows`` [N], then new [N, H, T, dh]: [N, H, t + T, dh], written
    in one copy (not a selection of ``past`` and then a concatenation)."""
    past = past.to(new.dtype)  # autocast: the first step's empty past is float32
    if torch.is_grad_enabled():  # a write into out= cannot be differentiated
        return torch.cat([past.index_select(0, rows), new], dim=2)
    N, H, T, dh = new.shape
    t = past.size(2)
    out = new.new_empty(N, H, t + T, dh)
    torch.index_select(past, 0, rows, out=out[:, :, :t])
    out[:, :, t:] = new
    return out


@dataclass
class KeyValueCache(State):
    """Every decoder layer's self-attention keys and values so far, selected lazily.

    kv: per layer (keys, values) [M, H, t, dh]; rows [N]: the row of ``kv`` that each of
    the N decoder rows continues. Search reorders the rows at every step: ``select`` only
    picks from ``rows``, and the next step copies the picked rows once, along with its new
    keys and values (``appended``).
    """

    kv: list[KV]
    rows: Tensor

    def select(self, indices: Tensor) -> KeyValueCache:
        return KeyValueCache(self.kv, self.rows.index_select(0, indices))


@dataclass
class TransformerState(State):
    """The decoder's state for N rows; the source side has N rows, or G when a search keeps
    it once per sentence (``model.SOURCE_SIDE``).

    cross: per layer, the source's keys/values [G, H, S, dh]; src_lens: [G];
    cache: the self-attention keys/values so far, t positions per row.
    """

    cross: Annotated[list[KV], SOURCE_SIDE]
    cache: KeyValueCache
    src_lens: Annotated[Tensor, SOURCE_SIDE]
    position: int  # target position of the next step


class Transformer(EncoderDecoder):
    """Encoder and decoder stacks with sinusoidal positions and tied embeddings.

    Args:
        vocab: The vocabulary sizes and special ids (linked from the data, never configured).
        model_size: Size d of the embeddings and of every layer's input and output.
        num_heads: Attention heads per attention sublayer; must divide ``model_size``.
        ff_size: Inner size of each position-wise feed-forward network.
        encoder_layers: Layers in the encoder stack.
        decoder_layers: Layers in the decoder stack.
        dropout: Dropout on the embeddings and on each sublayer's output (P_drop).
        attention_dropout: Dropout on the attention weights (off by default, as in the
            paper).
        activation_dropout: Dropout inside the feed-forward network (off by default, as in
            the paper).
        norm: Where each sublayer's layer norm sits: ``pre`` (before the sublayer; the
            stacks end with one more) or ``post`` (after the residual sum, as in the paper).
        tie_embeddings: Share one matrix between the target embedding and the output
            projection; with a joint vocabulary (``vocab.joint``) the source embedding
            shares it too.
        sdpa: Route attention that needs no weights through PyTorch's fused kernel (see
            MultiHeadAttention).
        init: How weight matrices start: ``xavier`` (Glorot uniform on every linear
            layer) or ``fairseq`` (the same, but the query, key and value projections with
            gain 1/sqrt(2), as fairseq's multi-head attention, which is Glorot uniform over
            the three stacked into one [3d, d] matrix). Embeddings start at N(0, 1/d)
            either way.
        activation: The feed-forward network's activation: ``relu`` (the paper's),
            ``gelu`` or ``silu`` (swish, as Marian's OPUS-MT models).
        output_bias: Give the output projection a bias, even when it is tied to the
            target embedding (Marian's final logits bias).
    """

    def __init__(  # its parameters are model.network's init_args in a config
        self,
        vocab: VocabSpec,
        model_size: int = 256,
        num_heads: int = 4,
        ff_size: int = 1024,
        encoder_layers: int = 3,
        decoder_layers: int = 3,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
        norm: NormPlacement = "pre",
        tie_embeddings: bool = True,
        sdpa: bool = False,
        init: Init = "xavier",
        activation: Activation = "relu",
        output_bias: bool = False,
    ) -> None:
        super().__init__(vocab)
        d = model_size
        self.tgt_embed = nn.Embedding(vocab.tgt_size, d, padding_idx=vocab.pad_id)
        share_source = tie_embeddings and vocab.joint
        self.src_embed = (
            self.tgt_embed
            if share_source
            else nn.Embedding(vocab.src_size, d, padding_idx=vocab.pad_id)
        )
        self.positions = PositionalEncoding(d, dropout)
        dropouts = Dropouts(dropout, attention_dropout, activation_dropout)
        layers = LayerSettings(d, num_heads, ff_size, dropouts, norm, sdpa, activation)
        self.encoder = nn.ModuleList(EncoderLayer(layers) for _ in range(encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(layers) for _ in range(decoder_layers))
        # Pre-norm stacks end with a layer norm; post-norm layers already end with one.
        self.encoder_norm = nn.LayerNorm(d) if norm == "pre" else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d) if norm == "pre" else nn.Identity()
        self.output = nn.Linear(d, vocab.tgt_size, bias=output_bias or not tie_embeddings)
        self._init_weights(d, init)
        if tie_embeddings:
            self.output.weight = self.tgt_embed.weight

    def _init_weights(self, d: int, init: Init) -> None:
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        if init == "fairseq":
            for module in self.modules():
                if isinstance(module, MultiHeadAttention):
                    for projection in (module.q_proj, module.k_proj, module.v_proj):
                        nn.init.xavier_uniform_(projection.weight, gain=2**-0.5)
        for embedding in dict.fromkeys([self.src_embed, self.tgt_embed]):  # in order, once
            nn.init.normal_(embedding.weight, std=d**-0.5)  # unit variance after the sqrt(d)
            nn.init.zeros_(embedding.weight[self.vocab.pad_id])

    def encode(self, src: Tensor, src_lens: Tensor) -> Memory:
        x = self.positions(self.src_embed(src))  # [B, S, d]
        for layer in self.encoder:
            x = layer(x, src_lens)
        return Memory(states=self.encoder_norm(x), lens=src_lens)

    def _cross_kv(self, memory: Memory) -> list[KV]:
        layers = cast("Iterable[DecoderLayer]", self.decoder)  # a ModuleList types them Module
        return [layer.cross_attn.prepare(memory.states, memory.states) for layer in layers]

    def decode(
        self, memory: Memory, tgt_in: Tensor, need_weights: bool = True
    ) -> tuple[Tensor, Tensor | None]:
        B, T = tgt_in.shape
        causal = torch.arange(1, T + 1, device=tgt_in.device).expand(B, T)  # [B, T]
        x = self.positions(self.tgt_embed(tgt_in))
        weights = []
        for layer, cross_kv in zip(self.decoder, self._cross_kv(memory), strict=True):
            x, layer_weights, _ = layer(x, None, causal, cross_kv, memory.lens, need_weights)
            weights.append(layer_weights)
        logits = self.output(self.decoder_norm(x))  # [B, T, V]
        return logits, torch.stack(weights, dim=1) if need_weights else None  # [B, L, H, T, S]

    def start(self, memory: Memory) -> TransformerState:
        attention = cast(DecoderLayer, self.decoder[0]).self_attn
        B, H = memory.states.size(0), attention.num_heads
        empty = memory.states.new_zeros(B, H, 0, attention.head_size)
        rows = torch.arange(B, device=memory.states.device)
        cache = KeyValueCache([(empty, empty) for _ in self.decoder], rows)
        return TransformerState(self._cross_kv(memory), cache, memory.lens, position=0)

    def step(
        self, prev_tokens: Tensor, state: State, need_weights: bool = True
    ) -> tuple[Tensor, TransformerState, Tensor | None]:
        assert isinstance(state, TransformerState)
        x = self.positions(self.tgt_embed(prev_tokens.unsqueeze(1)), offset=state.position)
        rows = state.cache.rows
        kv, weights = [], []
        for layer, cross_kv, past in zip(self.decoder, state.cross, state.cache.kv, strict=True):
            x, layer_weights, layer_kv = layer(
                x, (past, rows), None, cross_kv, state.src_lens, need_weights
            )
            kv.append(layer_kv)
            weights.append(layer_weights)  # [B, H, 1, S] or None
        logprobs = torch.log_softmax(self.output(self.decoder_norm(x)).squeeze(1), dim=-1)
        cache = KeyValueCache(kv, torch.arange(x.size(0), device=x.device))
        next_state = dataclasses.replace(state, cache=cache, position=state.position + 1)
        if not need_weights:
            return logprobs, next_state, None
        return logprobs, next_state, torch.stack(weights, dim=1).squeeze(3)  # [B, L, H, S]
