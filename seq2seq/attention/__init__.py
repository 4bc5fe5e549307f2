"""Attention mechanisms, all with the call described in ``seq2seq.attention.base``."""

from seq2seq.attention.additive import AdditiveAttention
from seq2seq.attention.base import Attention, GlobalAttention
from seq2seq.attention.dot_product import (
    DistanceAttention,
    MultiHeadAttention,
    ScaledDotProductAttention,
)
from seq2seq.attention.luong import (
    LuongGlobalAttention,
    LuongLocalAttention,
    LuongLocationAttention,
)

__all__ = [
    "AdditiveAttention",
    "Attention",
    "DistanceAttention",
    "GlobalAttention",
    "LuongLocalAttention",
    "LuongLocationAttention",
    "LuongGlobalAttention",
    "MultiHeadAttention",
    "ScaledDotProductAttention",
]
