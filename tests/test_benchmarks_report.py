"""BENCHMARKS.md reads as a report: short table cells, whole rows, links that lead somewhere.

Every cell of every Markdown table holds at most ``MAX_CELL`` characters (the story behind a
figure goes to its appendix under docs/benchmarks/), every row has as many cells as its
header, and every relative link of the report and of its appendices names a file that
exists, and a heading of that file where it names one. The README's results table, the
first figures a newcomer reads, holds at most ``README_RESULTS_ROWS`` models.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "BENCHMARKS.md"
APPENDICES = sorted((ROOT / "docs" / "benchmarks").glob("*.md"))
MAX_CELL = 120
README = ROOT / "README.md"
README_RESULTS_ROWS = 5

SEPARATOR = re.compile(r"^\s*:?-+:?\s*$")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"(`+).*?\1")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the text outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def cells(row: str) -> list[str]:
    """A table row's cells, stripped: split on the pipes that are not escaped."""
    inner = row.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", inner)]


def tables(text: str) -> list[list[tuple[int, list[str]]]]:
    """Each table: its rows (header first, separator rows left out) with their line numbers."""
    found: list[list[tuple[int, list[str]]]] = []
    previous = None  # the line number of the last line that starts with a pipe
    for number, line in prose_lines(text):
        if not line.startswith("|"):
            continue
        row = cells(line)
        starts_table = previous is None or number != previous + 1
        previous = number
        if all(SEPARATOR.match(cell) for cell in row):
            continue
        if starts_table:
            found.append([])
        found[-1].append((number, row))
    return found


def table_problems(text: str) -> list[str]:
    """One line for each cell over MAX_CELL and each row whose cell count is not its header's."""
    problems = []
    for table in tables(text):
        width = len(table[0][1])
        for number, row in table:
            if len(row) != width:
                problems.append(f"line {number}: {len(row)} cells, its header has {width}")
            for cell in row:
                if len(cell) > MAX_CELL:
                    shown = f"{cell[:60]}..."
                    problems.append(f"line {number}: a cell of {len(cell)} characters: {shown}")
    return problems


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text lowercased, punctuation dropped, spaces as -."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").replace("*", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a Markdown text's headings (a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    result = set()
    for _, line in prose_lines(text):
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            base = slug(match.group(1))
            result.add(f"{base}-{seen[base]}" if base in seen else base)
            seen[base] = seen.get(base, 0) + 1
    return result


def broken_links(text: str, folder: Path) -> list[str]:
    """One line for each relative link whose file does not exist, or whose #anchor is no
    heading of that Markdown file (or of this one, for a link that is an anchor alone)."""
    problems = []
    for number, line in prose_lines(text):
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
                continue  # https:, mailto: and the like
            file_part, _, anchor = target.partition("#")
            path = (folder / file_part).resolve() if file_part else None
            if path is not None and not path.exists():
                problems.append(f"line {number}: {target}: no file {file_part}")
                continue
            if anchor and (path is None or path.suffix == ".md"):
                headings = anchors(path.read_text(encoding="utf-8") if path else text)
                if anchor not in headings:
                    problems.append(f"line {number}: {target}: no heading #{anchor}")
    return problems


def test_report_tables_have_short_cells_and_whole_rows() -> None:
    text = REPORT.read_text(encoding="utf-8")
    assert tables(text), "BENCHMARKS.md has no table"
    assert table_problems(text) == []


def section(text: str, heading: str) -> str:
    """The Markdown of ``## heading`` up to the next heading of its level or above."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^#{{1,2}} |\Z)", text, re.M | re.S)
    assert match, f"no section '## {heading}'"
    return match.group(1)


def test_the_readme_results_are_one_short_table() -> None:
    text = README.read_text(encoding="utf-8")
    [results] = tables(section(text, "Results"))
    assert 1 < len(results) <= 1 + README_RESULTS_ROWS, [row for _, row in results]
    assert table_problems(section(text, "Results")) == []
    assert broken_links(text, ROOT) == []


def test_report_links_lead_to_files_that_exist() -> None:
    text = REPORT.read_text(encoding="utf-8")
    assert LINK.search(text), "BENCHMARKS.md links to no appendix"
    assert broken_links(text, REPORT.parent) == []


@pytest.mark.parametrize("appendix", APPENDICES, ids=lambda path: path.name)
def test_appendix_links_lead_to_files_that_exist(appendix: Path) -> None:
    assert broken_links(appendix.read_text(encoding="utf-8"), appendix.parent) == []


def test_the_checks_catch_what_they_are_for() -> None:
    """A long cell, a short row and a link to nothing are each reported."""
    long_cell = "x" * (MAX_CELL + 1)
    text = f"| a | b |\n|---|---|\n| {long_cell} | 2 |\n| 3 |\n"
    assert len(table_problems(text)) == 2
    assert table_problems("| a | b |\n|---|---|\n| 1 | 2 |\n") == []
    assert broken_links("[x](docs/benchmarks/no-such-file.md#a)", ROOT) != []
    assert broken_links("[x](docs/benchmarks/speed.md#no-such-heading)", ROOT) != []
    assert broken_links("[x](docs/benchmarks/speed.md#e-decoding-speed)", ROOT) == []
    assert broken_links("`[x](not-a-link.md)` [y](https://example.org)", ROOT) == []
