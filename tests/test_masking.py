import pytest
import torch

from seq2seq.masking import masked_softmax, sequence_mask

# Every test here runs on --device: the CPU by default, a GPU with `pytest --device cuda`.
pytestmark = pytest.mark.usefixtures("on_device")


def test_sequence_mask_marks_valid_positions():
    mask = sequence_mask(torch.tensor([3, 0, 5]), 5)
    assert mask.tolist() == [
        [True, True, True, False, False],
        [False] * 5,
        [True] * 5,
    ]


def test_masked_softmax_with_one_length_per_sentence():
    scores = torch.randn(3, 4, 6)  # [B, Tq, S]
    lens = torch.tensor([6, 2, 1])
    weights = masked_softmax(scores, lens)
    assert weights.shape == scores.shape
    assert (weights >= 0).all()
    for b, length in enumerate(lens.tolist()):
        assert torch.allclose(weights[b].sum(-1), torch.ones(4))
        assert (weights[b, :, length:] == 0).all()
        expected = torch.softmax(scores[b, :, :length], dim=-1)
        assert torch.allclose(weights[b, :, :length], expected)


def test_masked_softmax_with_one_length_per_query():
    scores = torch.randn(2, 3, 5)
    lens = torch.tensor([[1, 3, 5], [2, 0, 4]])  # [B, Tq]
    weights = masked_softmax(scores, lens)
    for b in range(2):
        for q in range(3):
            length = int(lens[b, q])
            assert (weights[b, q, length:] == 0).all()
            total = weights[b, q].sum()
            assert torch.isclose(total, torch.tensor(1.0 if length else 0.0))


def test_masked_softmax_broadcasts_over_heads():
    scores = torch.randn(2, 4, 3, 5)  # [B, H, Tq, S]
    weights = masked_softmax(scores, torch.tensor([2, 5]))
    assert (weights[0, :, :, 2:] == 0).all()
    assert torch.allclose(weights.sum(-1), torch.ones(2, 4, 3))


def test_empty_rows_give_zeros_not_nan():
    scores = torch.randn(2, 3, 4)
    weights = masked_softmax(scores, torch.tensor([0, 4]))
    assert not torch.isnan(weights).any()
    assert (weights[0] == 0).all()


def test_masked_positions_are_exactly_zero_even_with_huge_scores():
    scores = torch.zeros(1, 1, 4)
    scores[0, 0, 3] = 1e30  # a padded key with an enormous score
    weights = masked_softmax(scores, torch.tensor([3]))
    assert weights[0, 0, 3] == 0
    assert torch.allclose(weights[0, 0, :3], torch.full((3,), 1 / 3))
