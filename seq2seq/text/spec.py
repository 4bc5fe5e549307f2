"""What a model needs to know about its vocabularies: sizes and special ids. The
tokenizer (``text/tokenizer.py``) gives it; the model families (``model.py``) take it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VocabSpec:
    """What a model needs to know about its vocabularies."""

    src_size: int
    tgt_size: int
    pad_id: int
    bos_id: int
    eos_id: int
    joint: bool  # one vocabulary (same ids) on both sides: embeddings may be shared
