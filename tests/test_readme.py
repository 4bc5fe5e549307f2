"""What readers read: the layout in docs/design.md names every module there is, and nothing
a reader lacks (the paths of our own machines) appears in the README, the docs or the
configs."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE = REPO_ROOT / "seq2seq"
DESIGN = REPO_ROOT / "docs" / "design.md"


def layout_lines() -> list[str]:
    """The entries of the layout block (the fenced block after ``## Layout``), one
    per name: a line indented deeper than the entries (a description's continuation) is
    joined to the entry above it."""
    section = DESIGN.read_text(encoding="utf-8").split("## Layout", 1)[1]
    block = section.split("```", 2)[1]
    entries: list[str] = []
    for line in block.splitlines():
        if line.startswith("   ") and entries:
            entries[-1] += " " + line.strip()
        else:
            entries.append(line)
    return entries


def described(name: str, lines: list[str]) -> str | None:
    """The layout line that starts with ``name`` (after indentation), if there is one."""
    for line in lines:
        if line.strip().startswith(name + " ") or line.strip() == name:
            return line
    return None


def test_layout_names_every_top_level_module() -> None:
    lines = layout_lines()
    missing = [
        path.name
        for path in sorted(PACKAGE.glob("*.py"))
        if path.name != "__init__.py" and described(path.name, lines) is None
    ]
    assert missing == [], f"the layout lacks {missing}"


def test_layout_names_every_module_of_every_subpackage() -> None:
    lines = layout_lines()
    for package in sorted(p for p in PACKAGE.iterdir() if (p / "__init__.py").exists()):
        line = described(package.name + "/", lines)
        assert line is not None, f"the layout lacks {package.name}/"
        description = line.split("/", 1)[1]
        modules = [p.stem for p in package.glob("*.py") if p.name != "__init__.py"]
        missing = [m for m in modules if not re.search(rf"\b{m}\b", description)]
        assert missing == [], f"the layout's line for {package.name}/ lacks {missing}"


def test_layout_names_no_module_that_does_not_exist() -> None:
    named = [line.split()[0] for line in layout_lines() if line.startswith("  ") and line.strip()]
    gone = [name for name in named if not (PACKAGE / name.rstrip("/")).exists()]
    assert gone == [], f"the layout names {gone}, which seq2seq/ does not have"


def test_no_path_of_our_machines_in_what_readers_read() -> None:
    readable = [
        REPO_ROOT / "README.md",
        *REPO_ROOT.glob("docs/**/*.md"),
        *REPO_ROOT.glob("configs/**/*"),
    ]
    naming = [
        str(path.relative_to(REPO_ROOT))
        for path in readable
        if path.is_file() and "../shared" in path.read_text(encoding="utf-8", errors="replace")
    ]
    assert naming == []
