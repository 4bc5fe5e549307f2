"""``seq2seq corpus``: the embedded corpus written as parallel text files. Its generator
(babel, num2words) is imported by the command alone."""

from __future__ import annotations

from pathlib import Path

from seq2seq.commands.options import command


@command
def corpus(out: str, seed: int = 1, src_lang: str = "en", tgt_lang: str = "de") -> None:
    """Write the embedded corpus as parallel text files.

    The corpus `make demo` and the tests train on: numbers and dates, written out.

    Args:
        out: folder to write {split}.{lang} files into
        seed: the draw of sentence pairs
        src_lang: source language code
        tgt_lang: target language code
    """
    from seq2seq.text.demo_corpus import write_corpus

    paths = write_corpus(Path(out), seed=seed, src_lang=src_lang, tgt_lang=tgt_lang)
    for path in paths.values():
        print(path)
