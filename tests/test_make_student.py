"""`make student`, the final recipe's command sequence, as make would run it (``make -n``:
printed, nothing run): which recipe and seeds teach, which corpus the teacher's translations
go into, which configs train the student on it, and what is scored on test."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from test_bench_scripts import load_script

REPO = Path(__file__).resolve().parent.parent
RECIPES = load_script("bench/benchkit").recipe_configs("en-de", REPO)  # name -> its --config files

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def planned(*variables: str) -> tuple[dict[str, list[str]], list[str], list[str]]:
    """What `make student VARIABLES` would run: the select_on_val.py commands before the
    test loop, by subcommand (the words after the script's name; the student's training
    as ``student``), then the names the loop scores on test and its command."""
    printed = subprocess.run(
        ["make", "-n", "-C", str(REPO), "student", *variables],
        capture_output=True, text=True, check=True,
    ).stdout.replace("\\\n", " ")  # fmt: skip
    steps, scored, final = {}, [], []
    for line in printed.splitlines():
        if "scripts.select_on_val" not in line:
            continue
        if names := re.search(r"for name in ([^;]*);", line):
            scored = names.group(1).split()
            line = line[names.end() :].split("||")[0].removeprefix(" do")
        words = shlex.split(line)
        words = words[words.index("scripts.select_on_val") + 1 :]
        if names:
            final = words
        else:
            steps["student" if words[0] == "--data" else words[0]] = words
    return steps, scored, final


def option(words: list[str], name: str) -> list[str]:
    """The values after ``name`` up to the next option."""
    start = words.index(name) + 1
    end = next((i for i in range(start, len(words)) if words[i].startswith("--")), len(words))
    return words[start:end]


def configs(words: list[str]) -> list[str]:
    """The --config files of the recipe a train step names (``--recipe``), as recipes.yaml
    lists them."""
    (recipe,) = option(words, "--recipe")
    return [str(path.relative_to(REPO)) for path in RECIPES[recipe]]


def test_a_teacher_of_another_seed_is_trained_before_it_teaches() -> None:
    steps, scored, final = planned("SEEDS=1", "TEACHER=anchor:2", "STUDENT=student-6-2")
    assert option(steps["train"], "--name") == ["anchor"]
    assert option(steps["train"], "--seeds") == ["1", "2"]
    assert configs(steps["train"])[-1] == "configs/multi30k/en-de/transformer-anchor.yaml"
    assert option(steps["distill"], "--teacher") == ["anchor:2"]
    corpus = "data/multi30k-distill-anchor2-orig"
    assert option(steps["distill"], "--corpus") == [corpus]
    assert "--keep-originals" in steps["distill"]
    student = steps["student"]
    assert student[:2] == ["--data", corpus]
    assert option(student, "--name") == ["student-6-2"] and option(student, "--seeds") == ["1"]
    assert configs(student)[-2:] == [
        "configs/multi30k/en-de/transformer-anchor.yaml",
        "configs/multi30k/en-de/transformer-student-6-2.yaml",
    ]
    assert all((REPO / config).is_file() for config in configs(student))
    assert scored == ["anchor", "student-6-2"]
    assert option(final, "--recase") == ["data/casing/multi30k.de.json"]


def test_the_default_teaches_with_the_anchors_first_seed() -> None:
    steps, scored, _ = planned()
    assert option(steps["train"], "--seeds") == ["1"]
    assert option(steps["distill"], "--teacher") == ["anchor:1"]
    assert option(steps["distill"], "--corpus") == ["data/multi30k-distill-anchor-orig"]
    assert option(steps["student"], "--name") == ["student"]
    assert "configs/multi30k/en-de/transformer-student-6-2.yaml" not in steps["student"]
    assert scored == ["anchor", "student"]


@pytest.mark.parametrize("student", ["student-short", "student-6-2-short"])
def test_the_hour_long_recipe_teaches_a_short_student(student: str) -> None:
    steps, scored, _ = planned("TEACHER=lowercase:1", f"STUDENT={student}")
    assert option(steps["train"], "--name") == ["lowercase"]
    assert configs(steps["train"])[-1] == "configs/multi30k/en-de/transformer-lowercase.yaml"
    assert option(steps["distill"], "--corpus") == ["data/multi30k-distill-lowercase-orig"]
    assert configs(steps["student"])[-2:] == [
        "configs/multi30k/en-de/transformer-anchor.yaml",
        f"configs/multi30k/en-de/transformer-{student}.yaml",
    ]
    assert scored == ["lowercase", student]


def test_a_student_without_a_recipe_stops_before_anything_is_made() -> None:
    """The check runs before the install and the teacher's hour: `make student` with a
    STUDENT that recipes.yaml lacks plans nothing and names what it takes."""
    made = subprocess.run(
        ["make", "-n", "-C", str(REPO), "student", "STUDENT=student-nope"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert made.returncode != 0 and "select_on_val.py" not in made.stdout
    assert "STUDENT=student-nope" in made.stderr and "recipes.yaml" in made.stderr


def test_an_ensemble_teaches_without_training_here() -> None:
    steps, scored, _ = planned("TEACHER=pair")
    assert "train" not in steps
    assert option(steps["distill"], "--teacher") == ["pair"]
    assert option(steps["distill"], "--corpus") == ["data/multi30k-distill-pair-orig"]
    assert scored == ["student"]
