"""Choose a recipe on val alone; then score the chosen one on the test set, once.

Every choice of a recipe (architecture, size, vocabulary, dropout, schedule, epochs, which
checkpoints to average, length penalty) is made here on the ``val`` split. ``train`` and
``table`` never read a test split. ``final`` scores one recipe on the test set with the
settings val chose, and records that it did: asking again is refused (``--again`` scores
once more and keeps every earlier score beside the new one), so a test score cannot quietly
become one more thing to tune on.

    python scripts/select_on_val.py train --name anchor --seeds 1 2 3 \\
        --config configs/multi30k/base/transformer.yaml --config my-variant.yaml
    python scripts/select_on_val.py table                 # val: mean and spread per recipe
    python scripts/select_on_val.py final --name anchor   # test_2016_flickr, once
    python scripts/select_on_val.py ensemble --name two --members anchor:1 anchor:2
    python scripts/select_on_val.py final --name two      # the ensemble and its members

``train`` fits the recipe once per seed (``seed_everything`` and the batch order), then
scores on val, with beam search, every final model the run allows: the last epoch, the
average of its last 5 and last 10 epochs (from the ``recent-*.ckpt`` a recipe keeps), and
the best checkpoint by validation BLEU, each under several length penalties. ``table``
picks, per recipe, the setting with the highest mean literature BLEU over seeds, and
reports it with its spread (``val-table.md``), and draws every candidate's val scores
beside its test score, once it has one (``val-table.png``). ``ensemble`` decodes with
several trained seeds at once (each member the model its recipe's val-chosen setting names)
and chooses the ensemble's length penalty on val; its ``final`` scores the ensemble and each
member on the test set, with sacreBLEU's paired bootstrap of the ensemble against its best
member (on literature BLEU, the measure that chose them). Results live in ``--out``
(default ``runs/selection``); an interrupted ``train`` continues where it stopped.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bench_quality
from bench_quality import SEQ2SEQ, best_checkpoint, last_checkpoint, run, split_files

VAL_SPLIT = "val"
AVERAGES = (1, 5, 10)  # the last epoch alone, the mean of the last 5, of the last 10
LENGTH_PENALTIES = (1.0, 1.5, 2.0)


@dataclass(frozen=True)
class Setting:
    """How a trained run becomes the model that is scored: which checkpoints, which search."""

    model: str  # "last-K" (the mean of the last K epochs) or "best" (by val BLEU)
    length_penalty: float

    @property
    def key(self) -> str:
        return f"{self.model}@lp{self.length_penalty:g}"

    @staticmethod
    def from_key(key: str) -> Setting:
        model, _, penalty = key.partition("@lp")
        return Setting(model, float(penalty))


def evaluate(
    checkpoint: Path | list[Path],
    src: Path,
    ref: Path,
    folder: Path,
    beam: int,
    lp: float,
    weights: list[float] | None = None,
) -> dict:
    """The val (or test) scores of one checkpoint (several: an ensemble, its members
    weighted by ``weights``, default equally) under one length penalty; the hypotheses are
    kept in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    members = [str(c) for c in checkpoint] if isinstance(checkpoint, list) else str(checkpoint)
    scores = bench_quality.evaluate(
        members, src, ref, folder, beam, length_penalty=lp, ensemble_weights=weights
    )
    return {metric: scores[metric] for metric in ("bleu_literature", "bleu", "chrf")}


def recent_checkpoints(run_dir: Path) -> list[Path]:
    """The run's ``recent-*.ckpt``, oldest epoch first (their names sort by epoch)."""
    return sorted(run_dir.glob("checkpoints/recent-*.ckpt"))


def final_models(run_dir: Path, folder: Path) -> dict[str, Path]:
    """Each candidate final model of a run by name: ``last-K`` for every K of AVERAGES the
    run kept enough epochs for (K = 1: the last epoch; the run's last.ckpt when it kept no
    recent epochs), and ``best`` when a checkpoint was chosen by validation BLEU."""
    last, state = last_checkpoint(run_dir)
    recent = recent_checkpoints(run_dir)
    models = {"last-1": recent[-1] if recent else last}
    for k in AVERAGES:
        if k > 1 and len(recent) >= k:
            averaged = folder / f"last-{k}.ckpt"
            if not averaged.exists():
                command = [*SEQ2SEQ, "average", "--ckpts", *map(str, recent[-k:])]
                command += ["--out", str(averaged)]
                usage = run(command, folder / "avg.out", folder / "avg.log")
                if usage["status"] != 0:
                    raise RuntimeError(f"averaging failed, see {folder / 'avg.log'}")
            models[f"last-{k}"] = averaged
    best = best_checkpoint(last, state)
    if best != last:
        models["best"] = best
    return models


def fit(args: argparse.Namespace, seed: int, folder: Path) -> dict[str, Any]:
    """Train the recipe with one seed (or find it trained); the fit's time and memory. A fit
    that was stopped (its run has a last.ckpt but no train.json) continues from where it
    stopped, and its record says so: its time is then that of the last part alone."""
    done = folder / "train.json"
    if done.exists():
        return json.loads(done.read_text())
    resumed = (folder / "run" / "checkpoints" / "last.ckpt").exists()
    command = [*SEQ2SEQ, "fit"]
    for config in args.config:
        command += ["--config", str(config)]
    command += [
        "--seed_everything", str(seed), "--data.seed", str(seed),
        "--data.source", str(args.data), "--trainer.default_root_dir", str(folder / "run"),
        "--trainer.enable_progress_bar", "false", *args.override,
    ]  # fmt: skip
    command += ["--ckpt_path", "last"] if resumed else []
    print(f"[{args.name} seed {seed}] {' '.join(command[2:])}", flush=True)
    usage = run(command, folder / "fit.out", folder / "fit.log")
    if usage["status"] != 0:
        raise RuntimeError(f"training failed (exit {usage['status']}), see {folder / 'fit.log'}")
    record = {"seconds": usage["seconds"], "peak_rss_mb": usage["peak_rss_mb"], "seed": seed}
    record["resumed"] = resumed
    done.write_text(json.dumps(record, indent=2) + "\n")
    return record


def score_on_val(args: argparse.Namespace, folder: Path, val: tuple[Path, Path]) -> dict:
    """Every setting's val scores for one trained seed (kept in val.json)."""
    done = folder / "val.json"
    scores = json.loads(done.read_text()) if done.exists() else {}
    for model, checkpoint in final_models(folder / "run", folder).items():
        for lp in LENGTH_PENALTIES:
            setting = Setting(model, lp)
            if setting.key not in scores:
                scratch = folder / "val" / setting.key
                scores[setting.key] = evaluate(checkpoint, *val, scratch, args.beam, lp)
                done.write_text(json.dumps(scores, indent=2) + "\n")
    return scores


def train(args: argparse.Namespace) -> None:
    recipe_dir = args.out / args.name
    recipe_dir.mkdir(parents=True, exist_ok=True)
    recipe = {"config": [str(c) for c in args.config], "override": args.override}
    known = recipe_dir / "recipe.json"
    if known.exists() and json.loads(known.read_text()) != recipe:
        sys.exit(f"{args.name} was trained with another recipe ({known}); choose another --name")
    known.write_text(json.dumps(recipe, indent=2) + "\n")
    val = split_files(args.data, VAL_SPLIT, args.pair, None, recipe_dir)
    for seed in args.seeds:
        folder = recipe_dir / f"seed{seed}"
        folder.mkdir(exist_ok=True)
        fit(args, seed, folder)
        score_on_val(args, folder, val)
    print_table(args.out)


def seed_scores(recipe_dir: Path) -> dict[int, dict[str, dict[str, float]]]:
    """Each trained seed's val scores by setting key."""
    found = {}
    for path in sorted(recipe_dir.glob("seed*/val.json")):
        found[int(path.parent.name.removeprefix("seed"))] = json.loads(path.read_text())
    return found


def mean_and_spread(values: list[float]) -> str:
    spread = f" ± {statistics.stdev(values):.2f}" if len(values) > 1 else ""
    return f"{statistics.mean(values):.2f}{spread}"


def chosen_setting(per_seed: dict[int, dict[str, dict[str, float]]]) -> Setting:
    """The setting with the highest mean val literature BLEU over the seeds that have it."""
    keys = set.intersection(*(set(scores) for scores in per_seed.values()))
    mean = {k: statistics.mean(s[k]["bleu_literature"] for s in per_seed.values()) for k in keys}
    return Setting.from_key(max(sorted(mean), key=mean.__getitem__))


def val_rows(out: Path) -> list[str]:
    """A Markdown row per recipe: its val-chosen setting and scores (mean ± sd over seeds)."""
    rows = []
    for recipe_dir in sorted(p for p in out.iterdir() if (p / "recipe.json").exists()):
        per_seed = seed_scores(recipe_dir)
        if not per_seed:
            continue
        setting = chosen_setting(per_seed)
        cells = [recipe_dir.name, ", ".join(map(str, per_seed)), setting.model]
        cells.append(f"{setting.length_penalty:g}")
        for metric in ("bleu_literature", "bleu", "chrf"):
            cells.append(mean_and_spread([s[setting.key][metric] for s in per_seed.values()]))
        fits = [
            json.loads((recipe_dir / f"seed{seed}" / "train.json").read_text()) for seed in per_seed
        ]
        minutes = f"{statistics.mean(fit['seconds'] / 60 for fit in fits):.0f}"
        resumed = any(fit.get("resumed") for fit in fits)
        cells.append(minutes + (" (resumed: the last part)" if resumed else ""))
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def print_table(out: Path) -> None:
    lines = [
        "| recipe | seeds | model | length penalty | val BLEU (lit.) | val sacreBLEU | val chrF "
        "| train min |",
        "|---|---|---|---|---|---|---|---|",
        *val_rows(out),
    ]
    if ensembles := ensemble_rows(out):
        lines += [
            "",
            "| ensemble | members | weights | length penalty | val BLEU (lit.) | val sacreBLEU "
            "| val chrF |",
            "|---|---|---|---|---|---|---|",
            *ensembles,
        ]
    (out / "val-table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if found := candidates(out):
        draw_candidates(found, out / "val-table.png")
        print(f"wrote {out / 'val-table.png'}")


@dataclass(frozen=True)
class Candidate:
    """What the figure shows of a recipe or an ensemble: the val literature BLEU of its
    val-chosen setting (one per seed; one for an ensemble) and its first test scores, if
    it was scored."""

    name: str
    val: list[float]
    test: list[float]


def first_test_scores(folder: Path) -> dict[str, dict[str, float]]:
    """The scores of the first test scoring recorded in ``folder`` (the one reported), by
    seed or member; empty before any."""
    record = folder / "final.json"
    return json.loads(record.read_text())[0]["scores"] if record.exists() else {}


def candidates(out: Path) -> list[Candidate]:
    """Every recipe and ensemble in ``out`` that has val scores, recipes first, by name."""
    recipes, ensembles = [], []
    for folder in sorted(p for p in out.iterdir() if p.is_dir()):
        tested = first_test_scores(folder)
        if (folder / "ensemble.json").exists() and (folder / "val.json").exists():
            val = ensemble_choice(folder)[1]["bleu_literature"]
            test = [tested[ENSEMBLE]["bleu_literature"]] if tested else []
            ensembles.append(Candidate(folder.name, [val], test))
        elif (folder / "recipe.json").exists() and (per_seed := seed_scores(folder)):
            key = chosen_setting(per_seed).key
            val = [scores[key]["bleu_literature"] for scores in per_seed.values()]
            test = [scores["bleu_literature"] for scores in tested.values()]
            recipes.append(Candidate(folder.name, val, test))
    return recipes + ensembles


def draw_candidates(found: list[Candidate], path: Path) -> None:
    """One row per candidate: its seeds' val BLEU (dots) and their mean (a bar), and its
    test scores (crosses) where it was scored, so that the gap between the two shows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    figure, axes = plt.subplots(figsize=(7, 1.2 + 0.35 * len(found)))
    for row, candidate in enumerate(found):
        axes.plot(candidate.val, [row] * len(candidate.val), "o", color="tab:blue", alpha=0.6)
        axes.plot([statistics.mean(candidate.val)], [row], "|", color="tab:blue", ms=14, mew=2)
        axes.plot(candidate.test, [row] * len(candidate.test), "x", color="tab:red", mew=2)
    axes.set_yticks(range(len(found)), [candidate.name for candidate in found])
    axes.invert_yaxis()
    axes.set_xlabel("literature BLEU, beam 5, under the setting val chose")
    axes.grid(axis="x", alpha=0.3)
    axes.legend(
        handles=[
            Line2D([], [], marker="o", ls="", color="tab:blue", alpha=0.6, label="val, a seed"),
            Line2D([], [], marker="|", ls="", color="tab:blue", ms=14, mew=2, label="val, mean"),
            Line2D([], [], marker="x", ls="", color="tab:red", mew=2, label="test, scored once"),
        ],
        loc="lower left",
        fontsize="small",
    )
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


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
    history = json.loads(record_path.read_text()) if record_path.exists() else []
    if history and not args.again:
        sys.exit(
            f"{args.name} was scored on the test set already ({record_path}); the first score "
            "is the one to report (--again scores once more and keeps both)"
        )
    record = final_ensemble(args, folder) if is_ensemble else final_seeds(args, folder)
    history.append({
        "when": time.strftime("%Y-%m-%d %H:%M:%S"), "split": args.test_split,
        "beam": args.beam, **record,
    })  # fmt: skip
    record_path.write_text(json.dumps(history, indent=2) + "\n")
    for metric in ("bleu_literature", "bleu", "chrf"):
        values = {str(name): s[metric] for name, s in record["scores"].items()}
        each = ", ".join(f"{name} {v:.2f}" for name, v in values.items())
        print(f"{args.name} {args.test_split} {metric}: {each}")
    if is_ensemble:
        bootstrap = record["bootstrap"]
        print(f"paired bootstrap (literature BLEU), ensemble against {bootstrap['baseline']}: "
              f"p = {bootstrap['p_value']:.4f}")  # fmt: skip


def final_seeds(args: argparse.Namespace, recipe_dir: Path) -> dict[str, Any]:
    """The test scores of each seed of a recipe under the setting val chose."""
    per_seed = seed_scores(recipe_dir)
    setting = chosen_setting(per_seed)
    test = split_files(args.data, args.test_split, args.pair, None, recipe_dir)
    scores = {}
    for seed in per_seed:
        folder = recipe_dir / f"seed{seed}"
        checkpoint = final_models(folder / "run", folder)[setting.model]
        scores[seed] = evaluate(
            checkpoint, *test, folder / args.test_split, args.beam, setting.length_penalty
        )
    return {"setting": setting.key, "scores": scores}


ENSEMBLE = "ensemble"  # the "model" of an ensemble's settings: its members' chosen models


def ensemble_model(weights: list[float] | None) -> str:
    """The "model" of an ensemble's setting: ``ensemble`` (equal weights) or
    ``ensemble[0.7,0.3]``."""
    return ENSEMBLE if weights is None else f"{ENSEMBLE}[{','.join(f'{w:g}' for w in weights)}]"


def ensemble_weights(model: str) -> list[float] | None:
    """The weights an ensemble's setting names (None: equal); ``ensemble_model`` reversed."""
    inside = model.removeprefix(ENSEMBLE).strip("[]")
    return [float(w) for w in inside.split(",")] if inside else None


def member_model(out: Path, member: str) -> tuple[Path, Setting]:
    """The model of ``member`` (``recipe:seed``) and its recipe's val-chosen setting, which
    names that model in the seed's run."""
    recipe, _, seed = member.partition(":")
    per_seed = seed_scores(out / recipe)
    if not seed.isdigit() or int(seed) not in per_seed:
        sys.exit(f"no val-scored seed {seed!r} of {recipe!r} in {out} (members are recipe:seed)")
    folder = out / recipe / f"seed{seed}"
    setting = chosen_setting(per_seed)
    return final_models(folder / "run", folder)[setting.model], setting


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
    weighting of ``args.weights`` (each a comma-separated weight per member; none: equal
    weights). Scores of earlier weightings are kept, so that val chooses among them all."""
    folder = args.out / args.name
    folder.mkdir(parents=True, exist_ok=True)
    known = folder / "ensemble.json"
    if known.exists() and json.loads(known.read_text())["members"] != args.members:
        sys.exit(f"{args.name} is an ensemble of other members ({known}); choose another --name")
    known.write_text(json.dumps({"members": args.members}, indent=2) + "\n")
    models = [member_model(args.out, member)[0] for member in args.members]
    val = split_files(args.data, VAL_SPLIT, args.pair, None, folder)
    done = folder / "val.json"
    scores = json.loads(done.read_text()) if done.exists() else {}
    weightings = [parse_weighting(w, len(models)) for w in args.weights] or [None]
    for weights in weightings:
        for lp in LENGTH_PENALTIES:
            setting = Setting(ensemble_model(weights), lp)
            if setting.key not in scores:
                scores[setting.key] = evaluate(models, *val, folder / "val" / setting.key,
                                               args.beam, lp, weights)  # fmt: skip
                done.write_text(json.dumps(scores, indent=2) + "\n")
    print_table(args.out)


def ensemble_choice(folder: Path) -> tuple[Setting, dict[str, float]]:
    """The setting (weights and length penalty) val chose for the ensemble in ``folder``,
    and its val scores."""
    scores = json.loads((folder / "val.json").read_text())
    setting = chosen_setting({0: scores})
    return setting, scores[setting.key]


def ensemble_rows(out: Path) -> list[str]:
    """A Markdown row per ensemble: its members and its val-chosen length penalty's scores."""
    rows = []
    for folder in sorted(p for p in out.iterdir() if (p / "ensemble.json").exists()):
        if not (folder / "val.json").exists():
            continue
        setting, scores = ensemble_choice(folder)
        members = ", ".join(json.loads((folder / "ensemble.json").read_text())["members"])
        weights = ensemble_weights(setting.model)
        weighting = "equal" if weights is None else ", ".join(f"{w:g}" for w in weights)
        cells = [folder.name, members, weighting, f"{setting.length_penalty:g}"]
        cells += [f"{scores[m]:.2f}" for m in ("bleu_literature", "bleu", "chrf")]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def final_ensemble(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """The test scores of an ensemble (under its val-chosen weights and length penalty) and
    of each member (under its recipe's val-chosen setting), and the paired bootstrap of the ensemble
    against its best member, on literature BLEU, which chose the member and also scores a
    recipe trained on lowercased text."""
    from seq2seq.metrics import paired_bootstrap
    from seq2seq.text_lines import read_lines

    members = json.loads((folder / "ensemble.json").read_text())["members"]
    setting = ensemble_choice(folder)[0]
    test = split_files(args.data, args.test_split, args.pair, None, folder)
    scratch = {name: folder / args.test_split / name.replace(":", "-seed")
               for name in (*members, ENSEMBLE)}  # fmt: skip
    chosen = {member: member_model(args.out, member) for member in members}
    scores = {}
    for member, (model, member_setting) in chosen.items():
        scores[member] = evaluate(model, *test, scratch[member], args.beam,
                                  member_setting.length_penalty)  # fmt: skip
    models = [model for model, _ in chosen.values()]
    weights, penalty = ensemble_weights(setting.model), setting.length_penalty
    scores[ENSEMBLE] = evaluate(models, *test, scratch[ENSEMBLE], args.beam, penalty, weights)
    best = max(members, key=lambda m: scores[m]["bleu_literature"])
    hypotheses = [read_lines(scratch[name] / "hypotheses.txt") for name in (best, ENSEMBLE)]
    target_lang = args.pair.split("-")[1]
    test_result = paired_bootstrap(*hypotheses, read_lines(test[1]), literature_lang=target_lang)
    return {
        "setting": setting.key,
        "scores": scores,
        "bootstrap": {"baseline": best, **test_result},
    }  # fmt: skip


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/selection"))
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"), help="Multi30k folder")
    parser.add_argument("--pair", default="en-de")
    parser.add_argument("--beam", type=int, default=5)
    commands = parser.add_subparsers(dest="command", required=True)
    fit_command = commands.add_parser("train", help="fit a recipe per seed and score it on val")
    fit_command.add_argument("--name", required=True, help="the recipe's name in the table")
    fit_command.add_argument("--config", type=Path, action="append", required=True)
    fit_command.add_argument("--seeds", type=int, nargs="+", default=[1])
    fit_command.add_argument(
        "override", nargs="*", help="options for seq2seq fit after --, e.g. -- --model.lr 5e-3"
    )
    commands.add_parser("table", help="the val table of every recipe trained in --out")
    final_command = commands.add_parser("final", help="score one recipe on the test set, once")
    final_command.add_argument("--name", required=True)
    final_command.add_argument("--test-split", default="test_2016_flickr")
    final_command.add_argument("--again", action="store_true")
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
    if (
        args.command in ("train", "final", "ensemble")
        and not (args.data / f"{VAL_SPLIT}.en.gz").exists()
    ):
        parser.error(f"no Multi30k corpus in {args.data} (run `make multi30k` or pass --data)")
    return args


def main() -> None:
    args = parse_args()
    if args.command == "train":
        train(args)
    elif args.command == "table":
        print_table(args.out)
    elif args.command == "ensemble":
        ensemble(args)
    else:
        final(args)


if __name__ == "__main__":
    main()
