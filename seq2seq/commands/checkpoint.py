"""The commands that write a model: average (several checkpoints into one), upgrade (a
checkpoint of an earlier version, as this one writes it) and export (a Transformer for
CTranslate2, imported by export alone: it is an optional extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from seq2seq.commands.decoding import released_list
from seq2seq.commands.options import check_output_file, check_output_folder, command
from seq2seq.common.errors import UsageError
from seq2seq.inference.checkpoint import (
    CHECKPOINT_KEY,
    average_checkpoints,
    check_checkpoint_path,
    load_trained,
    read_checkpoint,
    save_checkpoint,
)
from seq2seq.inference.export import Quantization
from seq2seq.inference.huggingface import is_huggingface_model
from seq2seq.inference.released import resolve
from seq2seq.inference.upgrade import upgraded_payload
from seq2seq.translation_model import is_export


@command
def average(ckpts: list[str], out: str, force: bool = False) -> None:
    """Average the weights of several checkpoints.

    Writes one checkpoint whose weights are the mean of theirs (e.g. of the last five
    epochs). A file already at --out (a trained checkpoint, say) is kept unless --force.

    Args:
        ckpts: checkpoints to average
        out: where to write the averaged checkpoint
        force: replace the file at --out if there is one
    """
    for ckpt in ckpts:
        check_checkpoint_path(ckpt)
    check_output_file(out, "--out", new_folder=True)
    if Path(out).exists() and not force:
        averaged = any(Path(out).resolve() == Path(ckpt).resolve() for ckpt in ckpts)
        what = "is one of the checkpoints to average" if averaged else "exists"
        raise UsageError(f"--out {out} {what}; give another file, or --force to replace it")
    print(save_checkpoint(average_checkpoints(ckpts), out))


@command
def upgrade(ckpt: str, out: str, force: bool = False) -> None:
    """Rewrite a checkpoint of an earlier version as this version writes it.

    Every command reads an earlier version's checkpoint as it is, upgrading it in memory;
    this writes the upgraded one (class paths that moved, the search its config set), so
    that other tools read it too. CHANGELOG.md says what changed.

    Args:
        ckpt: the checkpoint to upgrade
        out: where to write the upgraded checkpoint
        force: replace the file at --out if there is one
    """
    check_checkpoint_path(ckpt)
    check_output_file(out, "--out", new_folder=True)
    if Path(out).exists() and not force:
        raise UsageError(f"--out {out} exists; give another file, or --force to replace it")
    checkpoint = read_checkpoint(ckpt)
    checkpoint[CHECKPOINT_KEY] = upgraded_payload(checkpoint[CHECKPOINT_KEY])
    print(save_checkpoint(checkpoint, out))


@command
def export(
    to: Literal["ctranslate2", "huggingface"],
    out: str,
    ckpt: str | None = None,
    model: str | None = None,
    quantization: Quantization = "float32",
    force: bool = False,
) -> None:
    """Export a Transformer checkpoint to CTranslate2 or Hugging Face transformers.

    Its weights, its SentencePiece model(s) and vocabulary, in one folder: for
    ctranslate2, one that `seq2seq translate --ctranslate2 DIR` and ctranslate2.Translator
    read; for huggingface, a MarianMT model that transformers' from_pretrained reads (a
    post-norm Transformer: a pre-norm one has no transformers architecture that computes it
    exactly, and is refused). A folder that holds an export already is kept unless --force.

    Args:
        to: the engine (or library) to export for
        out: folder to write the model into
        ckpt: Transformer checkpoint written by `seq2seq fit`
        model: a released Transformer, by name (`seq2seq models` lists them), instead of
            --ckpt
        quantization: type of the stored weights, for ctranslate2 (int8: about 4 times
            smaller and faster on CPUs)
        force: replace the export already in --out if there is one
    """
    if (ckpt is None) == (model is None):
        raise UsageError(f"export needs --ckpt or --model, one of them ({released_list()})")
    if ckpt is not None:
        path = check_checkpoint_path(ckpt)
    else:
        assert model is not None  # one of the two, checked above
        path = resolve(model).checkpoint
    check_output_folder(out)
    if (is_export(out) or is_huggingface_model(out)) and not force:
        raise UsageError(
            f"--out {out} holds an export already; give another folder, or --force to replace it"
        )
    if to == "huggingface":
        from seq2seq.inference.huggingface import check_exportable, export_huggingface
        from seq2seq.inference.huggingface import import_transformers as import_library

        if quantization != "float32":
            raise UsageError("--quantization applies to --to ctranslate2 only")
        import_library()  # before loading the checkpoint: a missing package fails fast
        trained = load_trained(path)
        check_exportable(trained)
        print(export_huggingface(trained, out))
        return
    from seq2seq.inference.export import export_ctranslate2, import_ctranslate2

    import_ctranslate2()  # before loading the checkpoint: a missing package fails fast
    print(export_ctranslate2(load_trained(path), out, quantization))
