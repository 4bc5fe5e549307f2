"""``seq2seq recase``: learn a casing table from cased text, or restore case to lowercased
text with one (``seq2seq.text.casing``). ``translate`` and ``evaluate`` take the table as
``--recase`` and recase a model's translations themselves."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from seq2seq.commands.options import check_input_file, check_output_file, command
from seq2seq.common.atomic import atomic_output
from seq2seq.common.errors import UsageError
from seq2seq.text.arriving_lines import decode_line
from seq2seq.text.casing import Recaser
from seq2seq.text.lines import TextLines, iter_lines


@command
def recase(
    table: str,
    learn: str | None = None,
    input: str | None = None,
    output: str | None = None,
    force: bool = False,
) -> None:
    """Restore case to lowercased text, or learn how from cased text.

    With --learn FILE: each word's most frequent form in FILE (cased text of the target
    language, such as a model's training targets) goes into the table --table (an existing
    table is kept unless --force). Without it: the lines of --input (default stdin) are
    written to --output (default stdout) with each word in its table form and the first
    letter capitalised. `translate --recase TABLE` and `evaluate --recase TABLE` recase a
    model's translations the same way.

    Args:
        table: the casing table (JSON) to write with --learn, or to recase with
        learn: cased text to learn the table from, one sentence per line
        input: lowercased text to recase (default: stdin)
        output: where to write the recased text (default: stdout)
        force: with --learn, replace the table at --table if there is one
    """
    if learn is None:
        if force:
            raise UsageError("--force replaces a table that --learn writes; no --learn given")
        check_input_file(input)
        check_output_file(output)
        recaser = Recaser.load(table)
        lines = iter_lines(input) if input else _stdin_lines()
        cased = (recaser.recase(line) + "\n" for line in lines)
        if output is None:
            sys.stdout.writelines(cased)
            return
        with atomic_output(output) as file:  # streamed; an old --output stays until the end
            for line in cased:
                file.write(line.encode("utf-8"))
        return
    if input is not None or output is not None:
        raise UsageError("--input and --output recase text; with --learn, the table is --table")
    check_input_file(learn)
    check_output_file(table, "--table")
    if Path(table).exists() and not force:
        raise UsageError(f"--table {table} exists; give another file, or --force to replace it")
    recaser = Recaser.learn(TextLines(learn))
    print(
        f"{recaser.save(table)}: the forms of {len(recaser)} words, "
        f"{len(recaser.ambiguous)} of them chosen by their neighbors; "
        f"unseen words by {len(recaser.endings)} endings"
    )


def _stdin_lines() -> Iterable[str]:
    for number, raw in enumerate(sys.stdin.buffer, 1):
        yield decode_line(raw, number, "stdin")
