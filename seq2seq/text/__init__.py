"""Text in and out: ``lines`` (lines read strictly, errors naming the line),
``arriving_lines`` (stdin as it arrives), ``tokenizer`` (SentencePiece vocabularies and
their cache), ``spec`` (``VocabSpec``: the sizes and special ids a model takes),
``metrics`` (sacrebleu BLEU, chrF, TER and the literature's BLEU) and ``demo_corpus`` (the
embedded demo corpus: numbers and dates written out, with gold alignments)."""
