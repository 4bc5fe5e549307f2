"""Looking at what the decoder attends to.

- ``collect``: attention of forced decoding or of the model's own translation;
- ``probe``: local attention's window centres p_t, recorded from outside the module;
- ``maps``: heads as layers x heads, and their aggregates;
- ``heatmap``: one map, a layers x heads grid, local windows, as PNG files;
- ``words``: pieces merged into words; ``links``: hard alignments, symmetrisation,
  Pharaoh format; ``scoring``: AER; ``stats``: corpus statistics.
"""

from seq2seq.alignment.collect import (
    EOS_LABEL,
    SentenceAttention,
    reference_attention,
    translation_attention,
)
from seq2seq.alignment.heatmap import plot_attention

__all__ = [
    "EOS_LABEL",
    "SentenceAttention",
    "plot_attention",
    "reference_attention",
    "translation_attention",
]
