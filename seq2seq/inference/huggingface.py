"""Hugging Face ``transformers``' MarianMT models as seq2seq Transformers, and back.

A MarianMT model (the OPUS-MT models among them) is a post-norm Transformer with sinusoidal
positions and embeddings scaled by sqrt(d): seq2seq's ``Transformer`` with ``norm: post``
computes the same, once its weights are mapped. The one difference of layout is the
position table: Marian puts the sines in the first half of each vector and the cosines in
the second, seq2seq interleaves them. Reordering every vector of the model's width by the
same permutation (embeddings, the projections into and out of that width, the layer norms)
turns one layout into the other exactly: attention heads, logits and every translation
stay the same. ``load_huggingface`` opens a MarianMT model that way (its tokenizer is the
model's own, through ``transformers``), so that seq2seq's search, attention tools and server
run on it; ``export_huggingface`` writes a post-norm seq2seq Transformer as a MarianMT
model that ``transformers`` loads with no seq2seq installed.

``transformers`` is an optional extra (``pip install 'seq2seq[hf]'``), imported here alone.
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch
from torch import Tensor, nn

from seq2seq.common.errors import Seq2SeqError, UsageError
from seq2seq.inference.checkpoint import Trained
from seq2seq.inference.search import SearchSettings
from seq2seq.text.marian_vocabulary import MarianVocabulary
from seq2seq.text.spec import VocabSpec
from seq2seq.transformer import DecoderLayer, EncoderLayer, Transformer

HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")  # owner/name, as the Hub names a model
TO_MARIAN = {"relu": "relu", "gelu": "gelu", "silu": "swish"}  # our activations -> Marian's
ACTIVATIONS = {marian: ours for ours, marian in TO_MARIAN.items()} | {"silu": "silu"}  # back
TOKENIZER_FILES = ("source.spm", "target.spm", "vocab.json")
OTHER_FAMILIES = {
    "fsmt": "its positions start after the pad id, as fairseq's do",
    "mbart": "its positions are learned, not sinusoidal",
    "m2m_100": "its positions start after the pad id, as fairseq's do",
    "t5": "its positions are relative biases, not sinusoidal",
}


def import_transformers() -> Any:
    """The ``transformers`` module, or one line saying how to install it."""
    try:
        import transformers
    except ImportError:
        raise Seq2SeqError(
            "a Hugging Face model needs transformers: pip install 'seq2seq[hf]'"
        ) from None
    return transformers


def is_huggingface_model(path: str | Path) -> bool:
    """A folder ``save_pretrained`` wrote (its ``config.json`` inside)."""
    return Path(path).is_dir() and (Path(path) / "config.json").is_file()


def looks_like_hub_id(text: str | Path) -> bool:
    """``owner/name`` naming no file here: a model of the Hugging Face Hub."""
    return bool(HUB_ID.match(str(text))) and not Path(text).exists()


def interleaving(d: int) -> Tensor:
    """The permutation ``p`` of a model width ``d`` such that a vector in Marian's layout
    (sines, then cosines) read at ``p`` is in seq2seq's (sine and cosine interleaved)."""
    half = torch.arange(d // 2)
    return torch.stack([half, half + d // 2], dim=1).flatten()


# -- the layout of the weights ----------------------------------------------------------------
@dataclass(frozen=True)
class Renamed:
    """Where a weight of ours is in a MarianMT state dict, and which of its axes has the
    model's width (0: the rows, 1: the columns; () for none)."""

    marian: str
    width_axes: tuple[int, ...]


def _attention(ours: str, marian: str) -> dict[str, Renamed]:
    names = {f"{ours}.{p}_proj": f"{marian}.{p}_proj" for p in ("q", "k", "v")}
    mapped = {f"{o}.weight": Renamed(f"{m}.weight", (1,)) for o, m in names.items()}
    mapped |= {f"{o}.bias": Renamed(f"{m}.bias", ()) for o, m in names.items()}
    mapped[f"{ours}.out_proj.weight"] = Renamed(f"{marian}.out_proj.weight", (0,))
    mapped[f"{ours}.out_proj.bias"] = Renamed(f"{marian}.out_proj.bias", (0,))
    return mapped


def _norm(ours: str, marian: str) -> dict[str, Renamed]:
    return {f"{ours}.{p}": Renamed(f"{marian}.{p}", (0,)) for p in ("weight", "bias")}


def _feed_forward(ours: str, marian: str, last: int) -> dict[str, Renamed]:
    """``last``: the index of the second linear layer in our FeedForward (2, or 3 when a
    dropout sits between)."""
    return {
        f"{ours}.0.weight": Renamed(f"{marian}.fc1.weight", (1,)),
        f"{ours}.0.bias": Renamed(f"{marian}.fc1.bias", ()),
        f"{ours}.{last}.weight": Renamed(f"{marian}.fc2.weight", (0,)),
        f"{ours}.{last}.bias": Renamed(f"{marian}.fc2.bias", (0,)),
    }


def first_layer(model: Transformer) -> EncoderLayer | DecoderLayer:
    """A layer of ``model`` (the sizes and activation are every layer's)."""
    return cast(EncoderLayer | DecoderLayer, (model.encoder or model.decoder)[0])


def weight_names(model: Transformer, joint: bool) -> dict[str, Renamed]:
    """Every weight of ``model`` by its name, with its MarianMT name and width axes."""
    last = len(first_layer(model).feed_forward) - 1
    names = {"tgt_embed.weight": Renamed("model.decoder.embed_tokens.weight", (1,))}
    if not joint:
        names["src_embed.weight"] = Renamed("model.encoder.embed_tokens.weight", (1,))
    if model.output.bias is not None:
        names["output.bias"] = Renamed("final_logits_bias", ())
    for i in range(len(model.encoder)):
        ours, marian = f"encoder.{i}", f"model.encoder.layers.{i}"
        names |= _attention(f"{ours}.self_attn", f"{marian}.self_attn")
        names |= _norm(f"{ours}.attn_block.norm", f"{marian}.self_attn_layer_norm")
        names |= _feed_forward(f"{ours}.feed_forward", marian, last)
        names |= _norm(f"{ours}.ff_block.norm", f"{marian}.final_layer_norm")
    for i in range(len(model.decoder)):
        ours, marian = f"decoder.{i}", f"model.decoder.layers.{i}"
        names |= _attention(f"{ours}.self_attn", f"{marian}.self_attn")
        names |= _norm(f"{ours}.self_block.norm", f"{marian}.self_attn_layer_norm")
        names |= _attention(f"{ours}.cross_attn", f"{marian}.encoder_attn")
        names |= _norm(f"{ours}.cross_block.norm", f"{marian}.encoder_attn_layer_norm")
        names |= _feed_forward(f"{ours}.feed_forward", marian, last)
        names |= _norm(f"{ours}.ff_block.norm", f"{marian}.final_layer_norm")
    return names


def reordered(weight: Tensor, axes: tuple[int, ...], order: Tensor) -> Tensor:
    """``weight`` with each of ``axes`` read in ``order``."""
    for axis in axes:
        weight = weight.index_select(axis, order)
    return weight


# -- a MarianMT model opened as a seq2seq model -----------------------------------------------
def check_marian(config: Any, name: str) -> None:
    """A MarianMT config that seq2seq's Transformer computes exactly, or one line why not."""
    if config.model_type != "marian":
        why = OTHER_FAMILIES.get(config.model_type, "it is not a MarianMT model")
        raise UsageError(
            f"{name} is a transformers {config.model_type!r} model, which seq2seq does not open "
            f"({why}); it opens MarianMT models (OPUS-MT among them)"
        )
    mismatches = {
        "scale_embedding": (config.scale_embedding, True),
        "encoder_attention_heads == decoder_attention_heads": (
            config.encoder_attention_heads == config.decoder_attention_heads, True),
        "encoder_ffn_dim == decoder_ffn_dim": (
            config.encoder_ffn_dim == config.decoder_ffn_dim, True),
        "activation_function": (config.activation_function in ACTIVATIONS, True),
        "an even d_model": (config.d_model % 2 == 0, True),
    }  # fmt: skip
    wrong = [what for what, (got, needed) in mismatches.items() if got != needed]
    if wrong:
        raise Seq2SeqError(
            f"{name}: a MarianMT model that seq2seq's Transformer does not compute exactly "
            f"({', '.join(wrong)} differ from what it supports); it is not opened"
        )


def load_huggingface(name: str | Path) -> Trained:
    """The MarianMT model in folder ``name`` (``save_pretrained``'s) or of Hub id ``name``,
    as seq2seq's Transformer with the model's own tokenizer."""
    transformers = import_transformers()
    transformers.utils.logging.disable_progress_bar()  # no bar for a few files read
    label = str(name)
    config, tokenizer = _checked_marian(transformers, name)
    hf = transformers.MarianMTModel.from_pretrained(label).eval()
    weights = hf.state_dict()
    spec = VocabSpec(
        src_size=config.vocab_size, tgt_size=config.decoder_vocab_size,
        pad_id=config.pad_token_id, bos_id=config.decoder_start_token_id,
        eos_id=config.eos_token_id, joint=bool(config.share_encoder_decoder_embeddings),
    )  # fmt: skip
    bias = weights["final_logits_bias"].flatten().clone()
    for banned in getattr(hf.generation_config, "bad_words_ids", None) or []:
        if len(banned) == 1:  # a token generation never emits (Marian's pad)
            bias[banned[0]] = float("-inf")
    init_args = {
        "model_size": config.d_model, "num_heads": config.encoder_attention_heads,
        "ff_size": config.encoder_ffn_dim, "encoder_layers": config.encoder_layers,
        "decoder_layers": config.decoder_layers, "dropout": 0.0, "norm": "post",
        "activation": ACTIVATIONS[config.activation_function],
        "output_bias": bool(bias.any()),
    }  # fmt: skip
    model = Transformer(spec, **init_args)
    _load_marian_weights(model, weights, bias, label)
    vocab = MarianVocabulary.from_files(tokenizer_files(tokenizer), spec)
    languages = {"src_lang": getattr(tokenizer, "source_lang", None),
                 "tgt_lang": getattr(tokenizer, "target_lang", None)}  # fmt: skip
    run_config = {
        "model": {"network": {"class_path": "seq2seq.transformer.Transformer",
                              "init_args": init_args}},
        "data": languages, "huggingface": label,
    }  # fmt: skip
    beams = getattr(hf.generation_config, "num_beams", None) or 5
    return Trained(model.eval(), vocab, run_config, SearchSettings(beam=beams))


def _checked_marian(transformers: Any, name: str | Path) -> tuple[Any, Any]:
    """The config and tokenizer of the MarianMT model ``name``, or one line why it is not
    one seq2seq opens."""
    label, local = str(name), Path(name).is_dir()
    if local and not is_huggingface_model(name):
        raise UsageError(f"{label} holds no config.json: not a transformers model")
    try:
        config = transformers.AutoConfig.from_pretrained(label)
    except (OSError, ValueError) as error:
        raise UsageError(f"{label} is not a transformers model: {_first_line(error)}") from None
    check_marian(config, label)
    missing = [f for f in TOKENIZER_FILES if local and not (Path(name) / f).is_file()]
    if missing:
        raise UsageError(
            f"{label}: its tokenizer lacks {', '.join(missing)} (a MarianMT tokenizer is "
            f"{', '.join(TOKENIZER_FILES)})"
        )
    try:
        tokenizer = transformers.MarianTokenizer.from_pretrained(label)
    except (OSError, ValueError, TypeError) as error:
        raise UsageError(f"{label}: its tokenizer cannot be read: {_first_line(error)}") from None
    return config, tokenizer


def _load_marian_weights(
    model: Transformer, weights: dict[str, Tensor], bias: Tensor, label: str
) -> None:
    """``model`` given a MarianMT state dict's weights, each vector of the model's width
    reordered into seq2seq's layout, and ``bias`` as its output bias (if it has one)."""
    order = interleaving(model.tgt_embed.embedding_dim)
    state = {}
    for ours, where in weight_names(model, model.vocab.joint).items():
        state[ours] = reordered(weights[where.marian], where.width_axes, order)
    if model.output.bias is not None:
        state["output.bias"] = bias
    model.load_state_dict(state, strict=False)  # tied matrices once; the table is computed
    unmapped = set(model.state_dict()) - set(state) - {"output.weight", "src_embed.weight"}
    if unmapped:
        raise Seq2SeqError(f"{label}: weights that did not map: {sorted(unmapped)[:5]}")


def tokenizer_files(tokenizer: Any) -> dict[str, bytes]:
    """The files of a MarianTokenizer as ``save_pretrained`` writes them (the same for a
    folder and a Hub id, whatever version of transformers wrote the model)."""
    with tempfile.TemporaryDirectory() as folder:
        tokenizer.save_pretrained(folder)
        return {path.name: path.read_bytes() for path in Path(folder).iterdir() if path.is_file()}


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


# -- a seq2seq Transformer written as a MarianMT model ----------------------------------------
def check_exportable(trained: Trained) -> Transformer:
    """The Transformer of ``trained``, if MarianMT computes it exactly; else one line why."""
    model = trained.model
    if not isinstance(model, Transformer):
        raise Seq2SeqError(
            f"only a Transformer exports to transformers, not a {type(model).__name__}"
        )
    if isinstance(model.encoder_norm, nn.LayerNorm):
        raise Seq2SeqError(
            "a pre-norm Transformer (norm: pre) has no transformers architecture that computes "
            "it exactly (MarianMT is post-norm; the others place their positions otherwise): "
            "only post-norm Transformers export"
        )
    if model.tgt_embed.embedding_dim % 2:
        raise Seq2SeqError("an odd model_size has no MarianMT position table to map to")
    if model.output.weight is not model.tgt_embed.weight:
        raise Seq2SeqError("an output layer not tied to the target embedding has no MarianMT form")
    return model


def export_huggingface(trained: Trained, out: str | Path) -> Path:
    """``trained`` (a post-norm Transformer of seq2seq) written into folder ``out`` as a
    MarianMT model with its tokenizer: ``AutoModelForSeq2SeqLM.from_pretrained(out)`` and
    ``AutoTokenizer.from_pretrained(out)`` read it."""
    transformers = import_transformers()
    transformers.utils.logging.disable_progress_bar()
    model = check_exportable(trained)
    vocab, spec = trained.vocab, model.vocab
    d = model.tgt_embed.embedding_dim
    layer = first_layer(model)
    activation = TO_MARIAN[layer.feed_forward.activation]
    ff_size = cast(nn.Linear, layer.feed_forward[0]).out_features
    config = transformers.MarianConfig(
        vocab_size=spec.src_size, decoder_vocab_size=spec.tgt_size, d_model=d,
        encoder_layers=len(model.encoder), decoder_layers=len(model.decoder),
        encoder_attention_heads=layer.self_attn.num_heads,
        decoder_attention_heads=layer.self_attn.num_heads,
        encoder_ffn_dim=ff_size, decoder_ffn_dim=ff_size,
        activation_function=activation, scale_embedding=True, dropout=0.0,
        max_position_embeddings=1024, pad_token_id=spec.pad_id, eos_token_id=spec.eos_id,
        decoder_start_token_id=spec.bos_id, forced_eos_token_id=spec.eos_id,
        share_encoder_decoder_embeddings=spec.joint,
    )  # fmt: skip
    hf = transformers.MarianMTModel(config).eval()
    back = torch.argsort(interleaving(d))
    ours = model.state_dict()
    state = {}
    for name, where in weight_names(model, spec.joint).items():
        value = reordered(ours[name], where.width_axes, back)
        state[where.marian] = value.reshape(1, -1) if where.marian == "final_logits_bias" else value
    state.setdefault("final_logits_bias", torch.zeros(1, spec.tgt_size))
    embedding = state["model.decoder.embed_tokens.weight"]
    state["lm_head.weight"] = embedding
    if spec.joint:
        state["model.shared.weight"] = state["model.encoder.embed_tokens.weight"] = embedding
    else:
        state["model.shared.weight"] = state["model.encoder.embed_tokens.weight"]
    result = hf.load_state_dict(state, strict=False)
    unexpected = [k for k in result.missing_keys if "embed_positions" not in k]
    if unexpected or result.unexpected_keys:
        raise Seq2SeqError(f"weights that did not map: {(unexpected + result.unexpected_keys)[:5]}")
    hf.generation_config = generation_config(transformers, trained.search, spec)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(out)
    _write_tokenizer(vocab, out)
    return out


# transformers divides a finished hypothesis's log-probability by |Y|^beta, seq2seq by GNMT's
# ((5 + |Y|) / 6)^alpha (|Y| counting EOS in both). No beta gives GNMT's ranking at every
# length; the two change alike where their slopes in log |Y| meet, beta = alpha |Y| / (5 + |Y|),
# taken at a sentence of this many pieces.
TYPICAL_PIECES = 15
MAX_PIECES = 512  # the tokenizer's model_max_length: no sentence is cut before it


def marian_length_penalty(alpha: float) -> float:
    """transformers' ``length_penalty`` closest to seq2seq's GNMT ``alpha`` (see above)."""
    return round(alpha * TYPICAL_PIECES / (5 + TYPICAL_PIECES), 4)


def generation_config(transformers: Any, search: SearchSettings, spec: VocabSpec) -> Any:
    """The model's own search as transformers' ``generate`` reads it: the beam, a length
    penalty of transformers' form, a sentence ended once ``beam`` hypotheses have ended (as
    seq2seq's beam search ends it), and a length limit that no sentence reaches."""
    return transformers.GenerationConfig(
        num_beams=search.beam, length_penalty=marian_length_penalty(search.length_penalty),
        early_stopping=search.beam > 1, max_length=MAX_PIECES, num_return_sequences=1,
        decoder_start_token_id=spec.bos_id, bos_token_id=spec.bos_id,
        eos_token_id=spec.eos_id, forced_eos_token_id=spec.eos_id, pad_token_id=spec.pad_id,
    )  # fmt: skip


def _write_tokenizer(vocab: Any, out: Path) -> None:
    """The SentencePiece models and their ids as MarianTokenizer reads them (``vocab.json``
    maps each piece to seq2seq's id, which is SentencePiece's); a model that came from
    MarianMT gets its own tokenizer's files back, byte for byte."""
    if isinstance(vocab, MarianVocabulary):
        vocab.write(out)
        return
    (out / "source.spm").write_bytes(vocab.src.to_bytes())
    (out / "target.spm").write_bytes(vocab.tgt.to_bytes())
    pieces = vocab.src.id_to_piece(range(vocab.src.size))
    (out / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}))
    if not vocab.joint:
        targets = vocab.tgt.id_to_piece(range(vocab.tgt.size))
        (out / "target_vocab.json").write_text(json.dumps({p: i for i, p in enumerate(targets)}))
    settings = {
        "tokenizer_class": "MarianTokenizer", "pad_token": "<pad>", "eos_token": "</s>",
        "unk_token": "<unk>", "separate_vocabs": not vocab.joint, "model_max_length": MAX_PIECES,
    }  # fmt: skip
    (out / "tokenizer_config.json").write_text(json.dumps(settings, indent=2))
