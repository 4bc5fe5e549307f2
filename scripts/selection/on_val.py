"""The commands that score on val: ``train`` (fit a recipe per seed, score its final models)
and ``ensemble`` (score an ensemble of trained seeds under each weighting)."""

from __future__ import annotations

import argparse
import sys

from scripts.bench.benchkit import load_json, save_json, split_files
from scripts.selection import runs
from scripts.selection.records import VAL_SPLIT, ensemble_model
from scripts.selection.table import print_table


def train(args: argparse.Namespace) -> None:
    """Fit the recipe once per seed (a seed fitted already is found, a stopped fit goes on),
    score each seed's final models on val under every length penalty, and print the table.
    A name is one recipe: another recipe under it is refused."""
    recipe_dir = args.out / args.name
    recipe = {"config": [str(c) for c in args.config], "override": args.override}
    recipe |= {"remove_bpe": True} if args.remove_bpe else {}
    known = recipe_dir / "recipe.json"
    if known.exists() and load_json(known) != recipe:
        sys.exit(f"{args.name} was trained with another recipe ({known}); choose another --name")
    save_json(known, recipe)
    val = split_files(args.data, VAL_SPLIT, args.pair)
    for seed in args.seeds:
        folder = recipe_dir / f"seed{seed}"
        folder.mkdir(exist_ok=True)
        runs.fit(args, seed, folder)
        models = {
            name: (path, None) for name, path in runs.final_models(folder / "run", folder).items()
        }
        runs.score_on_val(folder, models, val, args.beam, args.remove_bpe)
    print_table(args.out)


def parse_weighting(text: str, members: int) -> list[float]:
    """``0.7,0.3`` -> [0.7, 0.3]: one weight per member, or exit saying what is wrong."""
    try:
        weights = [float(w) for w in text.split(",")]
    except ValueError:
        sys.exit(f"--weights {text}: not comma-separated numbers")
    if len(weights) != members or min(weights) < 0 or sum(weights) == 0:
        sys.exit(f"--weights {text}: give {members} weights >= 0, not all 0")
    return weights


def ensemble(args: argparse.Namespace) -> None:
    """Score the ensemble of ``args.members`` on val under each length penalty and each
    weighting of ``args.weights`` (none: equal weights); the scores of earlier weightings are
    kept, so that val chooses among them all."""
    folder = args.out / args.name
    known = folder / "ensemble.json"
    if known.exists() and load_json(known)["members"] != args.members:
        sys.exit(f"{args.name} is an ensemble of other members ({known}); choose another --name")
    save_json(known, {"members": args.members})
    models = [runs.member_model(args.out, member)[0] for member in args.members]
    weightings = [parse_weighting(w, len(models)) for w in args.weights] or [None]
    choices = {ensemble_model(weights): (models, weights) for weights in weightings}
    runs.score_on_val(folder, choices, split_files(args.data, VAL_SPLIT, args.pair), args.beam)
    print_table(args.out)
