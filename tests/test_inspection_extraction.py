"""Reading links from attention: the map (mean, a layer, a head), the step (own or shifted)
and the rule, on hand-made attention whose answer is known."""

from __future__ import annotations

import pytest
import torch

from seq2seq.common.errors import Seq2SeqError
from seq2seq.inspection import extraction as extraction_module
from seq2seq.inspection.collect import SentenceAttention
from seq2seq.inspection.extraction import (
    MEAN_ARGMAX,
    Extraction,
    extracted_links,
    extracted_links_each,
)

SOURCE = ["▁a", "▁b", "▁c", "</s>"]  # 3 words + EOS
TARGET = ["▁x", "▁y", "▁z", "</s>"]


def peaked(columns: list[int], size: int = 4) -> torch.Tensor:
    """[len(columns), size]: row r puts 0.7 on ``columns[r]``, the rest spread evenly."""
    rows = torch.full((len(columns), size), 0.3 / (size - 1))
    rows[torch.arange(len(columns)), columns] = 0.7
    return rows


def sentence(weights: torch.Tensor) -> SentenceAttention:
    return SentenceAttention(0, "a b c", "x y z", SOURCE, TARGET, weights)


def test_shift_reads_each_piece_from_the_step_that_has_it_as_input():
    # step r (input: piece r - 1) attends to source r - 1: the shifted map is the diagonal
    weights = peaked([2, 0, 1, 2])  # [T + 1, S + 1]
    assert extracted_links(sentence(weights), Extraction(shift=True)) == [(0, 0), (1, 1), (2, 2)]
    assert extracted_links(sentence(weights), MEAN_ARGMAX) == [(0, 1), (1, 2), (2, 0)]


def test_a_layer_or_a_head_is_read_alone():
    weights = (
        peaked([2, 1, 0, 3]).repeat(2, 2, 1, 1).permute(2, 0, 1, 3).clone()
    )  # [T+1, L, H, S+1]
    weights[:, 1, 0] = peaked([0, 1, 2, 3])  # layer 1, head 0: the diagonal
    weights[:, 1, 1] = peaked([0, 1, 2, 3])
    assert extracted_links(sentence(weights), Extraction(layer=1, head=0)) == [
        (0, 0),
        (1, 1),
        (2, 2),
    ]
    assert extracted_links(sentence(weights), Extraction(layer=1)) == [(0, 0), (1, 1), (2, 2)]
    assert extracted_links(sentence(weights), Extraction(layer=0)) == [(0, 2), (1, 1), (2, 0)]
    assert extracted_links(sentence(weights), Extraction(layer=0, head=-1)) == [
        (0, 2),
        (1, 1),
        (2, 0),
    ]


def test_the_threshold_rule_keeps_every_pair_above_it():
    weights = peaked([0, 1, 2, 3])
    weights[0] = torch.tensor([0.45, 0.45, 0.05, 0.05])
    links = extracted_links(sentence(weights), Extraction(method="threshold", threshold=0.4))
    assert links == [(0, 0), (1, 0), (1, 1), (2, 2)]


@pytest.mark.parametrize(
    ("extraction", "message"),
    [(Extraction(head=0), "give the layer too"), (Extraction(layer=0, head=2), "2 heads"),
     (Extraction(layer=2, head=0), "has 2 layer")],
)  # fmt: skip
def test_a_head_or_layer_that_does_not_exist_is_refused(extraction, message):
    weights = torch.rand(4, 2, 2, 4)
    with pytest.raises(Seq2SeqError, match=message):
        extracted_links(sentence(weights), extraction)


def test_names_say_the_choice():
    assert MEAN_ARGMAX.name == "mean"
    assert Extraction(layer=2, head=1, shift=True).name == "layer 2 head 1 + shift"
    assert Extraction(method="threshold", threshold=0.2).name == "mean, threshold 0.2"


def test_extractions_that_share_a_map_build_it_once(monkeypatch: pytest.MonkeyPatch):
    """Each extraction gets extracted_links' links; argmax and mutual argmax of one layer,
    head and step read one word map."""
    weights = peaked([2, 0, 1, 2])
    weights[1] = torch.tensor([0.4, 0.35, 0.2, 0.05])  # x's best source is a, a's best is y
    tried = [
        Extraction(method=method, shift=shift)
        for shift in (False, True)
        for method in ("argmax", "mutual-argmax", "threshold")
    ]
    expected = [extracted_links(sentence(weights), extraction) for extraction in tried]
    assert len({str(links) for links in expected}) > 2  # the rules and steps differ here
    built = []
    word_map = extraction_module.extracted_word_map

    def counted(attention, extraction):
        built.append(extraction.shift)
        return word_map(attention, extraction)

    monkeypatch.setattr(extraction_module, "extracted_word_map", counted)
    assert extracted_links_each(sentence(weights), tried) == expected
    assert built == [False, True]
