"""Attention mechanisms, all with the call described in ``seq2seq.attention.base``."""

from seq2seq.attention.additive import AdditiveAttention
from seq2seq.attention.base import Attention

__all__ = ["AdditiveAttention", "Attention"]
