"""The ``record`` command: a selection's records copied into the repository, never over
records they do not extend."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from scripts.bench.benchkit import load_json, save_json
from scripts.selection.table import print_table

RECORDS = ("recipe.json", "ensemble.json", "val.json", "final.json", "train.json", "distill.json")


def extends(old: Any, new: Any) -> bool:
    """Whether the record ``new`` keeps all that ``old`` holds: an equal value, a mapping with
    each of old's keys extended, a list that begins with old's items extended (val scores
    added to a val.json, a test split added to a final.json)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return all(key in new and extends(value, new[key]) for key, value in old.items())
    if isinstance(old, list) and isinstance(new, list):
        return len(old) <= len(new) and all(map(extends, old, new))
    return old == new


def record(args: argparse.Namespace) -> None:
    """Copy the records of every recipe and ensemble in ``args.out`` that has val scores (its
    JSON files, no checkpoint or translation; those named in ``args.names`` alone, if given)
    into ``args.into``, and write the val table they give there (``val-table.md``,
    ``val-table.png``). A record there that the new one does not extend, such as a teacher
    trained again in the folder of a run whose test score is recorded, stops the copy before
    anything is written."""
    scored = sorted({path.parents[1] for path in args.out.glob("*/seed*/val.json")})
    scored += sorted(path.parent for path in args.out.glob("*/val.json"))  # ensembles
    scored = [folder for folder in scored if not args.names or folder.name in args.names]
    copies = {  # its seeds' records, and a teacher's distill/CORPUS/distill.json
        args.into / path.relative_to(args.out): load_json(path)
        for folder in scored
        for path in sorted(folder.rglob("*.json"))
        if path.name in RECORDS
    }
    clashes = [
        str(path) for path, new in copies.items()
        if path.exists() and not extends(load_json(path), new)
    ]  # fmt: skip
    if clashes:
        sys.exit(
            f"nothing copied: these records in {args.into} hold what the new ones in {args.out} do "
            "not (a run trained again in the same folder?); keep them, and record the others "
            "with --names:\n  " + "\n  ".join(clashes)
        )  # fmt: skip
    for path, new in copies.items():
        save_json(path, new)
    print(f"{len(copies)} records of {len(scored)} recipes and ensembles copied into {args.into}")
    print_table(args.into)
