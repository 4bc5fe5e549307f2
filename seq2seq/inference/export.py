"""Export a trained Transformer to CTranslate2: its weights on CTranslate2's Transformer
specification, with the SentencePiece model(s) and a small description beside them.

What the export keeps exactly as trained:

- the norm placement (``pre``: a layer norm before each sublayer and one at the end of each
  stack; ``post``: after each residual sum);
- the positions: our own sinusoidal table (``sinusoidal_table``) is written as the
  position encodings, added after the embeddings are scaled by sqrt(d), as ours are
  (CTranslate2's built-in table lays sines and cosines out differently);
- one matrix where training tied them (with a joint vocabulary: source embedding = target
  embedding = output projection), stored once;
- the vocabulary: piece ``i`` of the SentencePiece model is token ``i`` (pad 0, unk 1,
  bos 2, eos 3), every source gets EOS appended and the decoder starts from BOS.

Attention: CTranslate2 returns one map per target token; the export asks for the last
decoder layer's cross-attention, averaged over its heads (``seq2seq attention --layer -1``
draws the same map).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

import numpy as np
from torch import Tensor, nn

from seq2seq.common.errors import OutputError, Seq2SeqError
from seq2seq.inference.checkpoint import Trained
from seq2seq.text.marian_vocabulary import MarianVocabulary
from seq2seq.text.tokenizer import BOS_ID, EOS_ID, UNK_ID
from seq2seq.transformer import DecoderLayer, EncoderLayer, Transformer, sinusoidal_table

if TYPE_CHECKING:
    from ctranslate2.specs import TransformerSpec

POSITIONS = 1024  # rows of the exported position table: the longest source or output + 1
DESCRIPTION = "seq2seq.json"  # what `translate --ctranslate2` reads besides CTranslate2's files
DESCRIPTION_FORMAT = 2  # 2: the checkpoint's whole search (1: its length penalty only)
Quantization = Literal["float32", "int8", "int8_float32", "bfloat16"]  # `export --quantization`
JOINT_MODEL, SOURCE_MODEL, TARGET_MODEL = "sentencepiece.model", "source.model", "target.model"


def import_ctranslate2() -> Any:
    """The ctranslate2 module, or one line saying how to install it."""
    try:
        import ctranslate2
    except ImportError as error:
        raise Seq2SeqError(
            "CTranslate2 is not installed: pip install 'seq2seq[export]' (or ctranslate2>=4)"
        ) from error
    return ctranslate2


def _array(tensor: Tensor) -> np.ndarray:
    return tensor.detach().float().cpu().numpy()


def _set_linear(spec: Any, *linears: nn.Linear) -> None:
    """One CTranslate2 linear layer from ``linears`` fused along their outputs (q, k, v)."""
    spec.weight = np.concatenate([_array(linear.weight) for linear in linears])
    if linears[0].bias is not None:
        spec.bias = np.concatenate([_array(linear.bias) for linear in linears])


def _set_norm(spec: Any, norm: nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def _set_feed_forward(spec: Any, layer: EncoderLayer | DecoderLayer) -> None:
    _set_norm(spec.layer_norm, layer.ff_block.norm)
    _set_linear(spec.linear_0, cast(nn.Linear, layer.feed_forward[0]))
    _set_linear(spec.linear_1, cast(nn.Linear, layer.feed_forward[-1]))


def _set_encoder_layer(spec: Any, layer: EncoderLayer) -> None:
    attention = layer.self_attn
    _set_norm(spec.self_attention.layer_norm, layer.attn_block.norm)
    _set_linear(spec.self_attention.linear[0], attention.q_proj, attention.k_proj, attention.v_proj)
    _set_linear(spec.self_attention.linear[1], attention.out_proj)
    _set_feed_forward(spec.ffn, layer)


def _set_decoder_layer(spec: Any, layer: DecoderLayer) -> None:
    own, cross = layer.self_attn, layer.cross_attn
    _set_norm(spec.self_attention.layer_norm, layer.self_block.norm)
    _set_linear(spec.self_attention.linear[0], own.q_proj, own.k_proj, own.v_proj)
    _set_linear(spec.self_attention.linear[1], own.out_proj)
    _set_norm(spec.attention.layer_norm, layer.cross_block.norm)
    _set_linear(spec.attention.linear[0], cross.q_proj)
    _set_linear(spec.attention.linear[1], cross.k_proj, cross.v_proj)
    _set_linear(spec.attention.linear[2], cross.out_proj)
    _set_feed_forward(spec.ffn, layer)


def transformer_spec(model: Transformer) -> TransformerSpec:
    """CTranslate2's description of ``model``, weights included (vocabularies not yet)."""
    from ctranslate2.specs import TransformerDecoderSpec, TransformerEncoderSpec, TransformerSpec
    from ctranslate2.specs.common_spec import Activation

    pre_norm = isinstance(model.encoder_norm, nn.LayerNorm)
    first = cast(DecoderLayer, model.decoder[0])
    heads = first.self_attn.num_heads
    kinds = {"relu": Activation.RELU, "gelu": Activation.GELU, "silu": Activation.SWISH}
    activation = kinds[first.feed_forward.activation]
    encoder = TransformerEncoderSpec(len(model.encoder), heads, pre_norm, activation=activation)
    decoder = TransformerDecoderSpec(
        len(model.decoder), heads, pre_norm=pre_norm, activation=activation, alignment_layer=-1,
        alignment_heads=0,
    )  # alignment_heads 0: the mean over every head of the alignment layer  # fmt: skip
    d = model.tgt_embed.embedding_dim
    positions = sinusoidal_table(POSITIONS, d).numpy()
    embeddings = {id(model.tgt_embed.weight): _array(model.tgt_embed.weight)}  # tied: one array
    for stack, embedding in ((encoder, model.src_embed), (decoder, model.tgt_embed)):
        weights = embeddings.setdefault(id(embedding.weight), _array(embedding.weight))
        (
            stack.embeddings[0] if isinstance(stack.embeddings, list) else stack.embeddings
        ).weight = weights
        stack.scale_embeddings = math.sqrt(d)  # as PositionalEncoding scales them
        stack.position_encodings.encodings = positions
    for layer_spec, layer in zip(encoder.layer, model.encoder, strict=True):
        _set_encoder_layer(layer_spec, cast(EncoderLayer, layer))  # a ModuleList's: a Module
    for layer_spec, layer in zip(decoder.layer, model.decoder, strict=True):
        _set_decoder_layer(layer_spec, cast(DecoderLayer, layer))
    if isinstance(model.encoder_norm, nn.LayerNorm):  # pre-norm: both stacks end with one
        _set_norm(encoder.layer_norm, model.encoder_norm)
    if isinstance(model.decoder_norm, nn.LayerNorm):
        _set_norm(decoder.layer_norm, model.decoder_norm)
    decoder.projection.weight = embeddings.get(id(model.output.weight), _array(model.output.weight))
    if model.output.bias is not None:
        decoder.projection.bias = _array(model.output.bias)
    return TransformerSpec(encoder, decoder)


def _pieces(tokenizer: Any) -> list[str]:
    return tokenizer.id_to_piece(range(tokenizer.size))


def export_ctranslate2(trained: Trained, out: str | Path, quantization: str = "float32") -> Path:
    """Write ``trained`` as a CTranslate2 model into the folder ``out`` (created if needed):
    CTranslate2's model.bin, config.json and vocabulary, the SentencePiece model(s), and
    ``seq2seq.json`` (which SentencePiece file is which, the checkpoint's search settings).

    The files are written into a new folder beside ``out`` and moved in once all exist.
    """
    _check_ctranslate2_export(trained, quantization)
    import_ctranslate2()
    spec = _ctranslate2_spec(trained, quantization)
    vocab = trained.vocab
    models = {"source": JOINT_MODEL, "target": JOINT_MODEL}
    if not vocab.joint:
        models = {"source": SOURCE_MODEL, "target": TARGET_MODEL}
    description = {
        "format": DESCRIPTION_FORMAT,
        "sentencepiece": models,
        "src_lang": trained.src_lang,
        "tgt_lang": trained.tgt_lang,
        "search": dataclasses.asdict(trained.search),
        "positions": POSITIONS,
        "quantization": quantization,
        "attention": "cross-attention of the last decoder layer, mean over its heads",
    }
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out} is a file; give a folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        spec.save(str(staging))
        (staging / models["source"]).write_bytes(vocab.src.to_bytes())
        (staging / models["target"]).write_bytes(vocab.tgt.to_bytes())
        (staging / DESCRIPTION).write_text(json.dumps(description, indent=2) + "\n")
        out.mkdir(exist_ok=True)
        for path in staging.iterdir():
            os.replace(path, out / path.name)
    except OSError as error:
        raise OutputError(f"cannot write the export into {out}: {error}") from error
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def _check_ctranslate2_export(trained: Trained, quantization: str) -> None:
    """Refuse, in one line, what CTranslate2 cannot take: an RNN, a MarianMT tokenizer's
    model (transformers' converter takes it), an unknown quantization."""
    if not isinstance(trained.model, Transformer):
        raise Seq2SeqError(
            f"only Transformer checkpoints export to CTranslate2 (this one is a "
            f"{type(trained.model).__name__}; CTranslate2 has no RNN decoders)"
        )
    if isinstance(trained.vocab, MarianVocabulary):
        raise Seq2SeqError(
            "a model with a MarianMT tokenizer exports to transformers (--to huggingface); "
            "CTranslate2 converts that folder with its ct2-transformers-converter"
        )
    if quantization not in get_args(Quantization):
        raise Seq2SeqError(f"--quantization must be one of {', '.join(get_args(Quantization))}")


def _ctranslate2_spec(trained: Trained, quantization: str) -> TransformerSpec:
    """CTranslate2's model specification of ``trained``'s Transformer, with its vocabularies
    and special tokens, validated and quantized."""
    vocab, model = trained.vocab, cast(Transformer, trained.model)  # checked: a Transformer
    spec = transformer_spec(model)
    spec.register_source_vocabulary(_pieces(vocab.src))
    spec.register_target_vocabulary(_pieces(vocab.tgt))
    config = spec.config
    config.unk_token, config.bos_token, config.eos_token = vocab.tgt.id_to_piece(
        [UNK_ID, BOS_ID, EOS_ID]
    )
    config.decoder_start_token = config.bos_token
    config.add_source_eos = True
    config.layer_norm_epsilon = cast(EncoderLayer, model.encoder[0]).attn_block.norm.eps
    spec.validate()
    spec.optimize(quantization=quantization)
    return spec
