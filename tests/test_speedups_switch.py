"""SEQ2SEQ_PLAIN, the off switch of the speed tricks: which tricks it turns off, and a
name that is no trick ends the command in one line."""

from __future__ import annotations

import pytest

from seq2seq.cli import main
from seq2seq.errors import Seq2SeqError
from seq2seq.speedups.switch import TRICKS, VARIABLE, switched_off, trick_enabled


@pytest.mark.parametrize(
    ("value", "off"),
    [
        ("", set()),
        ("1", set(TRICKS)),
        ("all", set(TRICKS)),
        ("cpu_dropout", {"cpu_dropout"}),
        (" malloc, beam_shared_source ", {"malloc", "beam_shared_source"}),
    ],
)
def test_the_variable_names_the_tricks_it_turns_off(monkeypatch, value, off):
    monkeypatch.setenv(VARIABLE, value)
    assert switched_off(value) == off
    assert {trick for trick in TRICKS if not trick_enabled(trick)} == off


def test_every_trick_is_on_without_the_variable(monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)
    assert all(trick_enabled(trick) for trick in TRICKS)


def test_a_name_that_is_no_trick_is_an_error():
    with pytest.raises(Seq2SeqError, match="names no speed trick dropuot"):
        switched_off("dropuot")


def test_the_command_reports_a_wrong_name_in_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv(VARIABLE, "dropuot")
    with pytest.raises(SystemExit) as exit_:
        main(["corpus", "--out", str(tmp_path / "corpus")])
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("seq2seq: error: SEQ2SEQ_PLAIN='dropuot' names no speed trick")
    assert err.count("\n") == 1
    assert not (tmp_path / "corpus").exists()
