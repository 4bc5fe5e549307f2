"""Opening a command's model (``open_model``, through ``seq2seq.load``): the options' search
over the model's own, one model source checked before any loading, and a checkpoint's two
ways of translating agreeing."""

from __future__ import annotations

from pathlib import Path

import pytest

from seq2seq.commands.decoding import DecodeSettings, ModelSettings, check_model_options, open_model
from seq2seq.common.errors import Seq2SeqError, UsageError
from seq2seq.translation_model import CheckpointModel


def test_a_decoder_searches_with_the_models_settings_changed_by_the_options(trained_run: dict):
    options = DecodeSettings(beam=3, max_len_ratio=2.0)
    decoder = open_model("translate", ModelSettings([str(trained_run["ckpt"])]), options, n_best=2)
    assert isinstance(decoder, CheckpointModel)
    assert (decoder.search.beam, decoder.search.n_best) == (3, 2)
    assert decoder.search.max_len_ratio == 2.0
    assert decoder.search.length_penalty == decoder.trained.search.length_penalty  # unset
    assert decoder.tgt_lang == decoder.trained.tgt_lang


def test_streamed_and_all_at_once_translations_agree(trained_run: dict):
    """stream (chunks, a pause ending one early) and translate_all (one pass over all the
    lines) batch differently; the translations and scores are the same."""
    lines = (trained_run["corpus"] / "test.en").read_text().splitlines()[:40]
    lines[5] = ""  # a blank line: an empty translation either way
    options = DecodeSettings(beam=3)
    decoder = open_model("translate", ModelSettings([str(trained_run["ckpt"])]), options, n_best=3)
    arriving = [*lines[:7], None, *lines[7:]]  # the input paused after line 7
    streamed = list(decoder.stream(arriving, progress=False))
    at_once = decoder.translate_all(lines)
    assert [t.source for t in streamed] == lines
    assert [t.texts for t in streamed] == [t.texts for t in at_once]
    assert all(len(t.hypotheses) == 3 for t in at_once if t.source)
    for a, b in zip(streamed, at_once, strict=True):
        assert [h.score for h in a.hypotheses] == pytest.approx([h.score for h in b.hypotheses])
    assert streamed[5].text == ""


@pytest.mark.parametrize(
    ("ckpt", "ctranslate2", "message"),
    [
        (None, None, "translate needs --model, --ckpt, --hf or --ctranslate2"),
        (["a.ckpt"], "folder", "--ckpt and --ctranslate2 exclude each other"),
    ],
)
def test_one_model_source_is_required(ckpt, ctranslate2, message):
    with pytest.raises(UsageError, match=message):
        check_model_options("translate", ModelSettings(ckpt, ctranslate2=ctranslate2))


def test_ctranslate2_workers_need_an_export():
    with pytest.raises(UsageError, match="--ctranslate2-workers applies to --ctranslate2 only"):
        check_model_options("translate", ModelSettings(["a.ckpt"], ctranslate2_workers=2))


def test_each_checkpoint_is_checked_before_any_is_loaded(trained_run: dict, tmp_path: Path):
    missing = tmp_path / "nope.ckpt"
    with pytest.raises(Seq2SeqError, match="checkpoint not found"):
        both = ModelSettings([str(trained_run["ckpt"]), str(missing)])
        open_model("translate", both, DecodeSettings())
