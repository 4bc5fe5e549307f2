"""How differently the anchor replica and the published baseline cut Multi30k into subwords.

The replica learns a SentencePiece BPE of 10k pieces over lowercased raw text (our
recipe); the baseline (Wu et al., 2021) learnt 10k joint subword-nmt merges over
lowercased, Moses-tokenized text. Both are learnt here from the training split of both
sides, then compared on the target side of a test split: pieces a sentence, and the Moses
tokens the two cut otherwise (XML escapes such as ``&quot;`` aside). A third, SentencePiece
learnt over the Moses tokens, shows what the tokenization alone changes. Needs subword-nmt,
which seq2seq does not depend on (``pip install subword-nmt``).

    python -m scripts.analysis.compare_segmentation --data data/multi30k compare

To train on the baseline's segmentation, ``write`` copies the corpus cut as the baseline cut
it (lowercased, Moses-tokenized with XML escapes, 10k joint merges, ``@@`` markers), for a
vocabulary of ``spm_model_type: word`` to read as it is; ``seq2seq evaluate --remove-bpe``
(``select_on_val.py train --remove-bpe``) joins the pieces of translations and references
again and scores the tokens, as fairseq's BLEU scores the baseline's:

    python -m scripts.analysis.compare_segmentation write --out data/multi30k-subword-nmt
"""

from __future__ import annotations

import argparse
import gzip
import io
import statistics
from collections import Counter
from collections.abc import Callable
from operator import methodcaller
from pathlib import Path

from seq2seq.common.atomic import write_atomically
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


def subword_nmt(train: list[str], merges: int) -> Callable[[str], str]:
    """subword-nmt's segmentation of a line of Moses tokens, learnt with ``merges`` merges
    on ``train`` (such lines): pieces joined by spaces, ``@@`` ending each that a word goes on
    after."""
    try:
        from subword_nmt.apply_bpe import BPE
        from subword_nmt.learn_bpe import learn_bpe
    except ImportError:
        raise SystemExit("this comparison needs subword-nmt: pip install subword-nmt") from None
    codes = io.StringIO()
    learn_bpe(io.StringIO("\n".join(train) + "\n"), codes, merges)
    codes.seek(0)
    return BPE(codes).process_line


def subword_nmt_cut(segment: Callable[[str], str]) -> Cut:
    """A token's pieces under ``segment`` (see ``subword_nmt``), without the markers."""
    return lambda token: [p.removesuffix("@@") for p in segment(token).split()]


def pieces(tokenizer: Tokenizer) -> list[str]:
    """Every piece of ``tokenizer``'s vocabulary."""
    return tokenizer.id_to_piece(range(tokenizer.size))


def compare(args: argparse.Namespace) -> None:
    train = {lang: read_lines(args.data / f"train.{lang}.gz") for lang in args.pair}
    settings = VocabSettings(vocab_size=args.size, model_type="bpe", lowercase=True)
    spm = Tokenizer.train([line for lines in train.values() for line in lines], settings)
    tokenized = [literature_tokenize(line, lang) for lang, lines in train.items() for line in lines]
    swn = subword_nmt_cut(subword_nmt(tokenized, args.size))
    spm_moses = Tokenizer.train(tokenized, settings)  # the Moses tokenization alone
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


def write(args: argparse.Namespace) -> None:
    """Every ``SPLIT.LANG.gz`` of ``--data`` for the pair, cut as the baseline cut it."""
    tokenized = {
        path.name: [literature_tokenize(line, lang) for line in read_lines(path)]
        for lang in args.pair for path in sorted(args.data.glob(f"*.{lang}.gz"))
    }  # fmt: skip
    train = [f"train.{lang}.gz" for lang in args.pair]
    segment = subword_nmt([line for name in train for line in tokenized[name]], args.size)
    cut = {name: [segment(line) for line in lines] for name, lines in tokenized.items()}
    known = {piece for name in train for line in cut[name] for piece in line.split()}
    args.out.mkdir(parents=True, exist_ok=True)
    for name, lines in cut.items():
        text = gzip.compress("".join(line + "\n" for line in lines).encode())
        write_atomically(args.out / name, methodcaller("write", text))
        pieces = [piece for line in lines for piece in line.split()]
        unseen = sum(piece not in known for piece in pieces)
        print(f"{args.out / name}: {len(lines)} lines, {len(pieces) / len(lines):.2f} pieces a "
              f"line, {unseen} pieces the training split lacks")  # fmt: skip
    print(f"{len(known)} distinct pieces in the training split")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"))
    parser.add_argument("--pair", nargs=2, default=["en", "de"], metavar=("SRC", "TGT"))
    parser.add_argument("--size", type=int, default=10_000, help="pieces, and merges")
    commands = parser.add_subparsers(dest="command", required=True)
    compare_command = commands.add_parser("compare", help="the two segmentations of a test split")
    compare_command.add_argument("--test-split", default="test_2016_flickr")
    write_command = commands.add_parser("write", help="the corpus cut as the baseline cut it")
    write_command.add_argument("--out", type=Path, required=True, help="the new corpus folder")
    args = parser.parse_args()
    {"compare": compare, "write": write}[args.command](args)


if __name__ == "__main__":
    main()
