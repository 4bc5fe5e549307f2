"""Case restored to lowercased text: the table ``Recaser.learn`` makes of cased text, the
``seq2seq recase`` command that learns and applies it, and ``--recase`` / ``load(recase=)``,
which recase a model's translations exactly as the command recases text."""

from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path

import pytest
from cli_errors import cli_error

import seq2seq
from seq2seq.commands.main import main
from seq2seq.common.errors import DataError
from seq2seq.text.casing import Recaser

one_line_error = partial(cli_error, alone=True)

# German-like: a line's first word is capitalised, nouns everywhere, most words seen once
# are nouns. "essen" is a verb twice and a noun once away from the line start.
GERMAN = [
    "Ein Mann fährt Fahrrad.",
    "Wir essen im Park.",
    "Sie essen Suppe.",
    "Das Essen ist warm.",
    "Zwei Hunde rennen über eine Wiese.",
    "Eine Frau liest ein Buch am Strand.",
    "Ein Mann mit Hut, Mantel, Schal und Stock.",
    "Die Kinder tragen Mützen, Jacken und Stiefel.",
]
ENGLISH = ["A man rides a bike.", "Two dogs run across a meadow.", "A woman reads at Brighton."]


def test_a_word_takes_its_most_frequent_form_away_from_the_line_start() -> None:
    recaser = Recaser.learn(GERMAN)
    assert recaser.forms["essen"] == "essen"  # 2 to 1: "Das Essen" is outvoted
    assert recaser.forms["fahrrad"] == "Fahrrad"
    assert recaser.forms["ein"] == "ein"  # "Ein" starts a line; inside, "ein Buch"
    assert recaser.forms["zwei"] == "Zwei"  # seen only at a line's start: that form
    assert recaser.recase("wir essen ein buch am strand.") == "Wir essen ein Buch am Strand."


def test_a_word_seen_in_several_forms_takes_the_one_its_neighbors_suggest() -> None:
    recaser = Recaser.learn(GERMAN)
    assert set(recaser.ambiguous) == {"essen"}
    assert recaser.recase("sie essen suppe.") == "Sie essen Suppe."
    assert recaser.recase("das essen ist warm.") == "Das Essen ist warm."
    assert recaser.recase("zwei essen.") == "Zwei essen."  # no telling neighbor: the count


def test_the_first_letter_is_capitalised_past_leading_punctuation() -> None:
    recaser = Recaser.learn(GERMAN)
    assert recaser.recase('"ein mann" fährt.') == '"Ein Mann" fährt.'
    assert recaser.recase("") == ""
    assert recaser.recase("... !") == "... !"


def test_unseen_words_follow_the_case_of_the_texts_rare_words() -> None:
    german, english = Recaser.learn(GERMAN), Recaser.learn(ENGLISH)
    assert german.capitalise_unknown and not english.capitalise_unknown
    assert german.recase("ein gartenzwerg") == "Ein Gartenzwerg"
    assert english.recase("a gnome sings") == "A gnome sings"


def test_an_unseen_words_ending_decides_its_case_where_it_can() -> None:
    """German-like text whose words seen once are nouns, but for five adjectives on -ende."""
    adjectives = ["laufende", "singende", "lachende", "tanzende", "wartende"]
    nouns = ["Haus", "Baum", "Hund", "Katze", "Wiese", "Straße", "Brücke", "Tür", "Bank"]
    lines = [f"Da {word} x" for word in adjectives + nouns]
    recaser = Recaser.learn(lines)
    assert recaser.endings["nde"] is False and recaser.capitalise_unknown
    assert recaser.recase("da rufende gartenzwerg") == "Da rufende Gartenzwerg"


def test_the_table_is_the_same_whatever_the_order_of_its_text() -> None:
    tied = ["x Bank y", "x bank y"]  # one form each: the tie goes to the one sorted first
    assert Recaser.learn(tied) == Recaser.learn(tied[::-1])
    assert Recaser.learn(tied).forms["bank"] == "Bank"


def test_recasing_changes_case_only() -> None:
    recaser = Recaser.learn(GERMAN)
    for line in ["zwei frauen essen suppe im park.", "ein unbekanntes wort, 42 mal."]:
        assert recaser.recase(line).lower() == line


def test_a_table_is_saved_and_loaded_unchanged(tmp_path: Path) -> None:
    recaser = Recaser.learn(GERMAN)
    path = recaser.save(tmp_path / "casing.json")
    assert Recaser.load(path) == recaser


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (None, "no such file"),
        ("{not json", "not a casing table ("),
        (json.dumps({"format": 1, "forms": {}}), "not a casing table of format 2 (learn"),
        (json.dumps({"format": 2, "forms": {}, "capitalise_unknown": True}), "a damaged"),
    ],
)
def test_anything_but_a_table_is_a_data_error_naming_the_file(
    tmp_path: Path, content: str | None, error: str
) -> None:
    path = tmp_path / "table.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=f"^{re.escape(f'{path}: {error}')}"):
        Recaser.load(path)
    with pytest.raises(DataError, match="no words"):
        Recaser.learn(["", "... !"])
    with pytest.raises(TypeError, match="reads its lines twice"):
        Recaser.learn(iter(GERMAN))


def test_the_command_learns_a_table_and_recases_stdin_and_files(
    tmp_path: Path, run_here, capsys: pytest.CaptureFixture[str]
) -> None:
    cased = tmp_path / "train.de"
    cased.write_text("".join(f"{line}\n" for line in GERMAN), encoding="utf-8")
    table = tmp_path / "casing.json"
    learned = run_here("recase", "--learn", str(cased), "--table", str(table))
    assert learned.returncode == 0
    assert learned.stdout == (
        f"{table}: the forms of 36 words, 1 of them chosen by their neighbors; unseen words "
        "by 2 endings\n"
    )
    assert Recaser.load(table) == Recaser.learn(GERMAN)
    lowered = "wir essen suppe.\nzwei hunde.\n"
    assert run_here("recase", "--table", str(table), stdin=lowered).stdout == (
        "Wir essen Suppe.\nZwei Hunde.\n"
    )
    (tmp_path / "in.txt").write_text(lowered, encoding="utf-8")
    out = tmp_path / "out.txt"
    run_here("recase", "--table", str(table), "--input", str(tmp_path / "in.txt"),
             "--output", str(out))  # fmt: skip
    assert out.read_text(encoding="utf-8") == "Wir essen Suppe.\nZwei Hunde.\n"


def test_the_command_keeps_a_table_and_refuses_mixed_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cased = tmp_path / "train.de"
    cased.write_text("Ein Hund.\n", encoding="utf-8")
    table = tmp_path / "casing.json"
    table.write_text("kept", encoding="utf-8")
    learn = ("recase", "--learn", str(cased), "--table", str(table))
    assert one_line_error(capsys, *learn) == (
        2, f"--table {table} exists; give another file, or --force to replace it "
        "(see seq2seq recase --help)",
    )  # fmt: skip
    assert table.read_text(encoding="utf-8") == "kept"
    main([*learn, "--force"])
    assert Recaser.load(table).forms == {"ein": "Ein", "hund": "Hund"}
    status, error = one_line_error(capsys, *learn, "--input", str(cased))
    assert (status, error.split(" (see")[0]) == (
        2, "--input and --output recase text; with --learn, the table is --table"
    )  # fmt: skip
    status, error = one_line_error(capsys, "recase", "--table", str(table), "--force")
    assert status == 2 and error.startswith("--force replaces a table that --learn writes")
    status, error = one_line_error(capsys, "recase", "--table", str(tmp_path / "none.json"))
    assert (status, error) == (1, f"{tmp_path / 'none.json'}: no such file")


def test_translate_with_recase_writes_the_recased_translations(
    trained_transformer: Path, trained_run: dict, tmp_path: Path, run_here
) -> None:
    """A table that writes every word of the plain translations in upper case, so that
    recasing visibly changes them, whatever the tiny model says."""
    sources = (trained_run["corpus"] / "test.en").read_text(encoding="utf-8")
    model = ("translate", "--ckpt", str(trained_transformer), "--beam", "2")
    plain = run_here(*model, stdin=sources).stdout.splitlines()
    shouting = tmp_path / "shouting.de"
    shouting.write_text("".join(f"X {line.upper()}\n" for line in plain), encoding="utf-8")
    table = tmp_path / "casing.json"
    run_here("recase", "--learn", str(shouting), "--table", str(table))
    recased = run_here(*model, "--recase", str(table), stdin=sources).stdout.splitlines()
    recaser = Recaser.load(table)
    assert recased == [recaser.recase(line) for line in plain] != plain
    opened = seq2seq.load(trained_transformer, recase=table, beam=2)
    assert opened.translate(sources.splitlines()) == recased
    assert opened.score(sources.splitlines(), plain).translations == recased


def test_a_missing_table_is_refused_before_the_model_is_read(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file"):
        seq2seq.load(tmp_path / "no.ckpt", recase=tmp_path / "casing.json")
