"""The ``release`` command: a recipe's seed, chosen on val, as a released model."""

from __future__ import annotations

import argparse
import shutil

from scripts.bench.benchkit import load_json
from scripts.selection.runs import member_model
from seq2seq.inference.checkpoint import CHECKPOINT_KEY

# Sentences written for the released models' checks (captions, as Multi30k's are, but none
# of its text): each release records their translations by the full-precision checkpoint,
# which `make test` then expects of the shipped file.
CHECK_SENTENCES = (
    "A young girl in a pink dress is running across the grass.",
    "Two men are playing guitars on a small stage.",
    "A black dog jumps into the lake to catch a ball.",
    "An old woman sells vegetables at a busy market.",
    "A boy in a blue helmet rides his bicycle down the street.",
    "Three children are sitting on a bench in the park.",
)


def release(args: argparse.Namespace) -> None:
    """The chosen model of a recipe's seed (the setting val chose over its seeds) as the
    released model ``models/NAME``: its weights in float16, the val-chosen length penalty
    as its own search, the casing table if given, and a manifest with every file's sha256
    and the check sentences' translations by the full-precision checkpoint, which the
    shipped file must give too."""
    import torch

    import seq2seq
    from seq2seq.inference.checkpoint import read_checkpoint, save_checkpoint
    from seq2seq.inference.released import MODEL_FILE, half_precision, sha256, write_manifest

    checkpoint, setting = member_model(args.out, args.member)
    folder = args.into / args.release_name
    folder.mkdir(parents=True, exist_ok=True)
    trained = read_checkpoint(checkpoint)
    search = {**trained[CHECKPOINT_KEY]["search"], "beam": args.beam,
              "length_penalty": setting.length_penalty}  # fmt: skip
    save_checkpoint(half_precision(trained, search), folder / MODEL_FILE)
    files = [MODEL_FILE]
    if args.casing:
        shutil.copyfile(args.casing, folder / args.casing.name)
        files.append(args.casing.name)
    recase = args.casing or False
    options = {"beam": args.beam, "length_penalty": setting.length_penalty}
    full = seq2seq.load(checkpoint, recase=recase).translate(list(CHECK_SENTENCES), **options)
    shipped = seq2seq.load(folder / MODEL_FILE, recase=recase).translate(list(CHECK_SENTENCES))
    recipe = load_json(args.out / args.member.split(":")[0] / "recipe.json")
    src_lang, tgt_lang = args.pair.split("-")
    manifest = {
        "name": args.release_name, "description": args.description,
        "src_lang": src_lang, "tgt_lang": tgt_lang,
        "casing": args.casing.name if args.casing else None,
        "released_from": {
            "recipe": args.member, "setting": setting.key, "config": recipe["config"],
            "override": recipe["override"], "full_precision_sha256": sha256(checkpoint),
            "parameters": sum({v.untyped_storage().data_ptr(): v.numel()  # tied: once
                               for v in trained["state_dict"].values()
                               if isinstance(v, torch.Tensor) and v.is_floating_point()}.values()),
        },
        "checks": {"sources": list(CHECK_SENTENCES), "translations": full},
    }  # fmt: skip
    write_manifest(folder, manifest, files)
    for source, expected, got in zip(CHECK_SENTENCES, full, shipped, strict=True):
        print(f"{'=' if expected == got else 'DIFFERS'} {source} -> {expected}")
        if expected != got:
            print(f"        float16: {got}")
    print(f"released {args.member} ({setting.key}) as {folder}")
