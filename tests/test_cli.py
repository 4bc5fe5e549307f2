"""End-to-end runs of the `seq2seq` command on a tiny corpus."""

from __future__ import annotations

import io
import json
import math

import pytest
import torch
import yaml
from cli_errors import cli_error
from tiny_run import SIZES, assert_same_search, cut_into_pieces, tiny_config, write_config

from seq2seq.commands.fit import ConfigIntoCheckpoint, Seq2SeqCLI
from seq2seq.commands.main import main
from seq2seq.inference.checkpoint import Trained, load_trained
from seq2seq.inference.search import SearchSettings
from seq2seq.inference.translator import translate_lines
from seq2seq.text.demo_corpus import write_corpus
from seq2seq.training.data.datamodule import TranslationDataModule
from seq2seq.training.task import TranslationTask


def stdin(text: str) -> io.TextIOWrapper:
    """A stand-in for sys.stdin: text over bytes, as `translate` reads the bytes."""
    return io.TextIOWrapper(io.BytesIO(text.encode("utf-8")), encoding="utf-8")


def test_fit_keeps_best_and_last_checkpoints_and_logs(trained_run):
    checkpoints = sorted(p.name for p in (trained_run["root"] / "run/checkpoints").iterdir())
    assert "last.ckpt" in checkpoints
    assert any(name.startswith("epoch") and "bleu" in name for name in checkpoints)
    metrics = trained_run["root"] / "run/logs/version_0/metrics.csv"
    header = metrics.read_text().splitlines()[0].split(",")
    for column in ["train_loss_step", "train_ppl", "val_loss", "val_ppl", "val_bleu", "val_chrf"]:
        assert column in header


def test_checkpoint_loads_safely_with_vocabulary_and_config(trained_run):
    checkpoint = torch.load(trained_run["ckpt"], map_location="cpu", weights_only=True)
    stored = checkpoint["seq2seq"]
    assert yaml.safe_load(stored["config"])["data"]["tgt_lang"] == "de"
    assert isinstance(stored["vocab"]["src"], bytes)


def test_translate_reads_stdin_and_writes_one_line_per_input(trained_run, capsys, monkeypatch):
    lines = (trained_run["corpus"] / "test.en").read_text().splitlines()[:5]
    monkeypatch.setattr("sys.stdin", stdin("\n".join([lines[0], "", *lines[1:]]) + "\n"))
    main(["translate", "--ckpt", str(trained_run["ckpt"]), "--beam", "2"])
    output = capsys.readouterr().out.splitlines()
    assert len(output) == 6
    assert output[1] == ""  # a blank line stays blank


def test_translate_n_best(trained_run, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", stdin("twenty-one\nfive hundred\n"))
    main(["translate", "--ckpt", str(trained_run["ckpt"]), "--beam", "3", "--n-best", "2"])
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [row[0] for row in rows] == ["0", "0", "1", "1"]
    assert float(rows[0][1]) >= float(rows[1][1])


def test_evaluate_prints_json_scores_with_signatures(trained_run, capsys):
    corpus = trained_run["corpus"]
    main(
        [
            "evaluate", "--ckpt", str(trained_run["ckpt"]), "--src", str(corpus / "test.en"),
            "--ref", str(corpus / "test.de"), "--beam", "2", "--json",
        ]
    )  # fmt: skip
    scores = json.loads(capsys.readouterr().out)
    assert set(scores) == {"bleu", "chrf", "bleu_literature", "decoding"}
    assert scores["decoding"]["sentences"] == SIZES["test"]
    assert scores["decoding"]["sentences_per_s"] > 0
    assert 0.0 <= scores["bleu"]["score"] <= 100.0
    assert "tok:13a" in scores["bleu"]["signature"]
    assert "tok:none" in scores["bleu_literature"]["signature"]


def test_evaluate_remove_bpe_joins_the_pieces_of_translations_and_references(
    trained_run, trained_transformer, tmp_path, capsys
):
    """--remove-bpe: references cut into pieces score the translations as if uncut, and the
    translations written keep what the model wrote; without it the pieces are scored."""
    corpus = trained_run["corpus"]
    command = ["evaluate", "--ckpt", str(trained_transformer), "--src", str(corpus / "test.en")]
    command += ["--beam", "2", "--json"]
    main([*command, "--ref", str(corpus / "test.de"), "--output", str(tmp_path / "first.txt")])
    capsys.readouterr()
    translations = (tmp_path / "first.txt").read_text(encoding="utf-8").splitlines()
    cut = [cut_into_pieces(line) for line in translations]
    assert cut != translations
    (tmp_path / "cut.de").write_text("".join(line + "\n" for line in cut), encoding="utf-8")
    output = tmp_path / "joined.txt"
    main([*command, "--ref", str(tmp_path / "cut.de"), "--remove-bpe", "--output", str(output)])
    joined = json.loads(capsys.readouterr().out)
    assert joined["bleu"]["score"] == pytest.approx(100.0)
    assert joined["bleu_literature"]["score"] == pytest.approx(100.0)
    assert output.read_text(encoding="utf-8").splitlines() == translations
    main([*command, "--ref", str(tmp_path / "cut.de")])
    assert json.loads(capsys.readouterr().out)["bleu_literature"]["score"] < 100.0


def test_search_defaults_to_the_length_penalty_the_model_was_configured_with(
    trained_run, tmp_path, capsys
):
    checkpoint = torch.load(trained_run["ckpt"], map_location="cpu", weights_only=True)
    assert checkpoint["seq2seq"]["search"]["beam"] == 2  # the tiny config's test beam
    checkpoint["seq2seq"]["search"]["length_penalty"] = 1.7
    ckpt = tmp_path / "lp.ckpt"
    torch.save(checkpoint, ckpt)
    corpus = trained_run["corpus"]
    command = [
        "evaluate", "--ckpt", str(ckpt), "--src", str(corpus / "test.en"),
        "--ref", str(corpus / "test.de"), "--json",
    ]  # fmt: skip
    main(command)
    decoding = json.loads(capsys.readouterr().out)["decoding"]
    assert (decoding["beam"], decoding["length_penalty"]) == (5, 1.7)  # --beam's default: 5
    main([*command, "--length-penalty", "0.5"])
    assert json.loads(capsys.readouterr().out)["decoding"]["length_penalty"] == 0.5


def test_attention_draws_one_png_per_sentence(trained_run, tmp_path):
    out = tmp_path / "attention"
    main(
        [
            "attention", "--ckpt", str(trained_run["ckpt"]),
            "--src", str(trained_run["corpus"] / "test.en"), "--limit", "2", "--out", str(out),
        ]
    )  # fmt: skip
    pngs = sorted(out.glob("*.png"))
    assert len(pngs) == 2
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_reloaded_checkpoint_translates_like_the_trained_model(trained_run, tmp_path):
    config = tiny_config(tmp_path, trained_run["corpus"])
    config["trainer"]["max_epochs"] = 1
    cli = Seq2SeqCLI(
        TranslationTask,
        TranslationDataModule,
        args=["--config", str(write_config(tmp_path / "c.yaml", config))],
        run=False,
        save_config_callback=ConfigIntoCheckpoint,
        seed_everything_default=1,
    )
    cli.trainer.fit(cli.model, cli.datamodule)
    sources = trained_run["corpus"].joinpath("val.en").read_text().splitlines()
    search = SearchSettings(beam=3, n_best=3)  # the n-best and their log-probabilities
    in_memory = Trained(cli.model.model.eval(), cli.model.vocab, {})
    expected = translate_lines(in_memory, sources, search)
    reloaded = load_trained(tmp_path / "run/checkpoints/last.ckpt")
    assert_same_search(translate_lines(reloaded, sources, search), expected)


def test_average_is_the_mean_of_the_weights_and_translates(trained_run, tmp_path, capsys):
    ckpts = sorted((trained_run["root"] / "run/checkpoints").glob("*.ckpt"))[:2]
    assert len(ckpts) == 2
    out = tmp_path / "avg.ckpt"
    main(["average", "--ckpts", *map(str, ckpts), "--out", str(out)])
    loaded = [torch.load(p, weights_only=True)["state_dict"] for p in [*ckpts, out]]
    for key, value in loaded[2].items():
        if value.is_floating_point():
            assert torch.allclose(value, (loaded[0][key] + loaded[1][key]) / 2, atol=1e-6)
    sources = (trained_run["corpus"] / "test.en").read_text().splitlines()[:3]
    translations = translate_lines(load_trained(out), sources, SearchSettings(beam=2))
    assert len(translations) == 3


def test_average_never_replaces_a_checkpoint_unasked(trained_run, tmp_path, capsys):
    first, second = sorted((trained_run["root"] / "run/checkpoints").glob("*.ckpt"))[:2]
    trained = tmp_path / "trained.ckpt"
    trained.write_bytes(first.read_bytes())
    before = trained.read_bytes()
    for ckpts, what in [([trained, second], "is one of the checkpoints to average"),
                        ([first, second], "exists")]:  # fmt: skip
        args = ["average", "--ckpts", *map(str, ckpts), "--out", str(trained)]
        assert cli_error(capsys, *args) == (
            2, f"--out {trained} {what}; give another file, or --force to replace it "
               "(see seq2seq average --help)"
        )  # fmt: skip
        assert trained.read_bytes() == before
    main(["average", "--ckpts", str(first), str(second), "--out", str(trained), "--force"])
    assert trained.read_bytes() != before
    assert load_trained(trained).model is not None


def test_transformer_fits_translates_and_draws_attention(
    trained_run, trained_transformer, tmp_path, capsys
):
    ckpt = trained_transformer
    src = trained_run["corpus"] / "test.en"
    main(["translate", "--ckpt", str(ckpt), "--input", str(src), "--beam", "2"])
    assert len(capsys.readouterr().out.splitlines()) == SIZES["test"]
    main(
        [
            "attention",
            "--ckpt",
            str(ckpt),
            "--src",
            str(src),
            "--limit",
            "1",
            "--out",
            str(tmp_path / "a"),
        ]
    )
    assert len(list((tmp_path / "a").glob("*.png"))) == 1


def test_unknown_config_key_is_an_error(trained_run, run_here):
    result = run_here("fit", "--config", str(trained_run["config"]), "--model.lrr", "0.1")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [  # the whole of stderr: no usage screen, no traceback
        "seq2seq: error: unrecognized arguments: --model.lrr 0.1 (see seq2seq fit --help)"
    ]


def test_misaligned_corpus_is_one_line_error(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    write_corpus(corpus, seed=3, sizes=SIZES)
    german = (corpus / "train.de").read_text().splitlines()
    (corpus / "train.de").write_text("\n".join(german[:-1]) + "\n")
    config = write_config(tmp_path / "c.yaml", tiny_config(tmp_path, corpus))
    status, error = cli_error(capsys, "fit", "--config", str(config))
    assert status == 1 and "400" in error and "399" in error


def test_missing_checkpoint_is_one_line_error(tmp_path, run_here):
    result = run_here("translate", "--ckpt", str(tmp_path / "nope.ckpt"), stdin="hello\n")
    assert result.returncode == 1
    assert (
        result.stderr.strip() == f"seq2seq: error: checkpoint not found: {tmp_path / 'nope.ckpt'}"
    )


def test_translate_of_empty_input_prints_nothing(trained_run, run_here):
    result = run_here("translate", "--ckpt", str(trained_run["ckpt"]), stdin="")
    assert result.returncode == 0
    assert result.stdout == ""


def test_missing_checkpoint_is_an_error_even_with_empty_input(tmp_path, run_here):
    """The checkpoint is checked before any input is read (it used to exit 0 here)."""
    result = run_here("translate", "--ckpt", str(tmp_path / "nope.ckpt"), stdin="")
    assert result.returncode == 1
    assert result.stderr == f"seq2seq: error: checkpoint not found: {tmp_path / 'nope.ckpt'}\n"


def test_bf16_reaches_the_search_and_its_scores_are_finite(trained_run):
    """Not that bf16 agrees with fp32 (whether it picks the same words depends on what the
    model learnt; how close its log-probabilities are is checked in test_search)."""
    trained = load_trained(trained_run["ckpt"])
    sources = (trained_run["corpus"] / "test.en").read_text().splitlines()
    fp32 = translate_lines(trained, sources, SearchSettings(beam=3))
    bf16 = translate_lines(trained, sources, SearchSettings(beam=3, bf16=True))
    assert len(bf16) == len(fp32) == len(sources)
    assert all(math.isfinite(t.hypotheses[0].score) for t in bf16)
    assert any(
        a.hypotheses[0].score != b.hypotheses[0].score for a, b in zip(fp32, bf16, strict=True)
    )


def test_fit_stopped_by_max_steps_mid_epoch_ends_cleanly(tmp_path):
    """max_steps can end training before the epoch's validation: early stopping on val
    BLEU must wait for a validation instead of failing on the missing metric."""
    corpus = tmp_path / "corpus"
    write_corpus(corpus, seed=3, sizes=SIZES)
    config = tiny_config(tmp_path, corpus)
    config["trainer"].update(max_epochs=1, max_steps=2)
    config["model"]["warmup_steps"] = 1
    main(["fit", "--config", str(write_config(tmp_path / "c.yaml", config))])
    last = torch.load(tmp_path / "run/checkpoints/last.ckpt", weights_only=False)
    assert last["global_step"] == 2


def test_an_average_keeps_tied_weights_tied(trained_transformer, tmp_path):
    """The Transformer's target embedding and output layer are one matrix: the average saves
    it once, like the checkpoints it averages (not once per name, which doubled the file)."""
    out = tmp_path / "avg.ckpt"
    main(
        [
            "average",
            "--ckpts",
            str(trained_transformer),
            str(trained_transformer),
            "--out",
            str(out),
        ]
    )
    weights = torch.load(out, weights_only=True)["state_dict"]
    assert weights["model.output.weight"].data_ptr() == weights["model.tgt_embed.weight"].data_ptr()
    assert out.stat().st_size < 1.2 * trained_transformer.stat().st_size
