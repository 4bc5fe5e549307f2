"""Text in and out: ``lines`` (lines read strictly, errors naming the line),
``arriving_lines`` (stdin as it arrives), ``tokenizer`` (SentencePiece vocabularies and
their cache) and ``metrics`` (sacrebleu BLEU, chrF, TER and the literature's BLEU)."""
