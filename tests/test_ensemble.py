"""Ensembles on the encoder-decoder contract: one member is the model, identical members
are one, families mix, vocabularies must agree, and the first member's settings lead."""

from __future__ import annotations

import dataclasses
import json

import pytest
import sacrebleu
import torch

from seq2seq.commands.main import main
from seq2seq.common.errors import CheckpointError
from seq2seq.inference.checkpoint import Trained, load_trained
from seq2seq.inference.ensemble import Ensemble, load_ensemble
from seq2seq.inference.search import SearchSettings, translate_batch
from seq2seq.model import VocabSpec
from seq2seq.rnn import RNNSeq2Seq
from seq2seq.text.tokenizer import VocabSettings, Vocabulary
from seq2seq.transformer import Transformer

VOCAB = VocabSpec(src_size=30, tgt_size=12, pad_id=0, bos_id=2, eos_id=3, joint=False)

# The model-level tests run on --device: the CPU by default, a GPU with `pytest --device cuda`.
on_device = pytest.mark.usefixtures("on_device")


def rnn(seed: int = 1) -> RNNSeq2Seq:
    torch.manual_seed(seed)
    return RNNSeq2Seq(VOCAB, embed_size=8, hidden_size=12, dropout=0.0).eval()


def transformer(seed: int = 2) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(
        VOCAB, model_size=16, num_heads=2, ff_size=32, encoder_layers=1, decoder_layers=2,
        dropout=0.0,
    ).eval()  # fmt: skip


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, VOCAB.src_size, (5, 7), generator=g, device="cpu")
    return src.to(torch.get_default_device()), torch.tensor([7, 4, 1, 5, 6])


def search(model, beam: int) -> list:
    src, src_lens = batch()
    return translate_batch(model, src, src_lens, SearchSettings(beam=beam, n_best=beam))


@on_device
@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("build", [rnn, transformer], ids=["rnn", "transformer"])
def test_an_ensemble_of_one_is_the_model(build, beam):
    alone, ensembled = search(build(), beam), search(Ensemble([build()]), beam)
    for ours, theirs in zip(alone, ensembled, strict=True):
        assert [h.tokens for h in ours] == [h.tokens for h in theirs]
        assert [h.score for h in ours] == [h.score for h in theirs]


@on_device
@pytest.mark.parametrize("beam", [1, 4])
def test_an_ensemble_of_two_identical_models_is_one(beam):
    alone, twice = (
        search(transformer(), beam),
        search(Ensemble([transformer(), transformer()]), beam),
    )
    for ours, theirs in zip(alone, twice, strict=True):
        assert [h.tokens for h in ours] == [h.tokens for h in theirs]
        assert [h.score for h in ours] == pytest.approx([h.score for h in theirs], abs=1e-5)


@on_device
def test_each_step_is_the_mean_of_the_members_log_probabilities():
    members = [rnn(), transformer()]
    ensemble = Ensemble(members)
    src, src_lens = batch()
    prev = torch.full((src.size(0),), VOCAB.bos_id)
    with torch.no_grad():
        mixed, _, _ = ensemble.step(prev, ensemble.start(ensemble.encode(src, src_lens)))
        each = [m.step(prev, m.start(m.encode(src, src_lens)))[0] for m in members]
    assert torch.allclose(mixed, (each[0] + each[1]) / 2)


@on_device
def test_weights_scale_each_members_log_probabilities_and_maps():
    members = [rnn(), transformer()]
    weighted = Ensemble(members, weights=[3.0, 1.0])  # scaled to 0.75 and 0.25
    src, src_lens = batch()
    prev = torch.full((src.size(0),), VOCAB.bos_id)
    with torch.no_grad():
        mixed, _, maps = weighted.step(prev, weighted.start(weighted.encode(src, src_lens)))
        each = [m.step(prev, m.start(m.encode(src, src_lens))) for m in members]
    assert torch.allclose(mixed, 0.75 * each[0][0] + 0.25 * each[1][0], atol=1e-6)
    expected_maps = 0.75 * each[0][2] + 0.25 * each[1][2].mean(dim=(1, 2))  # [B, L, H, S]
    assert torch.allclose(maps, expected_maps, atol=1e-6)


@on_device
@pytest.mark.parametrize("beam", [1, 4])
def test_a_member_of_weight_zero_changes_nothing(beam):
    alone = search(transformer(), beam)
    with_silent_rnn = search(Ensemble([transformer(), rnn()], weights=[1.0, 0.0]), beam)
    for ours, theirs in zip(alone, with_silent_rnn, strict=True):
        assert [h.tokens for h in ours] == [h.tokens for h in theirs]
        assert [h.score for h in ours] == pytest.approx([h.score for h in theirs], abs=1e-5)


@on_device
def test_a_member_of_weight_zero_cannot_turn_minus_infinity_into_nan():
    ensemble = Ensemble([rnn(), transformer()], weights=[1.0, 0.0])
    kept, silent = torch.log_softmax(torch.randn(3, 12), -1), torch.full((3, 12), float("-inf"))
    assert torch.equal(ensemble._mean([kept, silent]), kept)


@on_device
@pytest.mark.parametrize(
    ("weights", "complaint"),
    [([1.0], "1 weights given for 2 members"), ([1.0, -1.0], ">= 0"),
     ([0.0, 0.0], "all 0"), ([1.0, float("nan")], "finite")],
)  # fmt: skip
def test_weights_must_be_one_per_member_non_negative_and_not_all_zero(weights, complaint):
    with pytest.raises(ValueError, match=complaint):
        Ensemble([rnn(), transformer()], weights=weights)


@on_device
def test_families_mix_in_beam_search_with_attention():
    """An RNN ([B, S] maps) and a Transformer ([B, L, H, S]) decode together; the attention
    is their mean over heads, layers and members, one row per output token and EOS."""
    ensemble = Ensemble([rnn(), transformer()])
    src, src_lens = batch()
    results = translate_batch(ensemble, src, src_lens, SearchSettings(beam=3), need_weights=True)
    for (hyp,), length in zip(results, src_lens.tolist(), strict=True):
        assert hyp.attention.shape == (len(hyp.tokens) + 1, length)
        assert torch.allclose(hyp.attention.sum(-1), torch.ones(len(hyp.tokens) + 1), atol=1e-5)


@on_device
def test_ensemble_attention_of_one_member_keeps_its_heads_and_layers():
    ensemble = Ensemble([rnn(), transformer()], ensemble_attention=1)
    src, src_lens = batch()
    (hyp,) = translate_batch(
        ensemble, src[:1], src_lens[:1], SearchSettings(beam=1), need_weights=True
    )[0]
    assert hyp.attention.shape == (len(hyp.tokens) + 1, 2, 2, int(src_lens[0]))  # [T, L, H, S]


@on_device
def test_teacher_forcing_gives_the_mean_log_probabilities_and_maps():
    members = [rnn(), transformer()]
    src, src_lens = batch()
    tgt_in = torch.randint(4, VOCAB.tgt_size, (src.size(0), 4))
    with torch.no_grad():
        logprobs, maps = Ensemble(members)(src, src_lens, tgt_in)
        outputs = [m(src, src_lens, tgt_in) for m in members]
    expected = sum(torch.log_softmax(logits, -1) for logits, _ in outputs) / 2
    assert torch.allclose(logprobs, expected, atol=1e-6)
    assert maps.shape == (src.size(0), 4, src.size(1))  # [B, T, S]


@on_device
def test_members_must_agree_on_sizes_and_the_attention_member_must_exist():
    other = VocabSpec(src_size=30, tgt_size=13, pad_id=0, bos_id=2, eos_id=3, joint=False)
    with pytest.raises(ValueError, match="different vocabularies"):
        Ensemble([rnn(), RNNSeq2Seq(other, embed_size=8, hidden_size=12)])
    with pytest.raises(ValueError, match="0 to 1"):
        Ensemble([rnn(), transformer()], ensemble_attention=2)


def test_checkpoints_with_other_vocabularies_are_refused_naming_both(trained_run, tmp_path):
    ckpt = trained_run["ckpt"]
    trained = load_trained(ckpt)
    assert load_ensemble([ckpt]).model is not None  # one checkpoint: the model itself
    settings = VocabSettings(vocab_size=300, model_type="bpe", joint=False)
    other = Vocabulary.train(["x y z"] * 10, ["u v w"] * 10, settings)
    foreign = dataclasses.replace(trained, vocab=other)
    loads = {str(ckpt): trained, "other.ckpt": foreign}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("seq2seq.inference.ensemble.load_trained", lambda path: loads[str(path)])
        with pytest.raises(CheckpointError) as refused:
            load_ensemble([ckpt, "other.ckpt"])
    message = str(refused.value)
    assert str(ckpt) in message and "other.ckpt" in message
    assert "target vocabularies differ" in message and "\n" not in message


def test_an_ensemble_searches_as_its_first_member_was_configured_to(monkeypatch):
    vocab = Vocabulary.train(["x y z"] * 10, ["u v w"] * 10, VocabSettings(300))
    first = Trained(rnn(), vocab, {}, SearchSettings(beam=3, length_penalty=0.6))
    loads = {"a.ckpt": first, "b.ckpt": Trained(transformer(), vocab, {}, SearchSettings(4))}
    monkeypatch.setattr("seq2seq.inference.ensemble.load_trained", loads.__getitem__)
    assert load_ensemble(["a.ckpt", "b.ckpt"]).search == first.search


def test_translate_with_the_same_checkpoint_twice_equals_once(trained_run, run_here):
    ckpt, source = str(trained_run["ckpt"]), trained_run["corpus"] / "test.en"
    search = ["--input", str(source), "--beam", "3", "--n-best", "2"]  # with scores
    once = run_here("translate", "--ckpt", ckpt, *search)
    twice = run_here("translate", "--ckpt", ckpt, "--ckpt", ckpt, *search)
    assert once.returncode == twice.returncode == 0, twice.stderr
    assert once.stdout == twice.stdout and "\t" in once.stdout


def test_translate_with_all_the_weight_on_one_member_equals_that_member(
    trained_run, trained_transformer, run_here
):
    ckpt, source = str(trained_run["ckpt"]), trained_run["corpus"] / "test.en"
    search = ["--input", str(source), "--beam", "3", "--n-best", "2"]  # with scores
    alone = run_here("translate", "--ckpt", ckpt, *search)
    both = ["--ckpt", ckpt, "--ckpt", str(trained_transformer)]
    weighted = run_here("translate", *both, "--ensemble-weights", "2", "0", *search)
    assert alone.returncode == weighted.returncode == 0, weighted.stderr
    assert alone.stdout == weighted.stdout


def test_the_old_name_of_an_option_still_works_and_says_the_new_one(
    trained_run, trained_transformer, run_here, caplog
):
    """--ensemble-weight was renamed --ensemble-weights (the Python argument's name): for
    one release the old spelling means the same, with a warning naming the new one."""
    ckpt, source = str(trained_run["ckpt"]), trained_run["corpus"] / "test.en"
    both = ["--ckpt", ckpt, "--ckpt", str(trained_transformer), "--input", str(source),
            "--beam", "3", "--n-best", "2"]  # fmt: skip
    new = run_here("translate", *both, "--ensemble-weights", "3", "1")
    caplog.clear()
    old = run_here("translate", *both, "--ensemble-weight", "3", "1")
    assert new.returncode == old.returncode == 0, old.stderr
    assert old.stdout == new.stdout
    assert "--ensemble-weight is now --ensemble-weights" in caplog.text


@pytest.mark.parametrize(
    ("weights", "complaint"),
    [(["1"], "1 weights given for 2 members"), (["1", "-1"], ">= 0"), (["0", "0"], "all 0")],
)
def test_wrong_ensemble_weights_are_one_line_before_loading(
    trained_run, weights, complaint, run_here
):
    ckpt, source = str(trained_run["ckpt"]), str(trained_run["corpus"] / "test.en")
    result = run_here(
        "translate", "--ckpt", ckpt, "--ckpt", ckpt, "--ensemble-weights", *weights,
        "--input", source,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.startswith("seq2seq: error: --ensemble-weights: ")
    assert complaint in result.stderr and result.stderr.count("\n") == 1


def test_an_rnn_and_a_transformer_evaluate_and_draw_attention_together(
    trained_run, trained_transformer, tmp_path, capsys
):
    rnn_ckpt, source = str(trained_run["ckpt"]), str(trained_run["corpus"] / "test.en")
    reference = str(trained_run["corpus"] / "test.de")
    both = ["--ckpt", rnn_ckpt, "--ckpt", str(trained_transformer)]
    hyp = tmp_path / "hyp.de"
    main(["evaluate", *both, "--src", source, "--ref", reference, "--beam", "2", "--json",
          "--output", str(hyp)])  # fmt: skip
    scores = json.loads(capsys.readouterr().out)
    translations = hyp.read_text(encoding="utf-8").splitlines()
    references = (trained_run["corpus"] / "test.de").read_text(encoding="utf-8").splitlines()
    assert scores["decoding"]["sentences"] == len(translations) == len(references)
    bleu = sacrebleu.corpus_bleu(translations, [references])  # the score of what it wrote
    assert scores["bleu"]["score"] == pytest.approx(bleu.score)
    out = tmp_path / "attention"
    main(["attention", *both, "--src", source, "--limit", "2", "--out", str(out)])
    assert (out / "attention_0001.png").is_file() and (out / "report.html").is_file()
    with pytest.raises(SystemExit) as stop:
        main(["attention", *both, "--ensemble-attention", "2", "--src", source, "--out", str(out)])
    assert stop.value.code == 1  # a one-line error, not a usage error
    assert "--ensemble-attention 2 names no member" in capsys.readouterr().err
