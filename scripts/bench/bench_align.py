"""Word alignments on human gold: a released model's attention beside eflomal and fast_align,
each trained on the same data.

The gold sets (``--gold``, laid out as in their README: ``make alignment-gold`` links them):
En-Fr Hansards of the WPT 2003 task (447 test pairs; its 37-pair trial set is the only set
anything is chosen on) and 100 lowercased Europarl De-En pairs (sure links only, no trial
set: a second-language check). Words are the gold files' own (split on spaces) for every
system; a model's subword links become word links as ``seq2seq attention`` makes them.

- **eflomal** and **fast_align** (``-d -o -v``) align Multi30k's training pairs of the
  language pair (lowercased, Moses-tokenized) with the gold's trial and test pairs appended,
  lowercased, in both directions, symmetrized by grow-diag-final (the row the others are
  compared with), grow-diag and the symmetrization the trial set chooses: the unsupervised
  aligners see the test pairs, never their links. eflomal comes with ``pip install eflomal``
  (a C compiler), fast_align is built from its sources (``make aligners``); a missing one is
  a row that says so.
- **seq2seq**: the released model of the pair (``multi30k-en-fr``; ``multi30k-en-de``
  forced on the De-En gold's English side, its links turned round) teacher-forced on the
  gold pairs as they are written. Its rows: the mean over layers and heads (what
  ``attention`` and ``translate --alignment`` read), and the extraction the trial set
  chooses among every layer and head, each with and without Shift-Att, each read by
  argmax (one link per target word) and by mutual argmax (only the pairs that are each
  other's best match). Also that model
  trained further on the gold's sentence pairs (``--finetune-steps``); guided-alignment
  twins (``--guided-steps``: trained further on Multi30k with and without a head that learns
  eflomal's links of the tokenized text above, symmetrized as the trial set chose, moved to
  the words as written), the guided one then also on the gold's pairs with eflomal's links
  of them; and (``--reverse``) a model of the other
  direction trained here by the same recipe (``--reverse-minutes`` at most), whose links are
  symmetrized with the forward models' (grow-diag-final, grow-diag, and the trial's choice),
  and which is also trained on the gold's pairs with eflomal's links turned round, to be
  joined with the forward guided model. ``--hf`` adds a MarianMT model of transformers
  (OPUS-MT's English-French, say) read on the En-Fr set as the released model is.

For each set and system: AER with a 95% sentence-level bootstrap interval, precision,
recall, and the AER difference from eflomal with its paired interval; for each set, the
share of its words that Multi30k's training text never holds. Writes ``WORK/results.json``,
``--doc`` (a markdown page) and a picture of one sentence aligned by each system.

    python -m scripts.bench.bench_align --gold data/alignment --data data/multi30k \\
        --work runs/bench/align --doc docs/benchmarks/alignment.md
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import seq2seq
from scripts.bench.benchkit import cpu_model, figure, load_json, markdown_table, save_json
from seq2seq.common.precision import Machine
from seq2seq.inspection.word_alignments import (
    AlignmentScore,
    GoldAlignment,
    Link,
    Symmetrization,
    aer_interval,
    corpus_score,
    drop_outside,
    read_gold,
    sentence_scores,
    symmetrize,
    transpose,
)
from seq2seq.text.pharaoh import format_pharaoh, parse_links, read_links

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "configs" / "finetune.yaml"
Pair = tuple[list[str], list[str]]  # the words of the left and of the right side
SYMMETRIZATIONS: tuple[Symmetrization, ...] = get_args(Symmetrization)
SHOWN = ("grow-diag-final", "grow-diag")  # every pair of directions' rows; grow-diag-final first


@dataclass(frozen=True)
class GoldSet:
    """A gold set: its sentence and link files (under ``--gold``), its languages (left,
    right), its trial files if any, and the released model that translates between them
    (``model_left_to_right`` False: it translates right to left)."""

    name: str
    text: str
    links: str
    langs: tuple[str, str]
    model: str
    model_left_to_right: bool = True
    trial_text: str | None = None
    trial_links: str | None = None
    reverse_recipe: tuple[str, ...] = ()  # the model's recipe, which trains the other way


SETS = [
    GoldSet(
        "En-Fr Hansards",
        "en-fr.hansards-wpt03/enfr.src-tgt",
        "en-fr.hansards-wpt03/enfr.gold",
        ("en", "fr"),
        "multi30k-en-fr",
        trial_text="en-fr.hansards-wpt03/trial/enfr.trial.src-tgt",
        trial_links="en-fr.hansards-wpt03/trial/enfr.trial.gold",
        reverse_recipe=(
            "configs/multi30k/base/transformer.yaml",
            "configs/multi30k/en-fr/transformer.yaml",
        ),
    ),
    GoldSet(
        "De-En Europarl",
        "de-en.europarl-bicici-100/de-en.src-tgt",
        "de-en.europarl-bicici-100/de-en.talp",
        ("de", "en"),
        "multi30k-en-de",
        model_left_to_right=False,
    ),
]


def read_pairs(path: Path) -> list[Pair]:
    """The words of each ``left ||| right`` line."""
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        left, _, right = line.partition(" ||| ")
        pairs.append((left.split(), right.split()))
    return pairs


def read_set(root: Path, text: str, links: str) -> tuple[list[Pair], list[GoldAlignment]]:
    """A set's pairs and gold links (1-indexed in the files), without any link that points
    past its sentence (each said)."""
    pairs = read_pairs(root / text)
    gold, dropped = drop_outside(
        read_gold(root / links, one_indexed=True), [(len(a), len(b)) for a, b in pairs]
    )
    for message in dropped:
        print(f"{links} {message}: dropped", file=sys.stderr)
    return pairs, gold


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
        with gzip.open(data / f"train.{lang}.gz", "rt", encoding="utf-8") as file:
            lines = [
                tokenizer.tokenize(line.strip().lower(), escape=False, return_str=True)
                for line in file
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


def scored(
    gold: Sequence[GoldAlignment], hyp: Sequence[set[Link]], baseline: list[AlignmentScore] | None
) -> dict[str, Any]:
    """AER (with its interval), precision, recall; with ``baseline`` (eflomal's sentence
    counts) the AER difference's paired interval."""
    sentences = sentence_scores(gold, hyp)
    score = corpus_score(sentences)
    record: dict[str, Any] = {
        "aer": score.aer,
        "aer_interval": aer_interval(sentences),
        "precision": score.precision,
        "recall": score.recall,
        "links": score.hyp,
    }
    if baseline is not None:
        record["vs_eflomal"] = aer_interval(sentences, baseline=baseline)
    return record


def model_links(
    model: Any, pairs: Sequence[Pair], left_to_right: bool, **extraction: Any
) -> list[set[Link]]:
    """The model's links of each gold pair, forced on the side it translates into, as
    (left, right)."""
    return model_links_each(model, pairs, left_to_right, [extraction])[0]


def model_links_each(
    model: Any, pairs: Sequence[Pair], left_to_right: bool, extractions: Sequence[dict[str, Any]]
) -> list[list[set[Link]]]:
    """``model_links`` by each of ``extractions``, from one forced decoding of the pairs."""
    left = [" ".join(a) for a, _ in pairs]
    right = [" ".join(b) for _, b in pairs]
    chosen = [seq2seq.Extraction(**extraction) for extraction in extractions]
    if left_to_right:
        return [[set(x) for x in found] for found in model.align_each(left, right, chosen)]
    return [[transpose(x) for x in found] for found in model.align_each(right, left, chosen)]


def extractions(heads: tuple[int, ...]) -> list[dict[str, Any]]:
    """Every extraction the trial set chooses among: the mean, and for a Transformer
    (``heads`` = (layers, heads per layer)) each layer and each head; each with and without
    Shift-Att, each read by argmax and by mutual argmax."""
    maps: list[dict[str, Any]] = [{}]
    if len(heads) == 2:
        layers, per_layer = heads
        maps += [{"layer": layer} for layer in range(layers)]
        maps += [{"layer": la, "head": h} for la in range(layers) for h in range(per_layer)]
    return [
        {**where, "shift": shift, "method": method}
        for where in maps
        for shift in (False, True)
        for method in ("argmax", "mutual-argmax")
    ]


def choice_row(label: str, chosen: str) -> str:
    """The row of model ``label`` read by the extraction the trial set chose (its name)."""
    return f"{label}, {chosen} (trial's choice)"


def twin_label(gold_set: GoldSet, args: argparse.Namespace, guided: bool) -> str:
    """A guided-alignment twin's name in the tables: the released model and its updates."""
    return f"{gold_set.model} + {args.guided_steps} {'guided ' if guided else ''}updates"


def reverse_label(gold_set: GoldSet, args: argparse.Namespace, guided: bool) -> str:
    """The model of the other direction's name in the tables, guided on the gold's pairs or
    not."""
    left, right = gold_set.langs
    label = f"{right}→{left} trained here"
    if not guided:
        return label
    return f"{label} + {args.gold_guided_steps} guided updates on the gold's pairs"


def joined(forward: str, backward: str) -> str:
    """Two models joined: the key of their trial choice of symmetrization."""
    return f"{forward} ⇄ {backward}"


def joined_row(forward: str, backward: str, how: str) -> str:
    """The row of two models' trial choices symmetrized by ``how`` (one not ``SHOWN``: the
    trial set's choice)."""
    return f"{joined(forward, backward)}, {how} of the trial's choices" + trial_mark(how)


def aligner_row(system: str, how: str) -> str:
    """The row of an aligner's two directions symmetrized by ``how``."""
    return f"{system}, {how}" + trial_mark(how)


def trial_mark(how: str) -> str:
    """What a row's name adds when its symmetrization is the trial set's choice."""
    return "" if how in SHOWN else " (trial's choice)"


def name_of(extraction: dict[str, Any]) -> str:
    where = "mean" if "layer" not in extraction else f"layer {extraction['layer']}"
    if "head" in extraction:
        where += f" head {extraction['head']}"
    where += " + Shift-Att" if extraction.get("shift") else ""
    return where + (", mutual argmax" if extraction.get("method") == "mutual-argmax" else "")


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


def choose_on_trial(
    model: Any, gold_set: GoldSet, trial: Sequence[Pair], trial_gold: Sequence[GoldAlignment]
) -> tuple[dict[str, Any], list[set[Link]], list[dict[str, Any]]]:
    """The extraction with the lowest trial AER, its trial links, and every candidate's
    trial AER."""
    tried = extractions(model.heads)
    found = model_links_each(model, trial, gold_set.model_left_to_right, tried)
    candidates = [
        {"extraction": extraction, "name": name_of(extraction), "trial_aer": aer_of(trial_gold, x)}
        for extraction, x in zip(tried, found, strict=True)
    ]
    best = min(range(len(candidates)), key=lambda k: candidates[k]["trial_aer"])
    return candidates[best]["extraction"], found[best], candidates


def model_rows(
    model: Any,
    label: str,
    gold_set: GoldSet,
    test: Sequence[Pair],
    trial: tuple[Sequence[Pair], Sequence[GoldAlignment]],
    record: dict[str, Any],
) -> dict[str, list[set[Link]]]:
    """A model's rows: the mean over layers and heads, and the trial set's choice (without
    a trial set, the mean with Shift-Att); the seconds of the first, the choice and its
    trial links (Pharaoh lines) go into ``record["models"][label]``."""
    start = time.monotonic()
    rows = {f"{label}, mean": model_links(model, test, gold_set.model_left_to_right)}
    info: dict[str, Any] = {"seconds": round(time.monotonic() - start, 2)}
    if trial[0]:
        chosen, trial_links, candidates = choose_on_trial(model, gold_set, *trial)
        info.update(
            chosen=name_of(chosen),
            trial_candidates=candidates,
            trial_links=[format_pharaoh(links) for links in trial_links],
        )
        rows[choice_row(label, name_of(chosen))] = model_links(
            model, test, gold_set.model_left_to_right, **chosen
        )
    else:
        rows[f"{label}, mean + Shift-Att"] = model_links(
            model, test, gold_set.model_left_to_right, shift=True
        )
    record.setdefault("models", {})[label] = info
    return rows


def fine_tuned(
    gold_set: GoldSet,
    test: Sequence[Pair],
    trial: Sequence[Pair],
    args: argparse.Namespace,
    start: str | Path | None = None,
    guide: Sequence[str] = (),
    run: str | None = None,
) -> Path:
    """A model (``start``; the released one by default) trained further on the gold's
    sentence pairs (trial and test: the text, never the links), ``--finetune-steps`` updates
    of ``configs/finetune.yaml``, validated on the trial pairs (the test pairs without a
    trial set); its checkpoint. With ``guide`` (eflomal's links of those pairs, one Pharaoh
    line per pair, trial's first) the model's guided head learns them as it trains, for
    ``--gold-guided-steps`` updates at ``--gold-guided-weight``. ``run``: the folder it
    trains in (``finetune`` or ``finetune-guided`` by default)."""
    run = run or ("finetune-guided" if guide else "finetune")
    steps = args.gold_guided_steps if guide else args.finetune_steps
    root = args.work / gold_set.name.replace(" ", "-") / run
    corpus = root / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    langs = gold_set.langs if gold_set.model_left_to_right else gold_set.langs[::-1]
    for split, pairs in [("train", [*trial, *test]), ("val", trial or test)]:
        for side, lang in enumerate(gold_set.langs):
            lines = "".join(" ".join(pair[side]) + "\n" for pair in pairs)
            (corpus / f"{split}.{lang}").write_text(lines, encoding="utf-8")
    options = [
        "--data.source",
        str(corpus),
        "--data.src_lang",
        langs[0],
        "--data.tgt_lang",
        langs[1],
        "--data.cache_dir",
        str(root / "cache"),
        "--trainer.default_root_dir",
        str(root / "run"),
        "--replace_checkpoints",
        "--trainer.max_steps",
        str(steps),
        "--trainer.val_check_interval",
        str(min(100, steps)),
    ]
    if guide:
        (corpus / "train.align").write_text("".join(f"{x}\n" for x in guide), "utf-8")
        options += [
            "--data.train_alignments",
            str(corpus / "train.align"),
            "--model.guided_alignment",
            str(args.gold_guided_weight),
        ]
    best = seq2seq.fit(RECIPE, init_from=start or gold_set.model, options=options)
    return Path(best)


def guided_head(model: Any, pairs: Sequence[Pair]) -> list[set[Link]]:
    """The links of the head guided alignment trains (``model.guided_layer`` and
    ``model.guided_head`` at their defaults: the decoder's layer before last, head 0), read
    with Shift-Att, at the step it learned them; the En-Fr twins translate left to right."""
    return model_links(model, pairs, True, layer=-2, head=0, shift=True)


def guided_twins(
    gold_set: GoldSet,
    test: Sequence[Pair],
    trial: Sequence[Pair],
    args: argparse.Namespace,
    guide: tuple[Sequence[str], str],
) -> dict[str, dict[str, Any]]:
    """The released model trained further, twice alike but for guided alignment, on Multi30k's
    training pairs with the gold's sentence pairs appended (their text, never their links):
    ``--guided-steps`` updates of ``configs/finetune.yaml``, checkpoints chosen on Multi30k's
    val. The guided twin's head (the decoder's layer before last, head 0) learns ``guide``
    (one Pharaoh line per pair of that corpus, over the words of the text as written, and its
    name: the guided twin is trained again when the name changes). Each twin's checkpoint,
    fit seconds and test_2016 scores (beam 5, its own search)."""
    root = args.work / "guided"
    record_file = root / "twins.json"
    twins: dict[str, dict[str, Any]] = load_json(record_file, {}) or {}
    src_lang, tgt_lang = gold_set.langs
    corpus = root / "corpus"
    if not (corpus / f"train.{tgt_lang}").is_file():  # written once: the cache reads its time
        corpus.mkdir(parents=True, exist_ok=True)
        for side, lang in enumerate(gold_set.langs):
            lines = training_as_written(args.data, lang)
            lines += [" ".join(pair[side]) for pair in [*trial, *test]]
            (corpus / f"train.{lang}").write_text("".join(f"{x}\n" for x in lines), "utf-8")
            for split, name in [("val", "val"), ("test_2016_flickr", "test")]:
                with gzip.open(args.data / f"{split}.{lang}.gz", "rt", encoding="utf-8") as file:
                    (corpus / f"{name}.{lang}").write_text(file.read(), "utf-8")
    guide_lines, guide_name = guide
    (corpus / "train.align").write_text("".join(f"{x}\n" for x in guide_lines), "utf-8")
    guided = [
        "--data.train_alignments",
        str(corpus / "train.align"),
        "--model.guided_alignment",
        str(args.guided_weight),
    ]
    sources = (corpus / f"test.{src_lang}").read_text(encoding="utf-8").splitlines()
    references = (corpus / f"test.{tgt_lang}").read_text(encoding="utf-8").splitlines()
    for label, options, learned in [
        (twin_label(gold_set, args, guided=False), [], None),
        (twin_label(gold_set, args, guided=True), guided, guide_name),
    ]:
        if label in twins and twins[label].get("guide") == learned:
            continue
        folder = root / ("guided" if options else "unguided")
        start = time.monotonic()
        best = seq2seq.fit(
            RECIPE,
            init_from=gold_set.model,
            options=[
                "--data.source",
                str(corpus),
                "--data.cache_dir",
                str(root / "cache"),
                "--trainer.default_root_dir",
                str(folder),
                "--replace_checkpoints",
                "--trainer.max_steps",
                str(args.guided_steps),
                *options,
            ],
        )
        seconds = round(time.monotonic() - start)
        scores = seq2seq.load(best).score(sources, references).scores
        twins[label] = {
            "checkpoint": str(best),
            "fit_seconds": seconds,
            **({"guide": learned} if learned else {}),
            "test_2016": {
                name: round(scores[name]["score"], 2)
                for name in ("bleu_literature", "bleu", "chrf")
            },
        }
        save_json(record_file, twins)
    return twins


def gold_guide(links: Sequence[set[Link]], reverse: bool = False) -> list[str]:
    """Pharaoh lines (one per pair) of eflomal's links of the gold's pairs, trial's first,
    as (left, right); with ``reverse``, turned round for a model that translates right to
    left."""
    return [format_pharaoh(transpose(found) if reverse else found) for found in links]


def guided_gold_label(gold_set: GoldSet, args: argparse.Namespace) -> str:
    return (
        f"{twin_label(gold_set, args, guided=True)} "
        f"+ {args.gold_guided_steps} guided updates on the gold's pairs"
    )


def guided_rows(
    gold_set: GoldSet,
    test: Sequence[Pair],
    trial: tuple[Sequence[Pair], Sequence[GoldAlignment]],
    args: argparse.Namespace,
    record: dict[str, Any],
    eflomal: tuple[Sequence[set[Link]], Sequence[set[Link]]],
) -> dict[str, list[set[Link]]]:
    """The guided-alignment twins' rows (and the guided head's), and with
    ``--gold-guided-steps`` those of the guided twin trained further on the gold's pairs.
    ``eflomal``: eflomal's links, symmetrized as the trial set chose, of Multi30k's
    tokenized training pairs (the guided twin learns them, moved to the words as written:
    ``record["twin_guide"]``) and of the gold's pairs, trial's first (learned on the gold's
    pairs, in ``record["guided_finetune_seconds"]``)."""
    systems: dict[str, list[set[Link]]] = {}
    training, guide = eflomal
    how = record["aligner_choice"]["eflomal"]["chosen"]
    lines, unmapped = twin_guide(
        tuple(training_as_written(args.data, lang) for lang in gold_set.langs),
        tuple(tokenized_training_side(args.data, lang, args.work) for lang in gold_set.langs),
        training,
        guide,
    )
    record["twin_guide"] = {"eflomal": how, "unmapped_lines": unmapped}
    name = f"eflomal {how} of the tokenized text"
    record["twins"] = guided_twins(gold_set, test, trial[0], args, (lines, name))
    for label, twin in record["twins"].items():
        model = seq2seq.load(twin["checkpoint"])
        systems |= model_rows(model, label, gold_set, test, trial, record)
        if "guided" in label:
            systems[f"{label}, the guided head + Shift-Att"] = guided_head(model, test)
    if args.gold_guided_steps:
        guided_twin = record["twins"][twin_label(gold_set, args, guided=True)]
        start = time.monotonic()
        checkpoint = fine_tuned(
            gold_set,
            test,
            trial[0],
            args,
            start=guided_twin["checkpoint"],
            guide=gold_guide(guide),
        )
        record["guided_finetune_seconds"] = round(time.monotonic() - start)
        record["guided_finetune_weight"] = args.gold_guided_weight
        model = seq2seq.load(checkpoint)
        label = guided_gold_label(gold_set, args)
        systems |= model_rows(model, label, gold_set, test, trial, record)
        systems[f"{label}, the guided head + Shift-Att"] = guided_head(model, test)
    return systems


def reverse_model(gold_set: GoldSet, args: argparse.Namespace) -> dict[str, Any]:
    """A model of the other direction (right to left), trained here once by the released
    model's recipe with the languages swapped, for ``--reverse-minutes`` at most, on
    Multi30k alone (the gold's pairs unseen): its checkpoint and fit seconds, kept in
    ``WORK/reverse/RIGHT-LEFT/fit.json`` (trained again when the minutes change)."""
    left, right = gold_set.langs
    root = args.work / "reverse" / f"{right}-{left}"
    done = root / "fit.json"
    kept = load_json(done)
    if kept.get("max_minutes") == args.reverse_minutes:
        return kept
    hours, minutes = divmod(args.reverse_minutes, 60)
    start = time.monotonic()
    best = seq2seq.fit(
        *(REPO / config for config in gold_set.reverse_recipe),
        options=[
            "--data.source",
            str(args.data),
            "--data.src_lang",
            right,
            "--data.tgt_lang",
            left,
            "--trainer.default_root_dir",
            str(root / "run"),
            "--replace_checkpoints",
            "--trainer.max_time",
            f"00:{hours:02d}:{minutes:02d}:00",
        ],
    )
    record = {
        "checkpoint": str(best),
        "fit_seconds": round(time.monotonic() - start),
        "recipe": list(gold_set.reverse_recipe),
        "max_minutes": args.reverse_minutes,
        "cpu": f"{cpu_model()} ({Machine.this().cpu_kind()})",
    }
    save_json(done, record)
    return record


def symmetrized_rows(
    gold_set: GoldSet,
    systems: dict[str, list[set[Link]]],
    forward: Sequence[str],
    test: Sequence[Pair],
    trial: tuple[Sequence[Pair], Sequence[GoldAlignment]],
    args: argparse.Namespace,
    record: dict[str, Any],
    guided: tuple[str, Sequence[set[Link]]] | None = None,
) -> dict[str, list[set[Link]]]:
    """The reverse model's rows (its own trial choice), and each ``forward`` model's trial
    choice symmetrized with the reverse model's, by grow-diag-final, grow-diag and the
    symmetrization the trial set chooses (``record["joined_choice"]``), as the statistical
    aligners' two directions are (``record["reverse"]``: its fit). With ``guided`` (the
    forward model trained on the gold's pairs with eflomal's links, and those links, trial's
    first), the reverse model also learns those links, turned round, by the same
    ``--gold-guided-steps``, and is joined with it (its time in
    ``record["reverse_guided_seconds"]``)."""
    left, right = gold_set.langs
    record["reverse"] = reverse_model(gold_set, args)
    label = reverse_label(gold_set, args, guided=False)
    backward_set = dataclasses.replace(gold_set, model_left_to_right=False)
    model = seq2seq.load(record["reverse"]["checkpoint"])
    rows = model_rows(model, label, backward_set, test, trial, record)
    pairings = [(name, label) for name in forward]
    if guided is not None:
        guided_forward, guide = guided
        start = time.monotonic()
        checkpoint = fine_tuned(
            backward_set,
            test,
            trial[0],
            args,
            start=record["reverse"]["checkpoint"],
            guide=gold_guide(guide, reverse=True),
            run=f"finetune-guided-{right}-{left}",
        )
        record["reverse_guided_seconds"] = round(time.monotonic() - start)
        guided_backward = reverse_label(gold_set, args, guided=True)
        rows |= model_rows(
            seq2seq.load(checkpoint), guided_backward, backward_set, test, trial, record
        )
        pairings.append((guided_forward, guided_backward))
    found = systems | rows
    models = record["models"]
    for name, backward_name in pairings:
        links = found[choice_row(name, models[name]["chosen"])]
        backward = found[choice_row(backward_name, models[backward_name]["chosen"])]
        on_trial = {
            how: [
                symmetrize(parse_links(f), parse_links(b), how)
                for f, b in zip(
                    models[name]["trial_links"], models[backward_name]["trial_links"], strict=True
                )
            ]
            for how in SYMMETRIZATIONS
        }
        choice = symmetrization_on_trial(on_trial, trial[1])
        record.setdefault("joined_choice", {})[joined(name, backward_name)] = choice
        for how in dict.fromkeys([*SHOWN, choice["chosen"]]):
            rows[joined_row(name, backward_name, how)] = [
                symmetrize(f, b, how) for f, b in zip(links, backward, strict=True)
            ]
    return rows


def bench_set(gold_set: GoldSet, args: argparse.Namespace) -> dict[str, Any]:
    """Every system's figures on one gold set."""
    test, gold = read_set(args.gold, gold_set.text, gold_set.links)
    trial, trial_gold = ([], [])
    if gold_set.trial_text and gold_set.trial_links:
        trial, trial_gold = read_set(args.gold, gold_set.trial_text, gold_set.trial_links)
    record: dict[str, Any] = {
        "pairs": len(test),
        "trial_pairs": len(trial),
        "unseen": {
            lang: round(
                unseen_share(test, tokenized_training_side(args.data, lang, args.work), side), 4
            )
            for side, lang in enumerate(gold_set.langs)
        },
    }
    systems: dict[str, list[set[Link]]] = {}
    statistical = statistical_rows(gold_set, test, trial, args)
    for system, found in statistical.items():
        if isinstance(found, str):
            record.setdefault("not_run", {})[system] = found
            continue
        systems |= aligner_rows(system, found, gold_set, trial_gold, record)
    released = seq2seq.load(gold_set.model)
    systems |= model_rows(released, gold_set.model, gold_set, test, (trial, trial_gold), record)
    for marian in args.hf if trial else []:  # En-Fr, the set a trial set chooses for
        model = seq2seq.load(marian, hf=True)
        label = f"{marian} (MarianMT)"
        systems |= model_rows(model, label, gold_set, test, (trial, trial_gold), record)
    if args.finetune_steps:
        start = time.monotonic()
        tuned = seq2seq.load(fine_tuned(gold_set, test, trial, args))
        record["finetune_seconds"] = round(time.monotonic() - start)
        label = f"{gold_set.model} + {args.finetune_steps} updates on the gold's pairs"
        systems |= model_rows(tuned, label, gold_set, test, (trial, trial_gold), record)
    guide: list[set[Link]] = []  # eflomal's links of the gold's pairs, trial's first
    eflomal = statistical.get("eflomal")
    if isinstance(eflomal, dict):
        guide = eflomal["gold pairs"][record["aligner_choice"]["eflomal"]["chosen"]]
    if args.guided_steps and trial:  # the set with a trial set: En-Fr
        if not isinstance(eflomal, dict):
            raise SystemExit(f"guided alignment needs eflomal's links: eflomal is {eflomal}")
        how = record["aligner_choice"]["eflomal"]["chosen"]
        training = [symmetrize(f, r, how) for f, r in zip(*eflomal["training"], strict=True)]
        systems |= guided_rows(gold_set, test, (trial, trial_gold), args, record, (training, guide))
    if args.reverse and gold_set.reverse_recipe and trial:
        forward, guided = [gold_set.model], None
        if args.guided_steps and args.gold_guided_steps:
            guided = (guided_gold_label(gold_set, args), guide)
            forward.append(guided[0])
        systems |= symmetrized_rows(
            gold_set, systems, forward, test, (trial, trial_gold), args, record, guided
        )
    eflomal = systems.get(aligner_row("eflomal", "grow-diag-final"))
    baseline = sentence_scores(gold, eflomal) if eflomal is not None else None
    record["systems"] = {
        name: scored(gold, links, None if "eflomal" in name else baseline)
        for name, links in systems.items()
    }
    record["picture"] = picture_sentence(test)
    record["picture_systems"] = picture_systems(gold_set, record, args)
    record["picture_links"] = {
        name: sorted(links[record["picture"]]) for name, links in systems.items()
    }
    record["picture_gold"] = {
        "sure": sorted(gold[record["picture"]].sure),
        "possible": sorted(gold[record["picture"]].possible),
    }
    record["picture_words"] = test[record["picture"]]
    return record


def picture_systems(
    gold_set: GoldSet, record: dict[str, Any], args: argparse.Namespace
) -> list[str]:
    """The systems the picture shows, one of a kind: each aligner's grow-diag-final, the
    released model's mean and trial choice, the guided twin's trial choice, the guided head
    trained on the gold's pairs, the released model joined with the reverse one, and the
    two guided models joined."""
    models = record["models"]

    def choice(label: str) -> str:
        chosen = models.get(label, {}).get("chosen")
        return choice_row(label, chosen) if chosen else ""

    def joined_choice(forward: str, backward: str) -> str:
        chosen = record.get("joined_choice", {}).get(joined(forward, backward), {}).get("chosen")
        return joined_row(forward, backward, chosen) if chosen else ""

    guided_gold = guided_gold_label(gold_set, args)
    wanted = [
        "eflomal, grow-diag-final",
        "fast_align, grow-diag-final",
        f"{gold_set.model}, mean",
        choice(gold_set.model),
        choice(twin_label(gold_set, args, guided=True)),
        f"{guided_gold}, the guided head + Shift-Att",
        joined_row(gold_set.model, reverse_label(gold_set, args, False), "grow-diag-final"),
        joined_choice(guided_gold, reverse_label(gold_set, args, True)),
    ]
    return [name for name in wanted if name in record["systems"]]


def picture_sentence(pairs: Sequence[Pair]) -> int:
    """The first pair of 9 to 13 words a side (a sentence that reads at a glance)."""
    return next((k for k, (a, b) in enumerate(pairs) if 9 <= len(a) <= 13 and 9 <= len(b) <= 13), 0)


def trial_choice(choice: dict[str, Any], what: str) -> str:
    """A sentence: how the trial set chose to join ``what``, with each way's trial AER."""
    tried = ", ".join(f"{how} {100 * aer:.1f}" for how, aer in choice["trial_aer"].items())
    return f"the trial set joins {what} by **{choice['chosen']}** (trial AER %: {tried})."


def percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def table(record: dict[str, Any]) -> list[str]:
    """One row per system: AER [interval], precision, recall, against eflomal."""
    rows = []
    for name, r in record["systems"].items():
        low, high = r["aer_interval"]
        versus = r.get("vs_eflomal")
        rows.append(
            [
                name,
                f"{percent(r['aer'])} [{percent(low)}, {percent(high)}]",
                percent(r["precision"]),
                percent(r["recall"]),
                f"{100 * versus[0]:+.1f} to {100 * versus[1]:+.1f}" if versus else "—",
            ]
        )
    return markdown_table(
        ["system", "AER % [95% interval]", "precision %", "recall %", "AER − eflomal's (95%)"], rows
    )


def draw(results: dict[str, Any], path: Path) -> None:
    """One sentence of the first set, aligned by each system beside the gold."""
    record = results["sets"][SETS[0].name]
    left, right = record["picture_words"]
    sure = {tuple(link) for link in record["picture_gold"]["sure"]}
    possible = {tuple(link) for link in record["picture_gold"]["possible"]} | sure
    names = record["picture_systems"]
    columns = min(3, len(names) + 1)
    rows = -(-(len(names) + 1) // columns)
    with figure(
        path, figsize=(5.2 * columns, 4.6 * rows), nrows=rows, ncols=columns, squeeze=False
    ) as axes:
        panels = [
            ("gold (■ sure, □ possible)", None),
            *((n, record["picture_links"][n]) for n in names),
        ]
        for ax, (title, links) in zip(axes.flat, panels, strict=False):
            for i, j in possible:
                ax.add_patch(_square(i, j, filled=(i, j) in sure))
            if links is not None:
                links = {tuple(link) for link in links}
                hits = [(i, j) for i, j in links if (i, j) in possible]
                misses = [(i, j) for i, j in links if (i, j) not in possible]
                for points, colour in [(hits, "tab:green"), (misses, "tab:red")]:
                    if points:
                        ax.scatter(
                            [i for i, _ in points],
                            [j for _, j in points],
                            s=40,
                            color=colour,
                            zorder=3,
                        )
            ax.set_xlim(-0.5, len(left) - 0.5)
            ax.set_ylim(len(right) - 0.5, -0.5)
            ax.set_xticks(range(len(left)), left, rotation=60, ha="right", fontsize=8)
            ax.set_yticks(range(len(right)), right, fontsize=8)
            ax.set_title(textwrap.fill(title, 48), fontsize=9)
            ax.set_aspect("equal")
        for ax in list(axes.flat)[len(panels) :]:
            ax.axis("off")
        axes.flat[0].figure.suptitle("One Hansards sentence: links on gold (green), off it (red)")


def _square(i: int, j: int, filled: bool) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle(
        (i - 0.45, j - 0.45), 0.9, 0.9, facecolor="0.75" if filled else "none", edgecolor="0.45"
    )


def training_seconds(results: dict[str, Any]) -> float:
    """The seconds of everything the benchmark trains, over every set: the fine-tunes, the
    guided twins, the model of the other direction, and eflomal's and fast_align's runs."""
    total = 0.0
    for record in results["sets"].values():
        total += sum(
            record.get(key, 0)
            for key in ("finetune_seconds", "guided_finetune_seconds", "reverse_guided_seconds")
        )
        total += sum(record.get("aligner_seconds", {}).values())
        total += sum(twin["fit_seconds"] for twin in record.get("twins", {}).values())
        total += record.get("reverse", {}).get("fit_seconds", 0)
    return total


def write_doc(results: dict[str, Any], doc: Path, picture: Path, command: str) -> None:
    """The markdown page: one table per set, the trial's choice, the picture."""
    lines = [
        "# Word alignments on human gold",
        "",
        "Written by `scripts/bench/bench_align.py` (`make bench-align`) on "
        f"{results['cpu']}, {results['date']}:",
        "",
        f"    {command}",
        "",
    ]
    lines += [
        "Every system is trained on the same data: Multi30k's 29,000 training pairs of the "
        "language pair (image captions). The gold is parliamentary text, so these AERs are far "
        "from the published ones of systems trained on a million in-domain pairs (below), and "
        "only the rows of one table compare. eflomal and fast_align also see the gold's "
        "sentence pairs (never their links), as unsupervised aligners are run; the released "
        "models do not, and the fine-tuned rows are those models trained further on the same "
        "sentence pairs (never their links) with `configs/finetune.yaml`.",
        "",
    ]
    for name, record in results["sets"].items():
        unseen = ", ".join(f"{lang} {100 * share:.0f}%" for lang, share in record["unseen"].items())
        lines += [
            f"## {name}: {record['pairs']} pairs",
            "",
            f"Words never seen in Multi30k's training text: {unseen}.",
            "",
        ]
        lines += table(record)
        lines.append("")
        for label, model in record["models"].items():
            if "chosen" in model:
                lines += [
                    f"{label}: the trial set ({record['trial_pairs']} pairs) chose "
                    f"**{model['chosen']}** among {len(model['trial_candidates'])} "
                    "extractions.",
                    "",
                ]
        for system, choice in record.get("aligner_choice", {}).items():
            if choice["trial_aer"]:
                lines += [f"{system}: {trial_choice(choice, 'its two directions')}", ""]
        for joined, choice in record.get("joined_choice", {}).items():
            lines += [f"{joined}: {trial_choice(choice, 'the two models')}", ""]
        for system, why in record.get("not_run", {}).items():
            lines += [f"{system}: {why}.", ""]
        first = next(iter(record["models"].values()))
        lines += [
            f"The model's links of the {record['pairs']} pairs took {first['seconds']} s "
            "(forced decoding and the mean's extraction, one process, the model loaded).",
            "",
        ]
        if "twins" in record:
            guide = record.get("twin_guide", {})
            lines += [
                "The guided-alignment twins (trained alike but for the guided head; each "
                "chosen on Multi30k's val), on Multi30k's test_2016. The guided head learns "
                f"eflomal's {guide.get('eflomal', 'grow-diag-final')} links of the text "
                "eflomal aligned above (the trial set's choice), moved from its tokens to the "
                "words of Multi30k as written"
                + (
                    f" ({guide['unmapped_lines']} training pairs left without links: their "
                    "tokens do not spell their words)"
                    if guide.get("unmapped_lines")
                    else ""
                )
                + ":",
                "",
            ]
            lines += markdown_table(
                ["twin", "literature BLEU", "sacreBLEU", "chrF", "fit"],
                [
                    [
                        label,
                        *(
                            f"{twin['test_2016'][k]:.2f}"
                            for k in ("bleu_literature", "bleu", "chrf")
                        ),
                        f"{twin['fit_seconds'] / 60:.1f} min",
                    ]
                    for label, twin in record["twins"].items()
                ],
            )
            lines.append("")
        if "finetune_seconds" in record:
            lines += [
                f"Its fine-tuning on the gold's pairs took {record['finetune_seconds']} s.",
                "",
            ]
        if "reverse" in record:
            reverse = record["reverse"]
            limit = reverse.get("max_minutes")
            lines += [
                "The model of the other direction was trained here, once, on Multi30k alone by "
                f"the released model's recipe ({', '.join(f'`{c}`' for c in reverse['recipe'])}"
                ", the languages swapped"
                + (f", `--trainer.max_time` {limit} min" if limit else "")
                + f"): {reverse['fit_seconds'] / 60:.0f} min on "
                f"{reverse['cpu']}. The symmetrized rows join its trial choice with a forward "
                "model's, as eflomal's two directions are joined.",
                "",
            ]
        if "guided_finetune_seconds" in record:
            guide = record.get("aligner_choice", {}).get("eflomal", {}).get("chosen")
            lines += [
                "The guided twin trained further on the gold's pairs learns, in its guided "
                f"head, eflomal's {guide or 'grow-diag-final'} links of those pairs (eflomal's "
                "output in the rows above, never the gold's links"
                + (", symmetrized as the trial set chose" if guide else "")
                + f"), at a weight of {record['guided_finetune_weight']:g}; this "
                f"took {record['guided_finetune_seconds']} s.",
                "",
            ]
        if "reverse_guided_seconds" in record:
            lines += [
                "The model of the other direction learns the same links turned round, on the "
                "same pairs, by the same updates and weight, starting from its Multi30k "
                f"checkpoint: {record['reverse_guided_seconds']} s. The last symmetrized rows "
                "join the two guided models' trial choices.",
                "",
            ]
    lines += [
        f"Everything this page trains (the fits and the aligners above) took "
        f"{training_seconds(results) / 60:.0f} min on {results['cpu']}.",
        "",
        f"![One sentence aligned by each system]({picture.name})",
        "",
        "## Published AERs on the En-Fr Hansards (not comparable: other training data)",
        "",
    ]
    lines += markdown_table(
        ["system", "AER %", "trained on"],
        [
            ["fast_align, grow-diag", "10.5", "1.1 M in-domain pairs"],
            ["GIZA++, grow-diag", "5.9", "1.1 M in-domain pairs"],
            ["eflomal", "8.2", "1.1 M in-domain pairs"],
            ["Shift-AET (Chen et al. 2020)", "4.7", "1.1 M in-domain pairs"],
        ],
    )
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gold", type=Path, default=Path("data/alignment"))
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"))
    parser.add_argument("--work", type=Path, default=Path("runs/bench/align"))
    parser.add_argument("--doc", type=Path, default=Path("docs/benchmarks/alignment.md"))
    parser.add_argument(
        "--finetune-steps",
        type=int,
        default=200,
        help="updates of the released model on the gold's pairs (0: none)",
    )
    parser.add_argument(
        "--guided-steps",
        type=int,
        default=600,
        help="updates of each guided-alignment twin (0: no twins)",
    )
    parser.add_argument(
        "--guided-weight",
        type=float,
        default=0.5,
        help="the guided head's weight in the twin that has one",
    )
    parser.add_argument(
        "--gold-guided-steps",
        type=int,
        default=1500,
        help="updates of the guided twin (and, with --reverse, of the reverse model) on the "
        "gold's pairs, learning eflomal's links (0: none; chosen on the trial set)",
    )
    parser.add_argument(
        "--gold-guided-weight",
        type=float,
        default=2.0,
        help="the guided head's weight on the gold's pairs (chosen on the trial set)",
    )
    parser.add_argument(
        "--reverse",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="train a model of the other direction (once) and symmetrize",
    )
    parser.add_argument(
        "--reverse-minutes",
        type=int,
        default=30,
        help="the most minutes the model of the other direction trains (its recipe's "
        "max_time, shortened to keep the benchmark's training within two hours)",
    )
    parser.add_argument(
        "--redraw",
        action="store_true",
        help="write --doc and its picture again from WORK/results.json, running nothing",
    )
    parser.add_argument(
        "--hf",
        action="append",
        default=[],
        help="a MarianMT model of transformers that translates English into French (a "
        "save_pretrained folder, or a Hub id where the Hub is reachable), read on the En-Fr "
        "set as the released model is; may repeat",
    )
    parser.add_argument("--fast-align", help="fast_align's binary (default: on PATH or the venv)")
    args = parser.parse_args()
    results = load_json(args.work / "results.json", {}) or {}
    if args.redraw:
        if not results.get("sets"):
            sys.exit(f"nothing to redraw: no {args.work / 'results.json'}")
        for gold_set in SETS:  # the picture's choice, as a run makes it
            record = results["sets"][gold_set.name]
            record["picture_systems"] = picture_systems(gold_set, record, args)
    else:
        if not (args.gold / SETS[0].links).is_file():
            sys.exit(f"no alignment gold under {args.gold} (make alignment-gold, or --gold)")
        args.work.mkdir(parents=True, exist_ok=True)
        command = " ".join(["python -m scripts.bench.bench_align", *sys.argv[1:]])
        results.update(
            cpu=f"{cpu_model()} ({Machine.this().cpu_kind()})",
            date=time.strftime("%Y-%m-%d"),
            command=command,
            sets={},
        )
        for gold_set in SETS:
            print(f"{gold_set.name} ...", file=sys.stderr)
            results["sets"][gold_set.name] = bench_set(gold_set, args)
            save_json(args.work / "results.json", results)
    picture = args.doc.with_name("alignment-one-sentence.png")
    draw(results, picture)
    write_doc(results, args.doc, picture, results.get("command", "make bench-align"))
    print(args.doc.read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
