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
docs/benchmarks/selection.md.

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
import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.bench.benchkit import (
    RECIPES,
    SEQ2SEQ,
    averaged,
    best_checkpoint,
    figure,
    fit_command,
    last_checkpoint,
    load_json,
    markdown_table,
    recent_checkpoints,
    recipe_configs,
    run,
    save_json,
    split_files,
)
from scripts.bench.benchkit import evaluate as evaluate_command
from seq2seq.inference.checkpoint import CHECKPOINT_KEY

VAL_SPLIT = "val"
TEST_SPLIT = "test_2016_flickr"  # the test set the figure shows
AVERAGES = (1, 5, 10)  # the last epoch alone, the mean of the last 5, of the last 10
LENGTH_PENALTIES = (1.0, 1.5, 2.0)
METRICS = ("bleu_literature", "bleu", "chrf")
ENSEMBLE = "ensemble"  # the "model" of an ensemble's settings: its members' chosen models
Scores = dict[str, dict[str, float]]  # setting key -> metric -> score


@dataclass(frozen=True)
class Setting:
    """How a trained run becomes the model that is scored: which checkpoints, which search."""

    model: str  # "last-K" (the mean of the last K epochs), "best" (by val BLEU), "ensemble..."
    length_penalty: float

    @property
    def key(self) -> str:
        return f"{self.model}@lp{self.length_penalty:g}"

    @staticmethod
    def from_key(key: str) -> Setting:
        model, _, penalty = key.partition("@lp")
        return Setting(model, float(penalty))


def evaluate(
    checkpoint: Path | list[Path], src: Path, ref: Path, folder: Path, beam: int, lp: float,
    weights: list[float] | None = None, recase: Path | None = None, remove_bpe: bool = False,
) -> dict[str, float]:  # fmt: skip
    """The scores of one checkpoint (several: an ensemble, weighted by ``weights``, default
    equally) under one length penalty, its translations recased by the table ``recase`` if
    given, their subword-nmt pieces joined with the references' if ``remove_bpe``; the
    hypotheses are kept in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    members = [str(c) for c in checkpoint] if isinstance(checkpoint, list) else str(checkpoint)
    scores = evaluate_command(
        members, src, ref, folder, beam, length_penalty=lp, ensemble_weights=weights,
        recase=recase, remove_bpe=remove_bpe,
    )  # fmt: skip
    return {metric: scores[metric] for metric in METRICS}


def final_models(run_dir: Path, folder: Path) -> dict[str, Path]:
    """A run's candidate final models by name: ``last-K`` for every K of AVERAGES it kept
    enough recent epochs for (``last-1``: its last.ckpt when it kept none), and ``best``
    when a checkpoint was chosen by validation BLEU. A run trained on another machine may
    bring back its averages alone (``folder/last-K.ckpt``, no ``run_dir``): those are its
    candidates."""
    if not run_dir.exists():
        brought = {f"last-{k}": folder / f"last-{k}.ckpt" for k in AVERAGES}
        return {name: path for name, path in brought.items() if path.exists()}
    last, state = last_checkpoint(run_dir)
    recent = recent_checkpoints(run_dir)
    models = {"last-1": recent[-1] if recent else last}
    for k in AVERAGES:
        if k > 1 and len(recent) >= k:
            models[f"last-{k}"] = averaged(recent[-k:], folder / f"last-{k}.ckpt")
    if (best := best_checkpoint(last, state)) != last:
        models["best"] = best
    return models


def fit(args: argparse.Namespace, seed: int, folder: Path) -> dict[str, Any]:
    """Train the recipe with one seed (or find it trained); the fit's time and memory. A
    stopped fit (a last.ckpt but no train.json) continues; the time of each part that stopped
    is kept (stopped.json) and counted in the record of the fit it continues into, which says
    in how many parts the fit ran, and ``resumed`` if its first counted part continued one
    whose time was lost (a part killed with this script): its time is then that of the
    counted parts alone."""
    done, stopped = folder / "train.json", folder / "stopped.json"
    if done.exists():
        return load_json(done)
    resumed = (folder / "run" / "checkpoints" / "last.ckpt").exists()
    seeds = ["--seed_everything", str(seed), "--data.seed", str(seed)]
    command = fit_command(args.config, args.data, folder / "run", *seeds, *args.override)
    command += ["--ckpt_path", "last"] if resumed else []
    print(f"[{args.name} seed {seed}] {' '.join(command[2:])}", flush=True)
    usage = run(command, folder / "fit.out", folder / "fit.log")
    part = {"seconds": usage.seconds, "peak_rss_mb": usage.peak_rss_mb, "resumed": resumed}
    parts = [*(load_json(stopped, []) if resumed else []), part]  # a fresh fit starts anew
    if usage.status != 0:
        save_json(stopped, parts)
        raise RuntimeError(f"training failed (exit {usage.status}), see {folder / 'fit.log'}")
    record = {"seconds": sum(p["seconds"] for p in parts)}
    record |= {"peak_rss_mb": max(p["peak_rss_mb"] for p in parts), "seed": seed}
    record |= {"parts": len(parts), "resumed": parts[0]["resumed"]}
    save_json(done, record)
    stopped.unlink(missing_ok=True)  # counted: train.json holds the parts now
    return record


def score_on_val(
    folder: Path, models: dict[str, tuple[Path | list[Path], list[float] | None]],
    val: tuple[Path, Path], beam: int, remove_bpe: bool = False,
) -> Scores:  # fmt: skip
    """The val scores of every model (its checkpoints and ensemble weights) under every length
    penalty, kept in ``folder``/val.json: a setting scored already is not scored again;
    ``remove_bpe`` as ``evaluate``'s."""
    done = folder / "val.json"
    scores = load_json(done)
    for model, (checkpoint, weights) in models.items():
        for lp in LENGTH_PENALTIES:
            if (key := Setting(model, lp).key) not in scores:
                scratch = folder / "val" / key
                scores[key] = evaluate(
                    checkpoint, *val, scratch, beam, lp, weights, remove_bpe=remove_bpe
                )
                save_json(done, scores)
    return scores


def train(args: argparse.Namespace) -> None:
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
        fit(args, seed, folder)
        models = {name: (path, None) for name, path in final_models(folder / "run", folder).items()}
        score_on_val(folder, models, val, args.beam, args.remove_bpe)
    print_table(args.out)


def seed_scores(recipe_dir: Path) -> dict[int, Scores]:
    """Each trained seed's val scores by setting key."""
    return {
        int(path.parent.name.removeprefix("seed")): load_json(path)
        for path in sorted(recipe_dir.glob("seed*/val.json"))
    }


def mean_and_spread(values: list[float]) -> str:
    spread = f" ± {statistics.stdev(values):.2f}" if len(values) > 1 else ""
    return f"{statistics.mean(values):.2f}{spread}"


def chosen_setting(per_seed: dict[int, Scores]) -> Setting:
    """The setting with the highest mean val literature BLEU over the seeds that have it."""
    keys = set.intersection(*(set(scores) for scores in per_seed.values()))
    mean = {k: statistics.mean(s[k]["bleu_literature"] for s in per_seed.values()) for k in keys}
    return Setting.from_key(max(sorted(mean), key=mean.__getitem__))


def val_rows(out: Path) -> list[list[str]]:
    """A table row per recipe: its val-chosen setting and scores (mean ± sd over seeds)."""
    rows = []
    for recipe_dir in sorted(p for p in out.iterdir() if (p / "recipe.json").exists()):
        if not (per_seed := seed_scores(recipe_dir)):
            continue
        setting = chosen_setting(per_seed)
        cells = [recipe_dir.name, ", ".join(map(str, per_seed)), setting.model]
        cells.append(f"{setting.length_penalty:g}")
        cells += [mean_and_spread([s[setting.key][m] for s in per_seed.values()]) for m in METRICS]
        fits = [load_json(recipe_dir / f"seed{seed}" / "train.json") for seed in per_seed]
        minutes = f"{statistics.mean(fit['seconds'] / 60 for fit in fits):.0f}"
        minutes += " (in parts)" if any(fit.get("parts", 1) > 1 for fit in fits) else ""
        minutes += " (resumed: the last part)" if any(fit.get("resumed") for fit in fits) else ""
        if trained_on := load_json(recipe_dir / "recipe.json").get("trained_on"):
            minutes += f" on {trained_on.split(',')[0]}"  # a lent GPU, not this machine
        cells.append(minutes)
        tested = first_test_scores(recipe_dir)
        cells.append(
            mean_and_spread([s["bleu_literature"] for s in tested.values()]) if tested else "–"
        )
        rows.append(cells)
    return rows


def print_table(out: Path) -> None:
    scores = ["length penalty", "val BLEU (lit.)", "val sacreBLEU", "val chrF"]
    header = ["recipe", "seeds", "model", *scores, "train min"]
    lines = markdown_table([*header, f"{TEST_SPLIT} BLEU (lit.), scored once"], val_rows(out))
    if ensembles := ensemble_rows(out):
        lines += ["", *markdown_table(["ensemble", "members", "weights", *scores], ensembles)]
    (out / "val-table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if found := candidates(out):
        draw_candidates(found, out / "val-table.png")
        print(f"wrote {out / 'val-table.png'}")


@dataclass(frozen=True)
class Candidate:
    """What the figure shows of a recipe or an ensemble: the val literature BLEU of its
    val-chosen setting (one per seed; one for an ensemble) and its first test scores."""

    name: str
    val: list[float]
    test: list[float]


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


def test_scorings(folder: Path, split: str) -> list[dict[str, Any]]:
    """Each time ``folder``'s recipe or ensemble was scored on ``split``, first first (a record
    that names no split was on the default test set)."""
    records = load_json(folder / "final.json", [])
    return [record for record in records if record.get("split", TEST_SPLIT) == split]


def first_test_scores(folder: Path, split: str = TEST_SPLIT) -> dict[str, Any]:
    """Each seed's (or the ensemble's) scores of the first time it was scored on ``split``
    (empty: never): a seed trained after its recipe was scored has its own first scoring."""
    first: dict[str, Any] = {}
    for record in test_scorings(folder, split):
        for name, scores in record["scores"].items():
            first.setdefault(name, scores)
    return first


def draw_candidates(found: list[Candidate], path: Path) -> None:
    """One row per candidate: its seeds' val BLEU (dots) and their mean (a bar), and its
    test scores (crosses) where it was scored, so that the gap between the two shows."""
    with figure(path, figsize=(7, 1.2 + 0.35 * len(found))) as axes:
        val_seed = dict(marker="o", ls="", color="tab:blue", alpha=0.6, label="val, a seed")
        val_mean = dict(marker="|", ls="", color="tab:blue", ms=14, mew=2, label="val, mean")
        test = dict(marker="x", ls="", color="tab:red", mew=2, label="test, scored once")
        for row, candidate in enumerate(found):
            axes.plot(candidate.val, [row] * len(candidate.val), **val_seed)
            axes.plot([statistics.mean(candidate.val)], [row], **val_mean)
            axes.plot(candidate.test, [row] * len(candidate.test), **test)
        axes.set_yticks(range(len(found)), [candidate.name for candidate in found])
        axes.invert_yaxis()
        axes.set_xlabel("literature BLEU, beam 5, under the setting val chose")
        axes.grid(axis="x", alpha=0.3)
        handles, labels = axes.get_legend_handles_labels()
        axes.legend(handles[:3], labels[:3], loc="lower left", fontsize="small")


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
        checkpoint = final_models(folder / "run", folder)[setting.model]
        scratch = folder / args.test_split
        scores[seed] = evaluate(
            checkpoint, *test, scratch, args.beam, setting.length_penalty,
            recase=args.recase, remove_bpe=remove_bpe,
        )  # fmt: skip
    return {"setting": setting.key, "scores": scores}


def ensemble_model(weights: list[float] | None) -> str:
    """The "model" of an ensemble's setting: ``ensemble`` (equal weights) or
    ``ensemble[0.7,0.3]``."""
    return ENSEMBLE if weights is None else f"{ENSEMBLE}[{','.join(f'{w:g}' for w in weights)}]"


def ensemble_weights(model: str) -> list[float] | None:
    """The weights an ensemble's setting names (None: equal, or not an ensemble's setting);
    ``ensemble_model`` reversed."""
    if not model.startswith(ENSEMBLE):
        return None
    inside = model.removeprefix(ENSEMBLE).strip("[]")
    return [float(w) for w in inside.split(",")] if inside else None


def scores_joined_pieces(recipe_dir: Path) -> bool:
    """Whether the recipe was trained with ``--remove-bpe``: on a corpus of subword-nmt
    pieces, scored once they are joined."""
    recipe = recipe_dir / "recipe.json"
    return recipe.exists() and load_json(recipe).get("remove_bpe", False)


def member_model(out: Path, member: str) -> tuple[Path, Setting]:
    """The model of ``member`` (``recipe:seed``) and its recipe's val-chosen setting, which
    names that model in the seed's run."""
    recipe, _, seed = member.partition(":")
    if scores_joined_pieces(out / recipe):
        sys.exit(f"{recipe} is scored on joined subword-nmt pieces (train --remove-bpe): it "
                 "cannot be an ensemble's member or a teacher")  # fmt: skip
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
    weighting of ``args.weights`` (none: equal weights); the scores of earlier weightings are
    kept, so that val chooses among them all."""
    folder = args.out / args.name
    known = folder / "ensemble.json"
    if known.exists() and load_json(known)["members"] != args.members:
        sys.exit(f"{args.name} is an ensemble of other members ({known}); choose another --name")
    save_json(known, {"members": args.members})
    models = [member_model(args.out, member)[0] for member in args.members]
    weightings = [parse_weighting(w, len(models)) for w in args.weights] or [None]
    choices = {ensemble_model(weights): (models, weights) for weights in weightings}
    score_on_val(folder, choices, split_files(args.data, VAL_SPLIT, args.pair), args.beam)
    print_table(args.out)


def ensemble_choice(folder: Path) -> tuple[Setting, dict[str, float]]:
    """The setting (weights and length penalty) val chose for the ensemble in ``folder``,
    and its val scores."""
    scores = load_json(folder / "val.json")
    setting = chosen_setting({0: scores})
    return setting, scores[setting.key]


def ensemble_rows(out: Path) -> list[list[str]]:
    """A table row per ensemble: its members and its val-chosen setting's scores."""
    rows = []
    for folder in sorted(p for p in out.iterdir() if (p / "ensemble.json").exists()):
        if not (folder / "val.json").exists():
            continue
        setting, scores = ensemble_choice(folder)
        members = ", ".join(load_json(folder / "ensemble.json")["members"])
        weights = ensemble_weights(setting.model)
        weighting = "equal" if weights is None else ", ".join(f"{w:g}" for w in weights)
        cells = [folder.name, members, weighting, f"{setting.length_penalty:g}"]
        cells += [f"{scores[m]:.2f}" for m in METRICS]
        rows.append(cells)
    return rows


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
    chosen = {member: member_model(args.out, member) for member in members}
    scores = {}
    for member, (model, member_setting) in chosen.items():
        scores[member] = evaluate(model, *test, scratch[member], args.beam,
                                  member_setting.length_penalty, recase=args.recase)  # fmt: skip
    models = [model for model, _ in chosen.values()]
    weights, penalty = ensemble_weights(setting.model), setting.length_penalty
    scores[ENSEMBLE] = evaluate(
        models, *test, scratch[ENSEMBLE], args.beam, penalty, weights, args.recase
    )
    best = max(members, key=lambda m: scores[m]["bleu_literature"])
    hypotheses = [read_lines(scratch[name] / "hypotheses.txt") for name in (best, ENSEMBLE)]
    target_lang = args.pair.split("-")[1]
    test_result = paired_bootstrap(*hypotheses, read_lines(test[1]), literature_lang=target_lang)
    return {"setting": setting.key, "scores": scores,
            "bootstrap": {"baseline": best, **test_result}}  # fmt: skip


def teacher_model(out: Path, teacher: str) -> tuple[list[Path], Setting]:
    """The checkpoints of ``teacher`` (``recipe:seed``: one; an ensemble's name: its members)
    and the setting val chose for it (its length penalty; an ensemble's weights)."""
    if ":" in teacher:
        model, setting = member_model(out, teacher)
        return [model], setting
    folder = out / teacher
    if not (folder / "ensemble.json").exists() or not (folder / "val.json").exists():
        sys.exit(f"--teacher {teacher}: neither recipe:seed nor a val-scored ensemble in {out}")
    members = load_json(folder / "ensemble.json")["members"]
    return [member_model(out, member)[0] for member in members], ensemble_choice(folder)[0]


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


def main() -> None:
    args = parse_args()
    {"train": train, "table": lambda args: print_table(args.out), "ensemble": ensemble,
     "final": final, "distill": distill, "record": record,
     "release": release}[args.command](args)  # fmt: skip


if __name__ == "__main__":
    main()
