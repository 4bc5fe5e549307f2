"""What the benchmark trains: a model trained further on the gold's pairs, the
guided-alignment twins, and the model of the other direction."""

from __future__ import annotations

import argparse
import gzip
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import seq2seq
from scripts.bench.alignment.aligners import training_as_written
from scripts.bench.alignment.gold import GoldSet, Pair
from scripts.bench.alignment.names import twin_label
from scripts.bench.benchkit import cpu_model, load_json, save_json
from seq2seq.common.precision import Machine
from seq2seq.inspection.word_alignments import Link, transpose
from seq2seq.text.pharaoh import format_pharaoh

REPO = Path(__file__).resolve().parents[3]
RECIPE = REPO / "configs" / "finetune.yaml"


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
