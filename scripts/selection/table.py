"""The val table of a selection folder (``val-table.md``) and its figure (``val-table.png``):
per recipe its val-chosen setting and scores over seeds, per ensemble its weights, and the
test score each was given once."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from scripts.bench.benchkit import figure, load_json, markdown_table
from scripts.selection.records import (
    ENSEMBLE,
    METRICS,
    TEST_SPLIT,
    chosen_setting,
    ensemble_choice,
    ensemble_weights,
    first_test_scores,
    seed_scores,
)


def mean_and_spread(values: list[float]) -> str:
    spread = f" ± {statistics.stdev(values):.2f}" if len(values) > 1 else ""
    return f"{statistics.mean(values):.2f}{spread}"


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
