"""The model a command translates with, opened through the Python API: ``open_model`` checks
``--ckpt``/``--ctranslate2`` (``ModelSettings``) before any loading, then ``seq2seq.load``s it
with the search the options (``DecodeSettings``) make of the model's own. ``translate``,
``evaluate``, ``distill`` and ``serve`` all open theirs here, so a command and a script
translate by one path."""

from __future__ import annotations

from seq2seq.commands.decoding import (
    DecodeSettings,
    ModelSettings,
    check_model_options,
    search_options,
)
from seq2seq.translation_model import TranslationModel, load


def open_model(
    command: str, model: ModelSettings, options: DecodeSettings, n_best: int = 1
) -> TranslationModel:
    """The checkpoints of ``--ckpt`` (several: an ensemble, weighted by
    ``--ensemble-weight``) or the export of ``--ctranslate2``, checked and loaded, searching
    with its own settings changed by ``options`` (an unset --length-penalty keeps the
    model's)."""
    check_model_options(command, model)
    return load(
        model.paths, weights=model.ensemble_weight, max_tokens=options.max_tokens,
        max_source_len=options.max_source_len, workers=model.ctranslate2_workers,
        export=model.ctranslate2 is not None, hf=model.hf is not None or None,
        recase=model.recase_table,
        **search_options(options, n_best),
    )  # fmt: skip
