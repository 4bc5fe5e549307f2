"""The command that scores on test: ``final``, once per split, under what val chose."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from scripts.bench.benchkit import load_json, save_json, split_files
from scripts.selection import runs
from scripts.selection.records import (
    ENSEMBLE,
    METRICS,
    chosen_setting,
    ensemble_choice,
    ensemble_weights,
    first_test_scores,
    scores_joined_pieces,
    seed_scores,
    test_scorings,
)


def final(args: argparse.Namespace) -> None:
    """Score one recipe's seeds (or one ensemble) on the test set under the setting val
    chose; once."""
    folder = args.out / args.name
    is_ensemble = (folder / "ensemble.json").exists()
    if not is_ensemble and not seed_scores(folder):
        sys.exit(f"no trained seeds of {args.name} in {args.out}")
    if is_ensemble and not (folder / "val.json").exists():
        sys.exit(f"the ensemble {args.name} has no val scores yet (run `ensemble` first)")
    record_path = folder / "final.json"
    history = load_json(record_path, [])
    seeds = None  # all of them
    if test_scorings(folder, args.test_split):
        tested = first_test_scores(folder, args.test_split)
        new = [] if is_ensemble else [s for s in seed_scores(folder) if str(s) not in tested]
        if new and not args.again:  # trained since: each seed is scored once, these now
            seeds = new
            print(f"{args.name} {args.test_split}: scoring seeds {new}, trained since it was")
        elif args.skip_scored:
            print(f"{args.name} {args.test_split}: scored already, {tested}")
            return
        elif not args.again:
            sys.exit(
                f"{args.name} was scored on {args.test_split} already ({record_path}); the "
                "first score is the one to report (--again scores once more and keeps both)"
            )
    record = final_ensemble(args, folder) if is_ensemble else final_seeds(args, folder, seeds)
    history.append({
        "when": time.strftime("%Y-%m-%d %H:%M:%S"), "split": args.test_split,
        "beam": args.beam, **({"recase": str(args.recase)} if args.recase else {}), **record,
    })  # fmt: skip
    save_json(record_path, history)
    for metric in METRICS:
        each = ", ".join(f"{name} {s[metric]:.2f}" for name, s in record["scores"].items())
        print(f"{args.name} {args.test_split} {metric}: {each}")
    if is_ensemble:
        bootstrap = record["bootstrap"]
        print(f"paired bootstrap (literature BLEU), ensemble against {bootstrap['baseline']}: "
              f"p = {bootstrap['p_value']:.4f}")  # fmt: skip


def final_seeds(
    args: argparse.Namespace, recipe_dir: Path, seeds: list[int] | None = None
) -> dict[str, Any]:
    """The test scores of a recipe's ``seeds`` (None: all) under the setting val chooses
    over all of its seeds."""
    per_seed = seed_scores(recipe_dir)
    setting = chosen_setting(per_seed)
    test = split_files(args.data, args.test_split, args.pair)
    remove_bpe = scores_joined_pieces(recipe_dir)
    scores = {}
    for seed in per_seed if seeds is None else seeds:
        folder = recipe_dir / f"seed{seed}"
        checkpoint = runs.final_models(folder / "run", folder)[setting.model]
        scratch = folder / args.test_split
        scores[seed] = runs.evaluate(
            checkpoint, *test, scratch, args.beam, setting.length_penalty,
            recase=args.recase, remove_bpe=remove_bpe,
        )  # fmt: skip
    return {"setting": setting.key, "scores": scores}


def final_ensemble(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """The test scores of an ensemble (under its val-chosen weights and length penalty) and
    of each member (under its recipe's val-chosen setting), and the paired bootstrap of the
    ensemble against its best member on literature BLEU, which chose the members and also
    scores a recipe trained on lowercased text."""
    from seq2seq.text.lines import read_lines
    from seq2seq.text.metrics import paired_bootstrap

    members = load_json(folder / "ensemble.json")["members"]
    setting = ensemble_choice(folder)[0]
    test = split_files(args.data, args.test_split, args.pair)
    scratch = {name: folder / args.test_split / name.replace(":", "-seed")
               for name in (*members, ENSEMBLE)}  # fmt: skip
    chosen = {member: runs.member_model(args.out, member) for member in members}
    scores = {}
    for member, (model, member_setting) in chosen.items():
        scores[member] = runs.evaluate(model, *test, scratch[member], args.beam,
                                  member_setting.length_penalty, recase=args.recase)  # fmt: skip
    models = [model for model, _ in chosen.values()]
    weights, penalty = ensemble_weights(setting.model), setting.length_penalty
    scores[ENSEMBLE] = runs.evaluate(
        models, *test, scratch[ENSEMBLE], args.beam, penalty, weights, args.recase
    )
    best = max(members, key=lambda m: scores[m]["bleu_literature"])
    hypotheses = [read_lines(scratch[name] / "hypotheses.txt") for name in (best, ENSEMBLE)]
    target_lang = args.pair.split("-")[1]
    test_result = paired_bootstrap(*hypotheses, read_lines(test[1]), literature_lang=target_lang)
    return {"setting": setting.key, "scores": scores,
            "bootstrap": {"baseline": best, **test_result}}  # fmt: skip
