"""Inspecting what the decoder attends to: collection, heatmaps, word alignments, AER,
statistics and an HTML report.

- ``collect``: attention of forced decoding or of the model's own translation, and local
  attention's window centers p_t, recorded by a forward hook;
- ``maps``: heads as layers x heads, aggregates; ``words``: pieces merged into words;
- ``word_alignments``: hard links, symmetrization, Pharaoh format, AER against gold;
- ``stats``: corpus statistics; ``heatmap``: PNGs; ``report``: HTML;
- ``pipeline``: all of it over a corpus, as ``seq2seq attention`` runs it.

Every name is imported from the module that defines it; this file imports nothing.
"""
