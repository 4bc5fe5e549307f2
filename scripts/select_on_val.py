"""Choose a recipe on val alone; then score the chosen one on the test set, once.

``train`` fits a recipe per seed and scores on val every final model each run allows
(``last-K``: the mean of its last K epochs; ``best``: by validation BLEU) under each length
penalty; ``table`` picks per recipe the setting with the best mean literature BLEU over
seeds (``val-table.md``, ``val-table.png``); ``ensemble`` chooses an ensemble's weights and
length penalty on val; ``final`` scores a recipe's seeds, or an ensemble and its members, on
the test set under what val chose, once per test split (a seed trained later is scored
alone, under what val chooses over all seeds); ``distill`` has a recipe's seed (or
an ensemble), under the setting val chose, translate the training sources for a student
(docs/distillation.md); ``record`` copies every record (JSON, no checkpoint) into a folder
of the repository with the val table they give, which the report links and a test checks
against them, and replaces none there that the new one does not extend; ``release`` writes
a recipe's seed, under what val chose, as a released model (``models/NAME``). The protocol:
docs/benchmarks/selection.md; its parts: ``scripts/selection/``.

    python -m scripts.select_on_val train --name anchor --seeds 1 2 3 \\
        --config configs/multi30k/base/transformer.yaml --config my-variant.yaml [-- OPTIONS]
    python -m scripts.select_on_val train --name student --recipe transformer-anchor
    python -m scripts.select_on_val --data data/multi30k-subword-nmt train --name cut \
        --recipe transformer-anchor-subword-nmt --remove-bpe   # scored on joined pieces
    python -m scripts.select_on_val table
    python -m scripts.select_on_val final --name anchor
    python -m scripts.select_on_val ensemble --name two --members anchor:1 anchor:2
    python -m scripts.select_on_val distill --teacher anchor:1 --corpus data/multi30k-kd
    python -m scripts.select_on_val record --into docs/benchmarks/results/selection
    python -m scripts.select_on_val release --member anchor:1 --as NAME --description TEXT
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from scripts.bench.benchkit import RECIPES, recipe_configs
from scripts.selection.distill import distill
from scripts.selection.on_test import final
from scripts.selection.on_val import ensemble, train
from scripts.selection.record import record
from scripts.selection.records import TEST_SPLIT, VAL_SPLIT
from scripts.selection.release import release
from scripts.selection.table import print_table


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/selection"))
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"), help="Multi30k folder")
    parser.add_argument("--pair", default="en-de")
    parser.add_argument("--beam", type=int, default=5)
    commands = parser.add_subparsers(dest="command", required=True)
    train_command = commands.add_parser("train", help="fit a recipe per seed and score it on val")
    train_command.add_argument("--name", required=True, help="the recipe's name in the table")
    composition = train_command.add_mutually_exclusive_group(required=True)
    composition.add_argument("--config", type=Path, action="append", help="repeat: later win")
    composition.add_argument(
        "--recipe", help=f"a recipe of {RECIPES} for --pair, instead of its --config files"
    )
    train_command.add_argument("--seeds", type=int, nargs="+", default=[1])
    train_command.add_argument(
        "--remove-bpe", action="store_true",
        help="--data is cut into subword-nmt pieces (compare_segmentation.py write): score "
        "translations and references joined into tokens, on val and, by `final`, on test",
    )  # fmt: skip
    train_command.add_argument(
        "override", nargs="*", help="options for seq2seq fit after --, e.g. -- --model.lr 5e-3"
    )
    commands.add_parser("table", help="the val table of every recipe trained in --out")
    final_command = commands.add_parser("final", help="score one recipe on the test set, once")
    final_command.add_argument("--name", required=True)
    final_command.add_argument("--test-split", default=TEST_SPLIT)
    final_command.add_argument("--again", action="store_true", help="score the split once more")
    final_command.add_argument(
        "--skip-scored", action="store_true", help="a split scored already: print its score"
    )
    final_command.add_argument(
        "--recase", type=Path,
        help="a casing table (seq2seq recase --learn) that recases the translations of a "
        "lowercased recipe, so that sacreBLEU scores cased text",
    )  # fmt: skip
    distill_command = commands.add_parser(
        "distill", help="a student's corpus: the training sources translated by a teacher"
    )
    distill_command.add_argument(
        "--teacher", required=True, help="recipe:seed, or an ensemble's name; its val choice"
    )
    distill_command.add_argument("--corpus", type=Path, required=True, help="the new folder")
    distill_command.add_argument("--keep-originals", action="store_true")
    record_command = commands.add_parser(
        "record", help="copy every record and the val table into a folder of the repository"
    )
    record_command.add_argument("--into", type=Path, required=True)
    record_command.add_argument(
        "--names", nargs="+", default=[], help="only these recipes and ensembles (default: all)"
    )
    release_command = commands.add_parser(
        "release", help="a recipe's seed, chosen on val, as a released model in models/NAME"
    )
    release_command.add_argument("--member", required=True, help="recipe:seed")
    release_command.add_argument("--as", dest="release_name", required=True, help="its name")
    release_command.add_argument("--into", type=Path, default=Path("models"))
    release_command.add_argument("--casing", type=Path, help="the casing table it ships with")
    release_command.add_argument("--description", required=True, help="one line: what it is")
    ensemble_command = commands.add_parser(
        "ensemble", help="score an ensemble of trained seeds on val (members: recipe:seed)"
    )
    ensemble_command.add_argument("--name", required=True, help="the ensemble's name")
    ensemble_command.add_argument("--members", nargs="+", required=True)
    ensemble_command.add_argument(
        "--weights", nargs="+", default=[],
        help="weightings to try, each a weight per member, comma-separated (0.7,0.3)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.command == "train" and args.recipe:
        recipes = recipe_configs(args.pair)
        if args.recipe not in recipes:
            parser.error(f"no {args.pair} recipe {args.recipe!r} in {RECIPES}: {sorted(recipes)}")
        args.config = recipes[args.recipe]
    if (
        args.command not in ("table", "record", "release")
        and not (args.data / f"{VAL_SPLIT}.en.gz").exists()
    ):
        parser.error(f"no Multi30k corpus in {args.data} (run `make multi30k` or pass --data)")
    return args


COMMANDS: dict[str, Callable[[argparse.Namespace], None]] = {
    "train": train,
    "table": lambda args: print_table(args.out),
    "ensemble": ensemble,
    "final": final,
    "distill": distill,
    "record": record,
    "release": release,
}


def main() -> None:
    args = parse_args()
    COMMANDS[args.command](args)


if __name__ == "__main__":
    main()
