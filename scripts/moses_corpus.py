"""A Moses-tokenised copy of a parallel corpus folder: the tokens the published Multi30k
baseline (Wu et al., 2021) learnt its BPE and trained on, so that the anchor replica can be
run on them and the one setting it could not match (the segmentation) measured.

Every ``{split}.{lang}[.gz]`` file directly in SRC is written to OUT as
``{split}.{lang}.gz``, line for line: lowercased, Moses-normalised and Moses-tokenised as the
literature BLEU's references are (``seq2seq.text.metrics.literature_tokenize``), without
XML escaping. A model trained on it writes ``'`` and ``"``, which the literature BLEU
tokenises again to the tokens of the references: for German (the anchor's target side) the
second tokenisation changes nothing, while English splits an apostrophe twice
(``don 't`` -> ``don ' t``), so an English target would lose BLEU to it. OUT appears whole
or not at all.

    python scripts/moses_corpus.py data/multi30k data/multi30k-moses --langs en de
"""

from __future__ import annotations

import argparse
import gzip
import re
from pathlib import Path

from tqdm import tqdm

from seq2seq.common.atomic import atomic_folder
from seq2seq.text.lines import iter_lines
from seq2seq.text.metrics import literature_tokenize

CORPUS_FILE = re.compile(r"(?P<split>[^.]+)\.(?P<lang>[a-z]{2,3})(\.gz)?")


def corpus_files(folder: Path, langs: list[str] | None) -> dict[Path, str]:
    """The ``{split}.{lang}[.gz]`` files directly in ``folder`` (of ``langs``, where given),
    each with its language."""
    files = {}
    for path in sorted(folder.iterdir()):
        name = CORPUS_FILE.fullmatch(path.name)
        if path.is_file() and name and (langs is None or name["lang"] in langs):
            files[path] = name["lang"]
    if not files:
        raise SystemExit(f"{folder}: no {{split}}.{{lang}}[.gz] files to tokenise")
    return files


def tokenise_corpus(src: Path, out: Path, langs: list[str] | None = None) -> list[Path]:
    """Write the tokenised copy of ``src``'s corpus files into ``out``; the paths written."""
    files = corpus_files(src, langs)
    written = []
    with atomic_folder(out) as folder:
        for path, lang in tqdm(files.items(), desc="tokenising", unit="file"):
            target = folder / f"{path.name.removesuffix('.gz')}.gz"
            with gzip.open(target, "wt", encoding="utf-8") as file:
                for line in iter_lines(path):
                    file.write(literature_tokenize(line, lang, escape=False) + "\n")
            written.append(out / target.name)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src", type=Path, help="a folder of {split}.{lang}[.gz] files")
    parser.add_argument("out", type=Path, help="the folder to write (must not exist)")
    parser.add_argument("--langs", nargs="+", help="only these languages (default: all)")
    args = parser.parse_args()
    if args.out.exists():
        raise SystemExit(f"{args.out} exists: remove it to write it again")
    for path in tokenise_corpus(args.src, args.out, args.langs):
        print(path)


if __name__ == "__main__":
    main()
