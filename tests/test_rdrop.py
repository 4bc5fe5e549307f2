"""R-Drop (`model.rdrop_alpha`): the batch run twice with independent dropout, the mean of
the two label-smoothed losses plus alpha times their symmetric KL, per target token."""

from __future__ import annotations

import csv
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar
from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from tiny_run import tiny_config, write_config

from seq2seq.batch import Batch
from seq2seq.commands.main import main
from seq2seq.inference.batching import collate
from seq2seq.rnn import RNNSeq2Seq
from seq2seq.text.demo_corpus import write_corpus
from seq2seq.text.tokenizer import VocabSettings, Vocabulary
from seq2seq.training.loss import symmetric_kl
from seq2seq.training.task import TranslationTask
from seq2seq.transformer import Transformer

SENTENCES = ["one two three four", "five six", "seven eight nine", "ten"] * 10
VOCAB = Vocabulary.train(SENTENCES, [s.upper() for s in SENTENCES], VocabSettings(300))
FAMILIES = {
    "transformer": partial(
        Transformer, model_size=16, num_heads=2, ff_size=32, encoder_layers=1, decoder_layers=2
    ),
    "rnn": partial(RNNSeq2Seq, embed_size=8, hidden_size=8),
}
NO_DROPOUT = {
    "transformer": {"dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0},
    "rnn": {"dropout": 0.0},
}
DROPOUT = {
    "transformer": {"dropout": 0.3, "attention_dropout": 0.1, "activation_dropout": 0.1},
    "rnn": {"dropout": 0.3},
}


def task(family: str, dropout: dict[str, float], alpha: float) -> TranslationTask:
    """A task in training mode over a small model of ``family``."""
    torch.manual_seed(0)
    model = partial(FAMILIES[family], **dropout)
    return TranslationTask(model, VOCAB, label_smoothing=0.1, rdrop_alpha=alpha).train()


def forward_rows(model_task: TranslationTask) -> list[int]:
    """The batch rows of each forward of ``model_task``'s model from now on, as a list that
    grows with every call."""
    rows: list[int] = []
    model_task.model.register_forward_hook(lambda _, inputs, __: rows.append(inputs[0].size(0)))
    return rows


def batch() -> Batch:
    """Three pairs of different lengths (so rows are padded), as the data module makes them."""
    pairs = [("one two three four", "ONE TWO THREE FOUR"), ("five", "FIVE SIX"), ("ten", "TEN")]
    examples = [
        {"id": i, "src_ids": VOCAB.src.encode(src), "tgt_ids": VOCAB.tgt.encode(tgt)}
        for i, (src, tgt) in enumerate(pairs)
    ]
    spec = VOCAB.spec
    made = collate(examples, spec.pad_id, spec.bos_id, spec.eos_id)
    assert len(set(made.tgt_lens.tolist())) > 1 and len(set(made.src_lens.tolist())) > 1
    return made


Losses = TypeVar("Losses")


def same_masks(loss: Callable[[Batch], Losses]) -> Losses:
    """``loss`` of ``batch()`` with the random seed set first, so that every call draws the
    same dropout masks."""
    torch.manual_seed(1)
    return loss(batch())


@pytest.mark.parametrize("family", FAMILIES)
def test_without_dropout_the_kl_is_zero_and_the_loss_is_the_plain_one(family: str) -> None:
    rdrop = task(family, NO_DROPOUT[family], alpha=5.0)
    loss, nll, n, kl = rdrop._rdrop_loss(batch())
    plain_loss, plain_nll, plain_n = rdrop._loss(batch())
    # The copies compute the same distributions: bit for bit in the Transformer; the RNN's
    # recurrent kernels round the rows of a larger batch differently in the last bits.
    assert float(kl) <= {"transformer": 0.0, "rnn": 1e-12}[family]
    assert n == plain_n == int(batch().tgt_lens.sum())
    assert torch.allclose(loss, plain_loss, rtol=1e-6)
    assert torch.allclose(nll, plain_nll, rtol=1e-6)


@pytest.mark.parametrize("family", FAMILIES)
def test_at_alpha_0_the_loss_is_the_plain_one_and_the_model_runs_once(family: str) -> None:
    plain = task(family, DROPOUT[family], alpha=0.0)
    rows_seen = forward_rows(plain)
    loss, nll, n, kl = same_masks(plain._training_loss)
    expected = same_masks(plain._loss)
    assert rows_seen == [3, 3]  # one forward of the batch's 3 rows, in each call
    assert kl is None
    assert (loss, nll, n) == expected


@pytest.mark.parametrize("family", FAMILIES)
def test_with_dropout_the_kl_is_positive_and_adds_alpha_times_itself(family: str) -> None:
    rdrop = task(family, DROPOUT[family], alpha=5.0)
    rows_seen = forward_rows(rdrop)
    loss, _, n, kl = same_masks(rdrop._training_loss)
    assert rows_seen == [6]  # one forward over the batch stacked twice
    assert kl > 0
    rdrop.rdrop_alpha = 2.0
    loss_2, _, _, kl_2 = same_masks(rdrop._training_loss)  # only alpha differs
    assert torch.equal(kl, kl_2)
    assert torch.allclose(loss - loss_2, 3.0 / 2 * kl, atol=4e-6)  # a few ulps of the loss


@pytest.mark.parametrize("family", FAMILIES)
def test_the_loss_is_the_reference_criterions_per_token_of_both_copies(family: str) -> None:
    """R-Drop's fairseq criterion, restated: over the batch stacked twice, the summed
    label-smoothed losses of both copies (PyTorch's smoothing, as ours) plus alpha times
    (KL(P_1 || P_2) + KL(P_2 || P_1)) / 2 summed over the valid positions; ours is that
    divided by the 2N target tokens of both copies."""
    alpha = 5.0
    rdrop = task(family, DROPOUT[family], alpha=alpha)
    outputs: list[torch.Tensor] = []
    rdrop.model.register_forward_hook(lambda _, __, output: outputs.append(output[0]))
    loss, _, n, _ = same_masks(rdrop._rdrop_loss)
    logits = outputs[0].float()  # [2B, T, V]
    made = batch()
    valid = torch.arange(logits.size(1)) < made.tgt_lens.unsqueeze(1)  # [B, T]
    both_valid = torch.cat([valid, valid])
    targets = torch.cat([made.tgt_out, made.tgt_out])[both_valid]  # [2N]
    cross_entropies = F.cross_entropy(
        logits[both_valid], targets, label_smoothing=rdrop.label_smoothing, reduction="sum"
    )
    log_p = logits.log_softmax(-1)
    B = made.src.size(0)
    first, second = log_p[:B][valid], log_p[B:][valid]  # [N, V] each
    kl_12 = F.kl_div(second, first, log_target=True, reduction="sum")  # KL(P_1 || P_2)
    kl_21 = F.kl_div(first, second, log_target=True, reduction="sum")
    reference = cross_entropies + alpha * (kl_12 + kl_21) / 2
    assert torch.allclose(loss, reference / (2 * n), rtol=1e-5)


def test_the_symmetric_kl_is_half_the_sum_of_both_directions_on_valid_positions() -> None:
    torch.manual_seed(3)
    a, b = torch.randn(2, 4, 7), torch.randn(2, 4, 7)
    lengths = torch.tensor([4, 2])
    valid = torch.arange(4) < lengths.unsqueeze(1)
    log_a, log_b = a[valid].log_softmax(-1), b[valid].log_softmax(-1)
    a_b = F.kl_div(log_b, log_a, log_target=True, reduction="sum")  # KL(P_a || P_b)
    b_a = F.kl_div(log_a, log_b, log_target=True, reduction="sum")
    assert torch.allclose(symmetric_kl(a, b, lengths), (a_b + b_a) / 2)
    assert symmetric_kl(a, a, lengths) == 0.0


def test_the_kl_gradients_are_those_of_the_two_directions_written_out() -> None:
    """symmetric_kl's own backward against autograd through F.kl_div, in float64, with a
    padded position that must get no gradient."""
    torch.manual_seed(4)
    a = torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([3, 2])
    weight = torch.tensor(1.7, dtype=torch.float64)  # a gradient other than 1 flows in
    (weight * symmetric_kl(a, b, lengths)).backward()
    fused = a.grad.clone(), b.grad.clone()
    a.grad = b.grad = None
    valid = torch.arange(3) < lengths.unsqueeze(1)
    log_a, log_b = a[valid].log_softmax(-1), b[valid].log_softmax(-1)
    a_b = F.kl_div(log_b, log_a, log_target=True, reduction="sum")
    b_a = F.kl_div(log_a, log_b, log_target=True, reduction="sum")
    (weight * (a_b + b_a) / 2).backward()
    for mine, reference in zip(fused, (a.grad, b.grad), strict=True):
        assert torch.allclose(mine, reference, atol=1e-12)
        assert mine[1, 2].abs().sum() == 0
    assert torch.autograd.gradcheck(lambda x, y: symmetric_kl(x, y, lengths), (a, b))


def test_the_kl_keeps_fp32_inside_under_bf16_autocast_and_takes_bf16_logits() -> None:
    torch.manual_seed(5)
    a, b = torch.randn(3, 5, 400), torch.randn(3, 5, 400)
    lengths = torch.tensor([5, 4, 1])
    exact = symmetric_kl(a, b, lengths)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.allclose(symmetric_kl(a, b, lengths), exact, rtol=1e-6)
    low_a = a.bfloat16().requires_grad_()
    low = symmetric_kl(low_a, b.bfloat16(), lengths)
    low.backward()
    assert low.dtype == torch.float32 and low_a.grad.dtype == torch.bfloat16
    assert torch.allclose(low, exact, rtol=1e-2)


def test_padding_positions_contribute_nothing_whatever_their_ids_or_logits() -> None:
    torch.manual_seed(3)
    a, b = torch.randn(2, 4, 7), torch.randn(2, 4, 7)
    lengths = torch.tensor([4, 2])
    garbage_a, garbage_b = a.clone(), b.clone()
    garbage_a[1, 2:], garbage_b[1, 2:] = float("inf"), -1e30
    assert symmetric_kl(garbage_a, garbage_b, lengths) == symmetric_kl(a, b, lengths)

    rdrop = task("transformer", DROPOUT["transformer"], alpha=5.0)
    original, changed = batch(), batch()
    for ids, lens in [("src", "src_lens"), ("tgt_in", "tgt_lens"), ("tgt_out", "tgt_lens")]:
        tensor = getattr(changed, ids)
        past = torch.arange(tensor.size(1)) >= getattr(changed, lens).unsqueeze(1)
        tensor[past] = 5  # a real piece where the pad id was
    assert not torch.equal(changed.tgt_out, original.tgt_out)
    results = []
    for made in (original, changed):
        torch.manual_seed(1)  # the same dropout masks (they depend on shapes, not ids)
        results.append(rdrop._rdrop_loss(made))
    for before, after in zip(*results, strict=True):
        assert torch.allclose(torch.as_tensor(before), torch.as_tensor(after), rtol=1e-6)


@pytest.mark.parametrize("family", FAMILIES)
def test_gradients_of_the_loss_and_of_its_kl_term_reach_every_parameter(family: str) -> None:
    rdrop = task(family, DROPOUT[family], alpha=5.0)
    with_kl, *_ = same_masks(rdrop._rdrop_loss)
    rdrop.rdrop_alpha = 0.0
    without_kl, *_ = same_masks(rdrop._rdrop_loss)
    for loss in (with_kl, with_kl - without_kl):  # the whole loss; 5 x the KL alone
        rdrop.zero_grad()
        loss.backward(retain_graph=True)
        for name, parameter in rdrop.named_parameters():
            assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def fit_config(tmp_path: Path) -> Path:
    """The tiny run of the CLI tests on a small Transformer with dropout."""
    corpus = tmp_path / "corpus"
    write_corpus(corpus, seed=3, sizes={"train": 200, "val": 8, "test": 8})
    config = tiny_config(tmp_path, corpus)
    config["trainer"]["max_epochs"] = 1
    config["model"]["network"] = {
        "class_path": "seq2seq.transformer.Transformer",
        "init_args": {
            "model_size": 16, "num_heads": 2, "ff_size": 32, "encoder_layers": 1,
            "decoder_layers": 1, "dropout": 0.3,
        },
    }  # fmt: skip
    return write_config(tmp_path / "tiny.yaml", config)


@pytest.mark.slow  # a fit
def test_a_fit_with_rdrop_trains_and_logs_the_kl(tmp_path: Path) -> None:
    with mock.patch.object(sys, "argv", ["seq2seq"]):  # not pytest's arguments
        main(["fit", "--config", str(fit_config(tmp_path)), "--model.rdrop_alpha", "5"])
    with open(tmp_path / "run/logs/version_0/metrics.csv") as file:
        rows = list(csv.DictReader(file))
    kl = [float(row["train_rdrop_kl_step"]) for row in rows if row.get("train_rdrop_kl_step")]
    assert kl and all(value > 0 for value in kl)
    assert any(row.get("train_rdrop_kl_epoch") for row in rows)
    assert (tmp_path / "run/checkpoints/last.ckpt").is_file()


def test_a_negative_alpha_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with mock.patch.object(sys, "argv", ["seq2seq"]), pytest.raises(SystemExit) as stopped:
        main(["fit", "--config", str(fit_config(tmp_path)), "--model.rdrop_alpha", "-1"])
    err = capsys.readouterr().err
    assert stopped.value.code == 1 and "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("seq2seq: error: ")]
    assert errors == ["seq2seq: error: model.rdrop_alpha must be a number >= 0, got -1.0"]
    assert not (tmp_path / "run/checkpoints").exists()  # refused before any training
