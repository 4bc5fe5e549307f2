"""eflomal and fast_align on the models' training data, with the gold's pairs appended;
their links symmetrized as the trial set chooses, and moved to the words as written for the
guided twin."""

from __future__ import annotations

import argparse
import gzip
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

from scripts.bench.alignment.gold import GoldSet, Pair
from scripts.bench.alignment.names import SHOWN, aligner_row
from seq2seq.inspection.word_alignments import (
    GoldAlignment,
    Link,
    Symmetrization,
    corpus_score,
    sentence_scores,
    symmetrize,
)
from seq2seq.text.pharaoh import format_pharaoh, read_links

SYMMETRIZATIONS: tuple[Symmetrization, ...] = get_args(Symmetrization)


def training_as_written(data: Path, lang: str) -> list[str]:
    """Multi30k's training sentences in ``lang`` as written (stripped)."""
    with gzip.open(data / f"train.{lang}.gz", "rt", encoding="utf-8") as file:
        return [line.strip() for line in file]


def tokenized_training_side(data: Path, lang: str, work: Path) -> list[str]:
    """Multi30k's training sentences in ``lang``, lowercased and Moses-tokenized (cached)."""
    cached = work / f"train.tok.{lang}"
    if not cached.is_file():
        from sacremoses import MosesTokenizer

        tokenizer = MosesTokenizer(lang=lang)
        lines = [
            tokenizer.tokenize(line.lower(), escape=False, return_str=True)
            for line in training_as_written(data, lang)
        ]
        cached.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return cached.read_text(encoding="utf-8").splitlines()


def unseen_share(pairs: Sequence[Pair], training: Sequence[str], side: int) -> float:
    """The share of the set's words (one side, lowercased) that no training line holds."""
    known = {word for line in training for word in line.split()}
    words = [word.lower() for pair in pairs for word in pair[side]]
    return sum(word not in known for word in words) / len(words)


def write_corpus(left: Sequence[str], right: Sequence[str], folder: Path) -> None:
    """``folder``/corpus.{left,right} and fast_align's ``corpus.joined`` (``a ||| b``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.left").write_text("".join(f"{a}\n" for a in left), encoding="utf-8")
    (folder / "corpus.right").write_text("".join(f"{b}\n" for b in right), encoding="utf-8")
    joined = "".join(f"{a} ||| {b}\n" for a, b in zip(left, right, strict=True))
    (folder / "corpus.joined").write_text(joined, encoding="utf-8")


def run_eflomal(folder: Path) -> tuple[list[set[Link]], list[set[Link]]] | str:
    """eflomal's links of every corpus line, both directions (as (left, right)); or why not."""
    binary = shutil.which("eflomal-align", path=str(Path(sys.executable).parent))
    if binary is None:
        return "not installed (pip install eflomal, or make aligners)"
    forward, reverse = folder / "eflomal.forward", folder / "eflomal.reverse"
    subprocess.run(
        [
            binary,
            "-s",
            str(folder / "corpus.left"),
            "-t",
            str(folder / "corpus.right"),
            "-f",
            str(forward),
            "-r",
            str(reverse),
            "--overwrite",
        ],
        check=True,
        capture_output=True,
    )
    return read_links(forward), read_links(reverse)


def run_fast_align(folder: Path, binary: str | None) -> tuple[list[set[Link]], ...] | str:
    """fast_align's links of every corpus line, both directions (as (left, right))."""
    found = binary or shutil.which("fast_align", path=f"{Path(sys.executable).parent}:")
    if found is None or not Path(found).is_file():
        return "not built (make aligners, or --fast-align PATH)"
    directions = []
    for flags, name in [([], "forward"), (["-r"], "reverse")]:
        out = folder / f"fast_align.{name}"
        with out.open("w", encoding="utf-8") as file:
            subprocess.run(
                [found, "-i", str(folder / "corpus.joined"), "-d", "-o", "-v", *flags],
                check=True,
                stdout=file,
                stderr=subprocess.DEVNULL,
            )
        directions.append(read_links(out))
    return tuple(directions)


def statistical_rows(
    gold_set: GoldSet, test: Sequence[Pair], trial: Sequence[Pair], args: argparse.Namespace
) -> dict[str, Any]:
    """eflomal's and fast_align's links of the gold's pairs (trial's, then test's) by each
    symmetrization, and of the test pairs in the left-to-right direction alone; or why a
    system did not run."""
    folder = args.work / gold_set.name.replace(" ", "-")
    left_lang, right_lang = gold_set.langs
    training = (
        tokenized_training_side(args.data, left_lang, args.work),
        tokenized_training_side(args.data, right_lang, args.work),
    )
    appended = [*trial, *test]
    write_corpus(
        [*training[0], *(" ".join(a).lower() for a, _ in appended)],
        [*training[1], *(" ".join(b).lower() for _, b in appended)],
        folder,
    )
    rows: dict[str, Any] = {}
    for system, run in [
        ("eflomal", lambda: run_eflomal(folder)),
        ("fast_align", lambda: run_fast_align(folder, args.fast_align)),
    ]:
        start = time.monotonic()
        found = run()
        if isinstance(found, str):
            rows[system] = found
            continue
        forward, reverse = (links[-len(appended) :] for links in found)
        rows[system] = {
            "gold pairs": {
                how: [symmetrize(f, r, how) for f, r in zip(forward, reverse, strict=True)]
                for how in SYMMETRIZATIONS
            },
            "left to right": list(forward[len(trial) :]),
            "training": tuple(links[: len(training[0])] for links in found),
            "seconds": round(time.monotonic() - start, 1),
        }
    return rows


def token_words(words: Sequence[str], tokens: Sequence[str]) -> list[int] | None:
    """For each token of a tokenized line, the index of the word (of ``words``, the line
    split on spaces, cased as the tokens are) that holds its first character; None when the
    tokens do not spell the words out character for character."""
    owner = [k for k, word in enumerate(words) for _ in word]
    text = "".join(words)
    position, found = 0, []
    for token in tokens:
        if not text.startswith(token, position):
            return None
        found.append(owner[position])
        position += len(token)
    return found if position == len(text) else None


def word_links(
    links: set[Link], left: Sequence[str], right: Sequence[str], tokens: tuple[str, str]
) -> set[Link] | None:
    """Links between tokens (of the Moses-tokenized ``tokens``, left and right) as links
    between the words of the line as written (``left``, ``right``, lowercased); None when
    a side's tokens do not spell its words."""
    left_words = token_words([w.lower() for w in left], tokens[0].split())
    right_words = token_words([w.lower() for w in right], tokens[1].split())
    if left_words is None or right_words is None:
        return None
    return {(left_words[i], right_words[j]) for i, j in links}


def twin_guide(
    written: tuple[Sequence[str], Sequence[str]],
    tokenized: tuple[Sequence[str], Sequence[str]],
    links: Sequence[set[Link]],
    gold_links: Sequence[set[Link]],
) -> tuple[list[str], int]:
    """The guided twin's guide: one Pharaoh line per line of its corpus (Multi30k's training
    pairs as written, then the gold's pairs), eflomal's links of the tokenized training lines
    (``links``, one per line of ``tokenized``) moved to the words as written, then
    ``gold_links`` (the gold's pairs are tokenized already); and how many training lines got
    no links because their tokens do not spell their words."""
    lines, unmapped = [], 0
    for left, right, left_tokens, right_tokens, found in zip(
        *written, *tokenized, links, strict=True
    ):
        moved = word_links(found, left.split(), right.split(), (left_tokens, right_tokens))
        unmapped += moved is None
        lines.append(format_pharaoh(moved or set()))
    return lines + [format_pharaoh(found) for found in gold_links], unmapped


def symmetrization_on_trial(
    links: dict[Symmetrization, list[set[Link]]], trial_gold: Sequence[GoldAlignment]
) -> dict[str, Any]:
    """The symmetrization whose links (``links[how]``: the trial pairs' first) have the
    lowest trial AER, and each one's trial AER; grow-diag-final without a trial set."""
    if not trial_gold:
        return {"chosen": "grow-diag-final", "trial_aer": {}}
    trial_aer = {how: aer_of(trial_gold, found[: len(trial_gold)]) for how, found in links.items()}
    return {"chosen": min(trial_aer, key=lambda how: trial_aer[how]), "trial_aer": trial_aer}


def aer_of(gold: Sequence[GoldAlignment], links: Sequence[set[Link]]) -> float:
    """The corpus AER of ``links`` (1 where the gold has no links to score)."""
    aer = corpus_score(sentence_scores(gold, links)).aer
    return 1.0 if aer is None else aer


def aligner_rows(
    system: str,
    found: dict[str, Any],
    gold_set: GoldSet,
    trial_gold: Sequence[GoldAlignment],
    record: dict[str, Any],
) -> dict[str, list[set[Link]]]:
    """An aligner's test rows: grow-diag-final (the one the others are compared with),
    grow-diag, the symmetrization the trial set chooses (``record["aligner_choice"]``) when
    it is another, and the left-to-right direction alone."""
    left_lang, right_lang = gold_set.langs
    choice = symmetrization_on_trial(found["gold pairs"], trial_gold)
    record.setdefault("aligner_choice", {})[system] = choice
    rows = {
        aligner_row(system, how): found["gold pairs"][how][len(trial_gold) :]
        for how in dict.fromkeys([*SHOWN, choice["chosen"]])
    }
    rows[f"{system}, {left_lang}→{right_lang} only"] = found["left to right"]
    record.setdefault("aligner_seconds", {})[system] = found["seconds"]
    return rows
