"""Looking at what the decoder attends to: collection, heatmaps, word alignments, AER,
statistics and an HTML report.

- ``collect``: attention of forced decoding or of the model's own translation;
- ``probe``: local attention's window centres p_t, recorded from outside the module;
- ``maps``: heads as layers x heads, aggregates; ``words``: pieces merged into words;
- ``links``: hard alignments, symmetrisation, Pharaoh format; ``scoring``: AER;
- ``stats``: corpus statistics; ``heatmap`` / ``positional``: PNGs; ``report``: HTML;
- ``pipeline``: all of it over a corpus, as ``seq2seq attention`` runs it.
"""

from seq2seq.alignment.collect import SentenceAttention, reference_attention, translation_attention
from seq2seq.alignment.pipeline import Inspection, InspectOptions, inspect_attention
from seq2seq.alignment.positional import plot_positional_encoding
from seq2seq.alignment.scoring import AlignmentScore, read_gold, read_links, score_alignments
from seq2seq.alignment.stats import format_summary

__all__ = [
    "AlignmentScore",
    "InspectOptions",
    "Inspection",
    "SentenceAttention",
    "format_summary",
    "inspect_attention",
    "plot_positional_encoding",
    "read_gold",
    "read_links",
    "reference_attention",
    "score_alignments",
    "translation_attention",
]
