"""`make student`, the final recipe's command sequence, as make would run it (``make -n``:
printed, nothing run): which seeds of the teacher it trains, which corpus it distils into,
and which configs train the student on it."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def planned(*variables: str) -> list[list[str]]:
    """The select_on_val.py commands `make student VARIABLES` would run, as argument lists
    from the script's subcommand on."""
    printed = subprocess.run(
        ["make", "-n", "-C", str(REPO), "student", *variables],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    commands = []
    for line in printed.splitlines():
        if "select_on_val.py" in line:  # the command, without the shell around it
            words = shlex.split(line.split("||")[0].rstrip(" \\"))
            commands.append(words[words.index("scripts/select_on_val.py") + 1 :])
    return commands


def option(words: list[str], name: str) -> list[str]:
    """The values after ``name`` up to the next option."""
    start = words.index(name) + 1
    end = next((i for i in range(start, len(words)) if words[i].startswith("--")), len(words))
    return words[start:end]


def test_a_teacher_of_another_seed_is_trained_before_it_teaches() -> None:
    train_teacher, distill, train_student, *finals = planned(
        "SEEDS=1", "TEACHER=anchor:2", "STUDENT=student-6-2"
    )
    assert train_teacher[:3] == ["train", "--name", "anchor"]
    assert option(train_teacher, "--seeds") == ["1", "2"]
    assert option(distill, "--teacher") == ["anchor:2"]
    corpus = "data/multi30k-distill-anchor2-orig"
    assert option(distill, "--corpus") == [corpus] and "--keep-originals" in distill
    assert train_student[:2] == ["--data", corpus]
    assert option(train_student, "--name") == ["student-6-2"]
    assert option(train_student, "--seeds") == ["1"]
    configs = [train_student[i + 1] for i, w in enumerate(train_student) if w == "--config"]
    assert configs[-2:] == [
        "configs/multi30k/en-de/transformer-anchor.yaml",
        "configs/multi30k/en-de/transformer-student-6-2.yaml",
    ]
    assert all((REPO / config).is_file() for config in configs)
    assert [option(final, "--name") for final in finals] == [["anchor"], ["student-6-2"]]
    assert all(option(final, "--recase") == ["data/casing/multi30k.de.json"] for final in finals)


def test_the_default_teaches_with_the_first_seed_in_its_own_corpus() -> None:
    train_teacher, distill, train_student, *_ = planned()
    assert option(train_teacher, "--seeds") == ["1"]
    assert option(distill, "--teacher") == ["anchor:1"]
    assert option(distill, "--corpus") == ["data/multi30k-distill-anchor-orig"]
    assert option(train_student, "--name") == ["student"]
    assert "configs/multi30k/en-de/transformer-student-6-2.yaml" not in train_student
