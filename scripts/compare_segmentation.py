"""How differently the anchor replica and the published baseline cut Multi30k into subwords.

The replica learns a SentencePiece BPE of 10k pieces over lowercased raw text (our
recipe); the baseline (Wu et al., 2021) learnt 10k joint subword-nmt merges over
lowercased, Moses-tokenised text. Both are learnt here from the training split of both
sides, then compared on the target side of a test split: pieces a sentence, and the Moses
tokens the two cut otherwise (XML escapes such as ``&quot;`` aside). A third, SentencePiece
learnt over the Moses tokens, shows what the tokenisation alone changes. Needs subword-nmt,
which seq2seq does not depend on (``pip install subword-nmt``).

    python scripts/compare_segmentation.py --data data/multi30k
"""

from __future__ import annotations

import argparse
import io
import statistics
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from seq2seq.text.lines import read_lines
from seq2seq.text.metrics import literature_tokenize
from seq2seq.text.tokenizer import Tokenizer, VocabSettings

Cut = Callable[[str], list[str]]  # a Moses token -> its subwords, without markers


def differently_cut(tokens: list[str], first: Cut, second: Cut) -> Counter[str]:
    """The tokens (with their counts) that ``first`` and ``second`` cut otherwise."""
    return Counter(token for token in tokens if first(token) != second(token))


def sentencepiece_cut(tokenizer: Tokenizer) -> Cut:
    """A token's SentencePiece pieces, the word-start marker dropped."""
    return lambda token: [p.lstrip("▁") for p in tokenizer.pieces(token) if p != "▁"]


def subword_nmt_cut(train: list[str], merges: int) -> Cut:
    """A token's pieces under ``merges`` subword-nmt merges learnt on ``train``, the
    continuation marker (``@@``) dropped."""
    try:
        from subword_nmt.apply_bpe import BPE
        from subword_nmt.learn_bpe import learn_bpe
    except ImportError:
        raise SystemExit("this comparison needs subword-nmt: pip install subword-nmt") from None
    codes = io.StringIO()
    learn_bpe(io.StringIO("\n".join(train) + "\n"), codes, merges)
    codes.seek(0)
    bpe = BPE(codes)
    return lambda token: [p.removesuffix("@@") for p in bpe.process_line(token).split()]


def pieces(tokenizer: Tokenizer) -> list[str]:
    """Every piece of ``tokenizer``'s vocabulary."""
    return tokenizer.id_to_piece(range(tokenizer.size))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"))
    parser.add_argument("--pair", nargs=2, default=["en", "de"], metavar=("SRC", "TGT"))
    parser.add_argument("--test-split", default="test_2016_flickr")
    parser.add_argument("--size", type=int, default=10_000, help="pieces, and merges")
    args = parser.parse_args()
    train = {lang: read_lines(args.data / f"train.{lang}.gz") for lang in args.pair}
    settings = VocabSettings(vocab_size=args.size, model_type="bpe", lowercase=True)
    spm = Tokenizer.train([line for lines in train.values() for line in lines], settings)
    tokenised = [literature_tokenize(line, lang) for lang, lines in train.items() for line in lines]
    swn = subword_nmt_cut(tokenised, args.size)
    spm_moses = Tokenizer.train(tokenised, settings)  # the Moses tokenisation alone
    target = args.pair[1]
    test = read_lines(args.data / f"{args.test_split}.{target}.gz")
    moses = [literature_tokenize(line, target).split() for line in test]
    tokens = [token for sentence in moses for token in sentence if "&" not in token]
    differ = differently_cut(tokens, sentencepiece_cut(spm), swn)
    swn_pieces = [sum(len(swn(token)) for token in sentence) for sentence in moses]
    print(f"{args.test_split}.{target}, {len(test)} sentences, {len(tokens)} Moses tokens")
    spm_pieces = [len(spm.pieces(line)) for line in test]
    print(f"pieces a sentence: SentencePiece {statistics.mean(spm_pieces):.2f}, "
          f"subword-nmt {statistics.mean(swn_pieces):.2f}")  # fmt: skip
    print(f"tokens cut otherwise: {differ.total()} ({100 * differ.total() / len(tokens):.1f}%)")
    held = sum(any(token in differ for token in sentence) for sentence in moses)
    print(f"sentences holding one or more: {held} of {len(test)}")
    print("most frequent:", ", ".join(f"{token} {count}" for token, count in differ.most_common(8)))
    shared = set(pieces(spm)) & set(pieces(spm_moses))
    moses_pieces = [len(spm_moses.pieces(" ".join(sentence))) for sentence in moses]
    print(f"SentencePiece over Moses tokens: {len(shared)} of its {spm_moses.size} pieces "
          f"ours too, {statistics.mean(moses_pieces):.2f} pieces a sentence")  # fmt: skip


if __name__ == "__main__":
    main()
