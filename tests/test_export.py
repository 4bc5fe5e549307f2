"""CTranslate2 export: a float32 export translates exactly as seq2seq, its attention is the
last decoder layer's, tied matrices are stored once, and RNNs and bad options are one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from cli_errors import cli_error
from tiny_run import tiny_config, write_config

import seq2seq
from seq2seq.commands.main import main
from seq2seq.common.errors import Seq2SeqError
from seq2seq.inference.checkpoint import load_trained
from seq2seq.inference.search import SearchSettings, max_output_lengths
from seq2seq.inference.translator import translate_lines

ctranslate2 = pytest.importorskip(
    "ctranslate2", reason="ctranslate2 is not installed (pip install -e '.[export]')"
)

from seq2seq.inference.ct2_translate import (  # noqa: E402
    NEAR_ZERO_PENALTY,
    _hypotheses,
    load_export,
    translate_pieces,
    translate_stream_ct2,
)
from seq2seq.inference.export import POSITIONS, export_ctranslate2  # noqa: E402

# A limit no test translation reaches: there the two searches are the same by construction
# (at the limit seq2seq forces EOS and CTranslate2 does not).
RATIO, OFFSET = 2.0, 40


def _fit_transformer(root: Path, corpus: Path, norm: str) -> Path:
    """A tiny Transformer trained until it ends its translations (20 short epochs), with
    the layer norms before (pre) or after (post) each sublayer; its last checkpoint. No
    validation: an early epoch's model decodes every val sentence to the length limit."""
    config = tiny_config(root, corpus)
    config["trainer"].update(max_epochs=20, limit_val_batches=0)
    config["model"]["lr"] = 0.01
    config["model"]["network"] = {
        "class_path": "seq2seq.transformer.Transformer",
        "init_args": {
            "model_size": 32, "num_heads": 2, "ff_size": 64, "encoder_layers": 1,
            "decoder_layers": 2, "dropout": 0.0, "norm": norm,
        },
    }  # fmt: skip
    main(["fit", "--config", str(write_config(root / "t.yaml", config))])
    return root / "run/checkpoints/last.ckpt"


@pytest.fixture(scope="module")
def pre_norm_ckpt(trained_run, tmp_path_factory) -> Path:
    return _fit_transformer(tmp_path_factory.mktemp("pre"), trained_run["corpus"], "pre")


@pytest.fixture(scope="module")
def post_norm_ckpt(trained_run, tmp_path_factory) -> Path:
    return _fit_transformer(tmp_path_factory.mktemp("post"), trained_run["corpus"], "post")


@pytest.fixture(scope="module", params=["pre", "post"])
def transformer_ckpt(request, trained_run) -> Path:
    # trained_run named here, not only inside getfixturevalue: it marks the tests slow
    return request.getfixturevalue(f"{request.param}_norm_ckpt")


@pytest.fixture(scope="module")
def exported(transformer_ckpt, tmp_path_factory) -> Path:
    return export_ctranslate2(load_trained(transformer_ckpt), tmp_path_factory.mktemp("ct2") / "m")


def _test_lines(trained_run) -> list[str]:
    return (trained_run["corpus"] / "test.en").read_text().splitlines()


@pytest.mark.parametrize(
    "beam, alpha, n_best", [(1, 1.0, 1), (5, 1.0, 1), (5, 0.0, 1), (5, 0.0, 5)]
)
def test_float32_export_translates_as_seq2seq(
    transformer_ckpt, exported, trained_run, beam, alpha, n_best
):
    trained = load_trained(transformer_ckpt)
    lines = _test_lines(trained_run)
    search = SearchSettings(beam, n_best, alpha, max_len_ratio=RATIO, max_len_offset=OFFSET)
    ours = translate_lines(trained, lines, search)
    theirs = list(translate_stream_ct2(load_export(exported, threads=1), lines, search))
    src_lens = torch.tensor([len(trained.vocab.src.encode(line)) + 1 for line in lines])
    limits = max_output_lengths(src_lens, RATIO, OFFSET).tolist()
    lengths = [max(len(h.tokens) for h in t.hypotheses) for t in ours]
    assert all(length < limit for length, limit in zip(lengths, limits, strict=True))
    for mine, other in zip(ours, theirs, strict=True):
        assert other.texts == mine.texts
        assert [h.tokens for h in other.hypotheses] == [h.tokens for h in mine.hypotheses]
        for a, b in zip(mine.hypotheses, other.hypotheses, strict=True):
            assert b.score == pytest.approx(a.score, abs=1e-4)
            assert b.logprob == pytest.approx(a.logprob, abs=1e-4)


@pytest.mark.parametrize("beam", [1, 5])
def test_each_source_is_searched_within_its_own_length_limit(exported, trained_run, beam):
    """Sources translated together (one call under the largest limit, then again those that
    reached their own) get what each gets alone, searched within its own limit."""
    export = load_export(exported, threads=1)
    sources = [export.src.pieces(line) for line in _test_lines(trained_run) if line.strip()]
    ratio, offset = 1.0, 0  # tight: some translations reach their limit, others end before
    search = SearchSettings(beam, beam, 1.0, max_len_ratio=ratio, max_len_offset=offset)
    together = translate_pieces(export, sources, search)
    reached = 0
    for pieces, hypotheses in zip(sources, together, strict=True):
        limit = int(ratio * (len(pieces) + 1) + offset)
        (alone,) = export.translator.translate_batch(
            [pieces], beam_size=beam, num_hypotheses=beam, length_penalty=NEAR_ZERO_PENALTY,
            return_end_token=True, return_scores=True, max_input_length=0,
            min_decoding_length=0, max_decoding_length=limit + 1,
        )  # fmt: skip
        expected = _hypotheses(export, alone, search, with_attention=False)
        assert [h.tokens for h in hypotheses] == [h.tokens for h in expected]
        assert [h.score for h in hypotheses] == pytest.approx([h.score for h in expected])
        reached += any(len(h.tokens) == limit for h in hypotheses)
    assert 0 < reached < len(sources)  # both kinds of source were tested


@pytest.mark.parametrize("beam", [1, 5])
def test_workers_side_by_side_translate_as_one(exported, trained_run, beam):
    """Batches shared among two workers (CTranslate2's inter_threads) give what one gives."""
    lines = _test_lines(trained_run)
    search = SearchSettings(beam, beam, 1.0, max_len_ratio=RATIO, max_len_offset=OFFSET)
    small_batches = 16  # source pieces: many batches, so that both workers translate
    one = list(translate_stream_ct2(load_export(exported, threads=1), lines, search, small_batches))
    two = load_export(exported, threads=2, workers=2)
    assert two.translator.num_translators == 2
    side_by_side = list(translate_stream_ct2(two, lines, search, small_batches))
    for a, b in zip(one, side_by_side, strict=True):
        assert [h.tokens for h in b.hypotheses] == [h.tokens for h in a.hypotheses]
        assert [h.score for h in b.hypotheses] == pytest.approx([h.score for h in a.hypotheses])


@pytest.mark.parametrize(
    ("threads", "workers", "inter", "intra"),
    [(0, 1, 1, 0), (2, 1, 1, 2), (2, 2, 2, 1), (1, 4, 4, 1), (0, 2, 2, None)],
)
def test_workers_share_the_threads(exported, monkeypatch, threads, workers, inter, intra):
    """``threads`` in all, each of the ``workers`` with its share (at least one); 0 with
    several workers: PyTorch's thread count shared."""
    made = {}

    def translator(folder, device, inter_threads, intra_threads):
        made.update(inter=inter_threads, intra=intra_threads)

    monkeypatch.setattr(ctranslate2, "Translator", translator)
    load_export(exported, threads=threads, workers=workers)
    expected_intra = max(1, torch.get_num_threads() // workers) if intra is None else intra
    assert made == {"inter": inter, "intra": expected_intra}


def test_export_attention_is_the_last_layers_mean_over_heads(
    transformer_ckpt, exported, trained_run
):
    trained = load_trained(transformer_ckpt)
    lines = _test_lines(trained_run)[:8]
    search = SearchSettings(5, 1, 1.0, max_len_ratio=RATIO, max_len_offset=OFFSET)
    ours = translate_lines(trained, lines, search, need_weights=True)
    export = load_export(exported, threads=1)
    sources = [trained.vocab.src.pieces(line) for line in lines]
    theirs = translate_pieces(export, sources, search, need_weights=True)
    for mine, other, pieces in zip(ours, theirs, sources, strict=True):
        hyp, attention = mine.hypotheses[0], other[0].attention
        assert attention.shape == (len(hyp.tokens) + 1, len(pieces))  # an EOS row, no EOS column
        last_layer = hyp.attention[:, -1].mean(dim=1)  # [T + 1, S + 1]
        torch.testing.assert_close(attention, last_layer[:, :-1], atol=1e-4, rtol=0)


def test_export_folder_holds_model_vocabulary_and_sentencepiece(transformer_ckpt, exported):
    trained = load_trained(transformer_ckpt)
    files = {path.name for path in exported.iterdir()}
    assert files == {
        "model.bin", "config.json", "shared_vocabulary.json", "sentencepiece.model",
        "seq2seq.json",
    }  # fmt: skip
    vocabulary = json.loads((exported / "shared_vocabulary.json").read_text())
    tokenizer = trained.vocab.tgt
    assert vocabulary == tokenizer.id_to_piece(range(tokenizer.size))
    assert vocabulary[:4] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert (exported / "sentencepiece.model").read_bytes() == tokenizer.to_bytes()
    config = json.loads((exported / "config.json").read_text())
    assert config["add_source_eos"] and config["decoder_start_token"] == "<s>"
    # One matrix serves as source and target embedding and as output projection: the file
    # holds the weights once (plus the position table), not the embedding three times.
    model = trained.model
    embedding = model.tgt_embed.weight.numel()
    weights = sum(p.numel() for p in model.parameters()) + POSITIONS * model.tgt_embed.embedding_dim
    assert (exported / "model.bin").stat().st_size < 4 * (weights + embedding)


def test_an_export_keeps_the_checkpoints_search_and_an_older_one_its_length_penalty(
    transformer_ckpt, exported, tmp_path
):
    assert load_export(exported).search == load_trained(transformer_ckpt).search
    older = shutil.copytree(exported, tmp_path / "format1")
    description = json.loads((older / "seq2seq.json").read_text())
    del description["search"]
    description.update(format=1, length_penalty=0.7)  # as exports were written before
    (older / "seq2seq.json").write_text(json.dumps(description))
    assert load_export(older).search == SearchSettings(length_penalty=0.7)


def test_int8_export_is_smaller_and_writes_text(transformer_ckpt, exported, tmp_path):
    out = export_ctranslate2(load_trained(transformer_ckpt), tmp_path / "int8", "int8")
    assert (out / "model.bin").stat().st_size < (exported / "model.bin").stat().st_size
    [translation] = translate_stream_ct2(load_export(out), ["three"], SearchSettings())
    assert translation.text


def test_export_never_replaces_an_export_unasked(pre_norm_ckpt, tmp_path, capsys):
    out = tmp_path / "ct2"
    main(["export", "--ckpt", str(pre_norm_ckpt), "--to", "ctranslate2", "--out", str(out)])
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    args = ["export", "--ckpt", str(pre_norm_ckpt), "--to", "ctranslate2", "--out", str(out)]
    assert cli_error(capsys, *args, "--quantization", "int8") == (
        2, f"--out {out} holds an export already; give another folder, or --force to replace "
           "it (see seq2seq export --help)"
    )  # fmt: skip
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before
    main([*args, "--quantization", "int8", "--force"])
    assert (out / "model.bin").stat().st_size < len(before["model.bin"])
    assert json.loads((out / "seq2seq.json").read_text())["quantization"] == "int8"


def test_plain_ctranslate2_translator_as_the_readme_shows(transformer_ckpt, exported, trained_run):
    """The README's usage: SentencePiece pieces in, pieces out, no seq2seq involved."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(exported / "sentencepiece.model"))
    translator = ctranslate2.Translator(str(exported))
    lines = _test_lines(trained_run)
    pieces = [sp.encode(line, out_type=str) for line in lines]
    results = translator.translate_batch(pieces, beam_size=1)
    greedy = SearchSettings(1, 1, 1.0, max_len_ratio=RATIO, max_len_offset=OFFSET)
    ours = translate_lines(load_trained(transformer_ckpt), lines, greedy)
    assert [sp.decode(r.hypotheses[0]) for r in results] == [t.text for t in ours]


def test_translate_ctranslate2_command_end_to_end(pre_norm_ckpt, trained_run, tmp_path, run_here):
    out = tmp_path / "ct2"
    exported = run_here(
        "export", "--ckpt", str(pre_norm_ckpt), "--to", "ctranslate2", "--out", str(out)
    )
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.strip() == str(out)
    source = trained_run["corpus"] / "test.en"
    options = ["--beam", "5", "--n-best", "2", "--length-penalty", "0.6", "--max-len-ratio",
               str(RATIO), "--max-len-offset", str(OFFSET)]  # fmt: skip
    ours = run_here("translate", "--ckpt", str(pre_norm_ckpt), *options, "--input", str(source))
    theirs = run_here("translate", "--ctranslate2", str(out), *options, stdin=source.read_text())
    assert theirs.returncode == 0, theirs.stderr
    assert [line.split("\t")[::2] for line in theirs.stdout.splitlines()] == [
        line.split("\t")[::2] for line in ours.stdout.splitlines()
    ]  # index and text of each of the 2 best; the scores are compared above
    from_python = seq2seq.load(out).translate(  # the Python API opens the export alike
        source.read_text().splitlines(), beam=5, n_best=2, length_penalty=0.6,
        max_len_ratio=RATIO, max_len_offset=OFFSET,
    )  # fmt: skip
    assert [text for texts in from_python for text in texts] == [
        line.split("\t")[2] for line in theirs.stdout.splitlines()
    ]
    workers = run_here("translate", "--ctranslate2", str(out), "--ctranslate2-workers", "2",
                          *options, stdin=source.read_text())  # fmt: skip
    assert workers.returncode == 0 and workers.stdout == theirs.stdout, workers.stderr
    hyp = tmp_path / "hyp.txt"
    written = run_here("translate", "--ctranslate2", str(out), "--input", str(source),
                          "--output", str(hyp), "--beam", "1")  # fmt: skip
    assert written.returncode == 0 and written.stdout == ""
    assert len(hyp.read_text().splitlines()) == len(source.read_text().splitlines())
    bf16 = run_here("translate", "--ctranslate2", str(out), "--bf16", stdin="three\n")
    assert bf16.returncode == 1
    assert bf16.stderr.splitlines() == [
        "seq2seq: error: --bf16 does not apply to --ctranslate2: the export's --quantization "
        "sets its arithmetic"
    ]


def test_evaluate_scores_an_export_as_its_checkpoint(
    pre_norm_ckpt, trained_run, tmp_path, run_here
):
    out = tmp_path / "ct2"
    exported = run_here(
        "export", "--ckpt", str(pre_norm_ckpt), "--to", "ctranslate2", "--out", str(out)
    )
    assert exported.returncode == 0, exported.stderr
    test = ["--src", str(trained_run["corpus"] / "test.en"),
            "--ref", str(trained_run["corpus"] / "test.de"), "--beam", "5", "--json"]  # fmt: skip
    ours = run_here("evaluate", "--ckpt", str(pre_norm_ckpt), *test)
    theirs = run_here("evaluate", "--ctranslate2", str(out), *test)
    assert ours.returncode == 0 and theirs.returncode == 0, theirs.stderr
    ours_scores, their_scores = json.loads(ours.stdout), json.loads(theirs.stdout)
    for metric in ("bleu", "chrf", "bleu_literature"):  # the literature BLEU needs tgt_lang
        assert their_scores[metric]["score"] == ours_scores[metric]["score"], metric
    assert their_scores["decoding"]["length_penalty"] == ours_scores["decoding"]["length_penalty"]
    both = run_here("evaluate", "--ckpt", str(pre_norm_ckpt), "--ctranslate2", str(out), *test)
    assert both.returncode == 2
    assert "--ckpt and --ctranslate2 exclude each other" in both.stderr


def test_an_rnn_checkpoint_is_refused_in_one_line(trained_run, tmp_path, run_here):
    result = run_here(
        "export", "--ckpt", str(trained_run["ckpt"]), "--to", "ctranslate2",
        "--out", str(tmp_path / "rnn"),
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "seq2seq: error: only Transformer checkpoints export to CTranslate2 (this one is a "
        "RNNSeq2Seq; CTranslate2 has no RNN decoders)"
    ]
    assert not (tmp_path / "rnn").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--quantization", "int4"], "argument --quantization: invalid choice: 'int4'"),
        (["--to", "onnx"], "argument --to: invalid choice: 'onnx'"),
    ],
)
def test_bad_export_options_are_one_line(trained_run, tmp_path, run_here, args, message):
    options = {"--to": "ctranslate2", **dict(zip(args[::2], args[1::2], strict=True))}
    flat = [item for pair in options.items() for item in pair]
    ckpt = str(trained_run["ckpt"])
    result = run_here("export", "--ckpt", ckpt, "--out", str(tmp_path), *flat)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"seq2seq: error: {message}")


def test_translate_ctranslate2_refuses_a_folder_without_an_export(tmp_path, run_here):
    result = run_here("translate", "--ctranslate2", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"seq2seq: error: {tmp_path} is not a CTranslate2 export of seq2seq (no seq2seq.json; "
        "write one with `seq2seq export --to ctranslate2`)"
    ]


def test_an_export_refuses_alignments_before_any_work(exported, run_here):
    done = run_here("translate", "--ctranslate2", str(exported), "--alignment", stdin="one\n")
    assert done.returncode != 0 and done.stderr.count("\n") == 1, done.stderr
    assert "a CTranslate2 export keeps no attention" in done.stderr and not done.stdout
    with pytest.raises(Seq2SeqError, match="keeps no attention"):
        seq2seq.load(exported).align(["one"], ["eins"])
