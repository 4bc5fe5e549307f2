"""The epoch metrics of the task: perplexity, and a split's translations by sentence."""

from __future__ import annotations

import math

import torch

from seq2seq.training.epoch_metrics import Perplexity, SplitTranslations


def test_translations_come_back_by_sentence_index_whatever_the_batch_order():
    translations = SplitTranslations()
    translations.update(torch.tensor([3, 0]), [[7, 8, 9], []])
    translations.update(torch.tensor([1, 2, 3]), [[5], [6, 6], [7, 8, 9]])  # 3 repeated
    assert translations.compute() == {0: [], 1: [5], 2: [6, 6], 3: [7, 8, 9]}


def test_a_new_epoch_starts_empty():
    translations = SplitTranslations()
    translations.update(torch.tensor([0]), [[4]])
    translations.compute()
    translations.reset()
    assert translations.compute() == {}
    translations.update(torch.tensor([1]), [[5, 6]])
    assert translations.compute() == {1: [5, 6]}


def test_perplexity_is_the_exp_of_the_token_weighted_mean_nll():
    perplexity = Perplexity()
    perplexity.update(torch.tensor(3.0), tokens=3)
    perplexity.update(torch.tensor(2.0), tokens=1)
    assert math.isclose(float(perplexity.compute()), math.exp(1.25), rel_tol=1e-6)
    perplexity.update(torch.tensor(1000.0), tokens=1)
    assert math.isfinite(float(perplexity.compute()))  # capped at e^50
