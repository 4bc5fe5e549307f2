"""Attention mechanisms, all with the call described in ``seq2seq.attention.base``."""

from seq2seq.attention.additive import AdditiveAttention
from seq2seq.attention.base import Attention, GlobalAttention
from seq2seq.attention.dot_product import (
    DistanceAttention,
    MultiHeadAttention,
    ScaledDotProductAttention,
)

__all__ = [
    "AdditiveAttention",
    "Attention",
    "DistanceAttention",
    "GlobalAttention",
    "MultiHeadAttention",
    "ScaledDotProductAttention",
]
