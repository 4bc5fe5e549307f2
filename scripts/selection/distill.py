"""The ``distill`` command: a student's corpus written by a teacher chosen on val."""

from __future__ import annotations

import argparse

from scripts.bench.benchkit import SEQ2SEQ, run, save_json
from scripts.selection.records import ensemble_weights
from scripts.selection.runs import teacher_model


def distill(args: argparse.Namespace) -> None:
    """``seq2seq distill`` of ``args.data``'s training sources into ``args.corpus`` by the
    teacher under its val-chosen setting (beam ``args.beam``), with its time and peak memory
    kept beside the teacher's records; a corpus written already is not written again."""
    if (args.corpus / "distill.json").exists():
        print(f"{args.corpus}: distilled already ({args.corpus / 'distill.json'})")
        return
    checkpoints, setting = teacher_model(args.out, args.teacher)
    src_lang, tgt_lang = args.pair.split("-")
    command = [*SEQ2SEQ, "distill", *(a for c in checkpoints for a in ("--ckpt", str(c)))]
    command += ["--data", str(args.data), "--out", str(args.corpus), "--src-lang", src_lang]
    command += ["--tgt-lang", tgt_lang, "--beam", str(args.beam)]
    command += ["--length-penalty", f"{setting.length_penalty:g}"]
    if (weights := ensemble_weights(setting.model)) is not None:
        command += ["--ensemble-weights", *map(str, weights)]
    command += ["--keep-originals"] if args.keep_originals else []
    folder = args.out / args.teacher.partition(":")[0] / "distill" / args.corpus.name
    folder.mkdir(parents=True, exist_ok=True)
    print(f"[{args.teacher} distills] {' '.join(command[2:])}", flush=True)
    usage = run(command, folder / "distill.out", folder / "distill.log")
    if usage.status != 0:
        raise RuntimeError(f"distilling failed (exit {usage.status}), see {folder / 'distill.log'}")
    record = {"command": command[2:], "seconds": usage.seconds, "peak_rss_mb": usage.peak_rss_mb}
    save_json(folder / "distill.json", {"teacher": args.teacher, **record})
