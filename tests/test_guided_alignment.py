"""Guided alignment: the guide a batch carries, the loss it adds, and a model whose guided
head learns the links it is given (the tiny corpus's gold links, by `seq2seq fit`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny_run import tiny_config, write_config

import seq2seq
from seq2seq.commands.main import main
from seq2seq.common.errors import DataError, Seq2SeqError
from seq2seq.inspection.word_alignments import parse_gold_line, read_gold, score_alignments
from seq2seq.training.guided_alignment import (
    guided_alignment_loss,
    head_weights,
    piece_guide,
    read_training_links,
)


def test_the_guide_spreads_each_piece_over_its_linked_source_pieces_one_step_later():
    src, tgt = ["▁a", "b", "▁c"], ["▁x", "▁y", "z"]  # words: ab c / x yz
    guide = piece_guide([(1, 0), (0, 1), (5, 5)], src, tgt)  # 5-5 points past both: left out
    assert guide.tolist() == [
        [0, 0, 0, 0],  # step 0 (input BOS) teaches nothing
        [0, 0, 1, 0],  # input x (word 0) -> c
        [0.5, 0.5, 0, 0],  # input y, then z (word 1) -> a b
        [0.5, 0.5, 0, 0],
    ]  # the last column is the source EOS, which no word is


def test_training_links_must_match_the_split_line_by_line(tmp_path: Path):
    links = tmp_path / "train.links"
    links.write_text("0-0 1-2\n\n")
    assert read_training_links(links, 2) == [[(0, 0), (1, 2)], []]
    with pytest.raises(DataError, match="2 lines of links but the training split has 3 pairs"):
        read_training_links(links, 3)
    links.write_text("0-0 1p2\n")
    with pytest.raises(DataError, match=r"train.links:1: '0-0 1p2' is not Pharaoh links"):
        read_training_links(links, 1)


def test_the_loss_is_the_cross_entropy_per_guided_row_of_one_head():
    guide = torch.zeros(1, 3, 2)
    guide[0, 1] = torch.tensor([1.0, 0.0])
    guide[0, 2] = torch.tensor([0.5, 0.5])
    attention = torch.full((1, 2, 4, 3, 2), 0.5, requires_grad=True)  # [B, L, H, T, S]
    loss = guided_alignment_loss(head_weights(attention, -2, 1), guide)
    assert loss.item() == pytest.approx((-torch.tensor(0.5).log()).item())  # both rows: log 2
    loss.backward()
    touched = attention.grad.abs().sum(dim=(0, 3, 4))  # [L, H]
    assert touched.nonzero().tolist() == [[0, 1]]  # layer -2 of 2 is 0; head 1 alone
    with pytest.raises(Seq2SeqError, match="model.guided_layer 2 and model.guided_head 0"):
        head_weights(attention, 2, 0)


def fit_transformer(root: Path, corpus: Path, *options: str) -> Path:
    """A 1+2-layer Transformer fitted on ``corpus``; its last checkpoint."""
    root.mkdir(parents=True, exist_ok=True)
    config = tiny_config(root, corpus)
    config["trainer"]["max_epochs"] = 8
    config["model"]["network"] = {
        "class_path": "seq2seq.transformer.Transformer",
        "init_args": {"model_size": 32, "num_heads": 2, "ff_size": 64, "encoder_layers": 1,
                      "decoder_layers": 2, "dropout": 0.0},
    }  # fmt: skip
    main(["fit", "--config", str(write_config(root / "config.yaml", config)), *options])
    return root / "run" / "checkpoints" / "last.ckpt"


def test_a_guided_head_learns_the_links_it_is_given(trained_run, tmp_path: Path):
    """Taught the gold's sure links of the training pairs, the guided head, read on the step
    it was taught on (Shift-Att's), aligns the test pairs far better than the same head of
    the same model trained without them."""
    corpus = trained_run["corpus"]
    gold_lines = (corpus / "train.align").read_text(encoding="utf-8").splitlines()
    sure = [" ".join(f"{i}-{j}" for i, j in sorted(parse_gold_line(line).sure))
            for line in gold_lines]  # fmt: skip
    links = tmp_path / "train.links"
    links.write_text("".join(line + "\n" for line in sure), encoding="utf-8")
    guided = fit_transformer(tmp_path / "guided", corpus, "--data.train_alignments", str(links),
                             "--model.guided_alignment", "5.0")  # fmt: skip
    plain = fit_transformer(tmp_path / "plain", corpus)
    sources = (corpus / "test.en").read_text(encoding="utf-8").splitlines()
    targets = (corpus / "test.de").read_text(encoding="utf-8").splitlines()
    gold = read_gold(corpus / "test.align")
    aer = {}
    for name, checkpoint in [("guided", guided), ("plain", plain)]:
        found = seq2seq.load(checkpoint).align(sources, targets, layer=0, head=0, shift=True)
        aer[name] = score_alignments(gold, [set(links) for links in found]).aer
    # 8 epochs of a 32-wide model on 400 pairs: far from aligning perfectly, far from chance
    assert aer["guided"] < 0.6 * aer["plain"], aer


def test_a_weight_without_links_or_links_without_a_weight_are_refused(
    trained_run, tmp_path: Path, capsys
):
    links = tmp_path / "train.links"
    links.write_text("0-0\n" * 400)
    for options, message in [
        (["--model.guided_alignment", "0.5"], "needs the word links of the training pairs"),
        (["--data.train_alignments", str(links)], "is given but model.guided_alignment is 0"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            fit_transformer(tmp_path / message[:5], trained_run["corpus"], *options)
        assert exit_info.value.code == 2 and message in capsys.readouterr().err
        assert not (tmp_path / message[:5] / "cache").exists()  # refused before any work
