"""Declarative ranges (seq2seq/common/ranges.py): one policy for the commands' options, the data
module's and the task's arguments. Every argument that declares a range refuses a value
just outside it with a message naming it, and takes its default."""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable
from typing import Any

import pytest

from seq2seq.common.errors import DataError, Seq2SeqError
from seq2seq.common.ranges import Range, check_arguments, declared_ranges
from seq2seq.training.data.datamodule import TranslationDataModule
from seq2seq.training.task import TranslationTask

BUILT_FROM_CONFIGS = [
    (TranslationDataModule.__init__, "data.", DataError),
    (TranslationTask.__init__, "model.", Seq2SeqError),
]


def outside(kind: type, bounds: Range) -> list[float]:
    """Values just outside ``bounds`` (and NaN, for a float)."""
    values: list[float] = [math.nan] if kind is float else []
    step = 1 if kind is int else 1e-3
    if bounds.minimum is not None:
        values.append(bounds.minimum if bounds.above else bounds.minimum - step)
    if bounds.maximum is not None:
        values.append(bounds.maximum if bounds.below else bounds.maximum + step)
    return values


def test_a_range_says_its_values_and_holds_to_them():
    unit = Range(0, 1, above=True)
    assert unit.words(float) == "a number in (0, 1]"
    assert Range(1).words(int) == "an integer >= 1"
    assert repr(Range(1)) == "Range(>= 1)"  # as jsonargparse's help shows the type
    assert [unit.contains(v) for v in (0.0, 1e-9, 1.0, 1.0001)] == [False, True, True, False]
    assert not any(Range(0).contains(v) for v in (math.nan, math.inf, -math.inf))
    assert Range(maximum=1, below=True).contains(0.99) and not Range(0, 1, below=True).contains(1)


@pytest.mark.parametrize(("function", "prefix", "error"), BUILT_FROM_CONFIGS)
def test_every_declared_range_of_the_data_module_and_the_task_is_checked(
    function: Callable[..., Any], prefix: str, error: type[Exception]
):
    declared = declared_ranges(function)
    assert len(declared) >= 10  # the numeric settings of each declare their range
    defaults = {
        name: p.default for name, p in inspect.signature(function).parameters.items()
    }  # fmt: skip
    check_arguments(function, defaults, prefix, error)  # the defaults are inside
    for name, (kind, bounds) in declared.items():
        for value in outside(kind, bounds):
            message = re.escape(f"{prefix}{name} must be {bounds.words(kind)}, got ")
            with pytest.raises(error, match=f"^{message}"):
                check_arguments(function, {**defaults, name: value}, prefix, error)
        with pytest.raises(error, match=f"^{prefix}{name} must be .*, got 'many'"):
            check_arguments(function, {**defaults, name: "many"}, prefix, error)


def test_the_data_module_and_the_task_check_their_ranges_when_built():
    with pytest.raises(DataError, match=r"^data.max_len must be an integer >= 1, got 0$"):
        TranslationDataModule("corpus", "en", "de", max_len=0)
    with pytest.raises(Seq2SeqError, match=r"^model.label_smoothing must be a number in \[0, 1\)"):
        TranslationTask(network=None, vocab=None, label_smoothing=1.0)  # type: ignore[arg-type]
    with pytest.raises(Seq2SeqError, match=r"^model.lr must be a number > 0, got 0.0$"):
        TranslationTask(network=None, vocab=None, lr=0.0)  # type: ignore[arg-type]


def test_fit_help_says_each_declared_range(capsys: pytest.CaptureFixture[str]):
    from seq2seq.commands.main import main

    with pytest.raises(SystemExit) as stop:
        main(["fit", "--help"])
    assert stop.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    for option, words in [
        ("data.max_tokens", "an integer >= 1"),
        ("data.character_coverage", "a number in (0, 1]"),
        ("model.label_smoothing", "a number in [0, 1)"),
        ("model.lr", "a number > 0"),
    ]:
        after = help_text.split(f"--{option} ", 1)[1].split(" --", 1)[0]
        assert f"({words}; type: " in after, (option, after)
