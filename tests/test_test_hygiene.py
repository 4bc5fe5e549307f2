"""Assertions that cannot fail, found in the tests' syntax trees: a path as a truth value (a
Path is always true: ``assert out and (tmp / "report.html")`` never looks at the file), a
score compared ``>= 0``, ``assert True``, and ``pytest.raises(SystemExit)`` that checks
neither the exit code nor the message (an argparse usage error and a crash both exit)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def is_path(node: ast.expr) -> bool:
    """A path built in place: ``a / "b"`` or ``Path(...)``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return True
    return isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Path"


def truth_values(node: ast.expr) -> list[ast.expr]:
    """The operands that ``assert node`` takes as truth values (through and/or/not)."""
    if isinstance(node, ast.BoolOp):
        return [leaf for value in node.values for leaf in truth_values(value)]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return truth_values(node.operand)
    return [node]


def is_score_at_least_zero(node: ast.expr) -> bool:
    """``X >= 0`` or ``0 <= X`` alone, with X naming a score (bleu, chrf, score)."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
        return False
    left, op, right = node.left, node.ops[0], node.comparators[0]
    if isinstance(op, ast.GtE) and isinstance(right, ast.Constant) and right.value == 0:
        subject = left
    elif isinstance(op, ast.LtE) and isinstance(left, ast.Constant) and left.value == 0:
        subject = right
    else:
        return False
    text = ast.unparse(subject).lower()
    return any(word in text for word in ("bleu", "chrf", "score"))


def raises_system_exit(item: ast.withitem) -> bool:
    call = item.context_expr
    return (
        isinstance(call, ast.Call)
        and ast.unparse(call.func) == "pytest.raises"
        and bool(call.args)
        and ast.unparse(call.args[0]) == "SystemExit"
    )


def unchecked_exit(function: ast.FunctionDef, item: ast.withitem) -> bool:
    """``pytest.raises(SystemExit)`` with no ``match=`` and no ``as NAME`` that the
    function reads afterwards (``NAME.value.code``)."""
    if any(keyword.arg == "match" for keyword in item.context_expr.keywords):
        return False
    if not isinstance(item.optional_vars, ast.Name):
        return True
    name = item.optional_vars.id
    reads = [
        node
        for node in ast.walk(function)
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)
    ]
    return not reads


def always_true(source: str, filename: str = "<test>") -> list[str]:
    """``file:line: what`` for each assertion of ``source`` that cannot fail."""
    tree = ast.parse(source, filename)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            for value in truth_values(node.test):
                if is_path(value):
                    found.append((node.lineno, f"a path as a truth value: {ast.unparse(value)}"))
                elif isinstance(value, ast.Constant) and value.value:
                    found.append((node.lineno, f"assert {value.value!r}"))
                elif is_score_at_least_zero(value):
                    found.append((node.lineno, f"a score >= 0: {ast.unparse(value)}"))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if not isinstance(inner, ast.With):
                    continue
                for item in inner.items:
                    if raises_system_exit(item) and unchecked_exit(node, item):
                        found.append(
                            (inner.lineno, "pytest.raises(SystemExit) checks no code or message")
                        )
    return [f"{filename}:{line}: {what}" for line, what in sorted(set(found))]


def test_no_test_asserts_what_cannot_fail() -> None:
    found = [
        problem
        for path in sorted(TESTS.glob("**/*.py"))
        for problem in always_true(path.read_text(encoding="utf-8"), path.name)
    ]
    assert not found, "\n".join(found)


BAD = """
def test_bad(tmp_path, scores):
    assert sorted(tmp_path.glob("*.png")) and (tmp_path / "report.html")
    assert Path("x")
    assert scores["bleu"]["score"] >= 0
    assert 0 <= chrf
    assert True
    with pytest.raises(SystemExit):
        main([])
    with pytest.raises(SystemExit) as stop:
        main([])
"""

GOOD = """
def test_good(tmp_path, scores):
    assert (tmp_path / "report.html").is_file()
    assert scores["bleu"]["score"] > 0 and 0 <= scores["chrf"] <= 100
    assert count >= 0
    with pytest.raises(SystemExit, match="usage"):
        main([])
    with pytest.raises(SystemExit) as stop:
        main([])
    assert stop.value.code == 2
"""


@pytest.mark.parametrize(("source", "count"), [(BAD, 7), (GOOD, 0)], ids=["bad", "good"])
def test_the_check_finds_each_pattern_and_nothing_else(source: str, count: int) -> None:
    assert len(always_true(source)) == count, always_true(source)
