"""SEQ2SEQ_PLAIN, the off switch of the speed tricks: which tricks it turns off, and a
name that is no trick ends the command in one line; the CPU tricks never run for work on
another device."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from seq2seq.commands.main import main
from seq2seq.common.errors import Seq2SeqError
from seq2seq.speedups import cpu_dropout, onednn_linear
from seq2seq.speedups.malloc import keep_freed_memory
from seq2seq.speedups.onednn_linear import onednn_linears
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


@pytest.mark.parametrize("device_type", ["cuda", "mps", "meta"])
def test_on_another_device_than_the_cpu_no_trick_runs(monkeypatch, device_type):
    """Every trick takes the plain path for work on a GPU, whatever the variable says (the
    shared source too: on an H200 its read per reordering made beam 5 slower, 449 against
    584 sentences/s, docs/benchmarks/gpu.md)."""
    monkeypatch.delenv(VARIABLE, raising=False)
    assert not [trick for trick in TRICKS if trick_enabled(trick, device_type)]
    assert all(trick_enabled(trick, "cpu") for trick in TRICKS)


def test_each_cpu_trick_asks_for_the_device_it_computes_on(monkeypatch):
    """Dropout on a tensor, the oneDNN linears on a model and the malloc setting on the
    device they are given: elsewhere than on the CPU each takes its plain path (the meta
    device stands in for a GPU)."""
    monkeypatch.delenv(VARIABLE, raising=False)
    plain = []
    monkeypatch.setattr(cpu_dropout.F, "dropout", lambda x, p, training: plain.append(x) or x)
    on_gpu = torch.ones(4, 4, device="meta")
    cpu_dropout.dropout(on_gpu, 0.5, training=True)
    cpu_dropout.dropout(torch.ones(4, 4), 0.5, training=True)
    assert len(plain) == 1 and plain[0] is on_gpu
    layers = {device: nn.Linear(4, 4, device=device) for device in ("cpu", "meta")}
    with onednn_linears(layers["cpu"]), onednn_linears(layers["meta"]):
        assert "forward" not in vars(layers["meta"])  # not switched
        assert "forward" in vars(layers["cpu"]) or not onednn_linear.available()
    assert keep_freed_memory("cuda") is False  # returns before touching glibc
