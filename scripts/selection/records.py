"""What a selection folder holds and what it says: the settings a run is scored under, each
seed's val scores, the setting val chooses, an ensemble's weights, the test scorings.
Reading only; nothing here trains or translates.

A selection folder (``--out``) holds a folder per recipe (``recipe.json``, and per seed
``seedN/train.json`` and ``seedN/val.json``) or ensemble (``ensemble.json``, ``val.json``),
each with its ``final.json``: every time it was scored on a test split.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.bench.benchkit import load_json

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


def seed_scores(recipe_dir: Path) -> dict[int, Scores]:
    """Each trained seed's val scores by setting key."""
    return {
        int(path.parent.name.removeprefix("seed")): load_json(path)
        for path in sorted(recipe_dir.glob("seed*/val.json"))
    }


def chosen_setting(per_seed: dict[int, Scores]) -> Setting:
    """The setting with the highest mean val literature BLEU over the seeds that have it."""
    keys = set.intersection(*(set(scores) for scores in per_seed.values()))
    mean = {k: statistics.mean(s[k]["bleu_literature"] for s in per_seed.values()) for k in keys}
    return Setting.from_key(max(sorted(mean), key=mean.__getitem__))


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


def ensemble_choice(folder: Path) -> tuple[Setting, dict[str, float]]:
    """The setting (weights and length penalty) val chose for the ensemble in ``folder``,
    and its val scores."""
    scores = load_json(folder / "val.json")
    setting = chosen_setting({0: scores})
    return setting, scores[setting.key]


def scores_joined_pieces(recipe_dir: Path) -> bool:
    """Whether the recipe was trained with ``--remove-bpe``: on a corpus of subword-nmt
    pieces, scored once they are joined."""
    recipe = recipe_dir / "recipe.json"
    return recipe.exists() and load_json(recipe).get("remove_bpe", False)


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
