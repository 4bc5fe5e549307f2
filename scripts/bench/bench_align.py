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
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import seq2seq
from scripts.bench.alignment.aligners import (
    SYMMETRIZATIONS,
    aligner_rows,
    statistical_rows,
    symmetrization_on_trial,
    tokenized_training_side,
    training_as_written,
    twin_guide,
    unseen_share,
)
from scripts.bench.alignment.gold import SETS, GoldSet, Pair, read_set
from scripts.bench.alignment.models import guided_head, guided_head_row, model_rows
from scripts.bench.alignment.names import (
    SHOWN,
    aligner_row,
    choice_row,
    guided_gold_label,
    joined,
    joined_row,
    reverse_label,
    twin_label,
)
from scripts.bench.alignment.report import draw, write_doc
from scripts.bench.alignment.training import fine_tuned, gold_guide, guided_twins, reverse_model
from scripts.bench.benchkit import cpu_model, load_json, save_json
from seq2seq.common.precision import Machine
from seq2seq.inspection.word_alignments import (
    AlignmentScore,
    GoldAlignment,
    Link,
    aer_interval,
    corpus_score,
    sentence_scores,
    symmetrize,
)
from seq2seq.text.pharaoh import parse_links


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
    left, right = gold_set.langs
    lines, unmapped = twin_guide(
        (training_as_written(args.data, left), training_as_written(args.data, right)),
        (
            tokenized_training_side(args.data, left, args.work),
            tokenized_training_side(args.data, right, args.work),
        ),
        training,
        guide,
    )
    record["twin_guide"] = {"eflomal": how, "unmapped_lines": unmapped}
    name = f"eflomal {how} of the tokenized text"
    record["twins"] = guided_twins(gold_set, test, trial[0], args, (lines, name))
    for label, twin in record["twins"].items():
        model = seq2seq.load(twin["checkpoint"])
        systems |= model_rows(model, label, gold_set, test, trial, record)
        if label == twin_label(gold_set, args, guided=True):
            systems[guided_head_row(label)] = guided_head(model, test)
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
        systems[guided_head_row(label)] = guided_head(model, test)
    return systems


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
    trial: list[Pair] = []
    trial_gold: list[GoldAlignment] = []
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
        how = record["aligner_choice"]["eflomal"]["chosen"]
        guide = eflomal["gold pairs"][how]
    if args.guided_steps and trial:  # the set with a trial set: En-Fr
        if not isinstance(eflomal, dict):
            raise SystemExit(f"guided alignment needs eflomal's links: eflomal is {eflomal}")
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
    compared = systems.get(aligner_row("eflomal", "grow-diag-final"))
    baseline = sentence_scores(gold, compared) if compared is not None else None
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
        guided_head_row(guided_gold),
        joined_row(gold_set.model, reverse_label(gold_set, args, False), "grow-diag-final"),
        joined_choice(guided_gold, reverse_label(gold_set, args, True)),
    ]
    return [name for name in wanted if name in record["systems"]]


def picture_sentence(pairs: Sequence[Pair]) -> int:
    """The first pair of 9 to 13 words a side (a sentence that reads at a glance)."""
    return next((k for k, (a, b) in enumerate(pairs) if 9 <= len(a) <= 13 and 9 <= len(b) <= 13), 0)


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
