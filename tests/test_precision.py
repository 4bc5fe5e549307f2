"""The precision a run trains in: ``precision: auto`` resolved per kind of device (the
capability checks replaced by fakes), explicit requests honoured, a warning where bf16 is
emulated, the fit's first and last lines, and a resumed run that changes precision."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from tiny_run import SIZES, tiny_config, write_config

import seq2seq
from seq2seq.commands.main import main
from seq2seq.common import precision as precision_module
from seq2seq.common.precision import (
    Machine,
    cpu_flags,
    cpu_has_native_bf16,
    training_precision,
    warn_once_if_bf16_emulated,
)
from seq2seq.text.demo_corpus import write_corpus
from seq2seq.training.trainer import AutoPrecisionTrainer

CPU_BF16 = Machine("AVX512", cpu_bf16=True)
CPU_AVX2 = Machine("AVX2", cpu_bf16=False)
CPU_AVX512 = Machine("AVX512", cpu_bf16=False)
CUDA_BF16 = Machine("AVX2", cpu_bf16=False, cuda=True, cuda_bf16=True, cuda_name="NVIDIA H200")
CUDA_FP16 = Machine("AVX2", cpu_bf16=False, cuda=True, cuda_bf16=False, cuda_name="Tesla T4")


@pytest.mark.parametrize(
    ("machine", "accelerator", "expected"),
    [
        (CPU_BF16, "cpu", "bf16-mixed"),
        (CPU_AVX2, "cpu", "32-true"),
        (CPU_AVX512, "cpu", "32-true"),
        (CUDA_BF16, "gpu", "bf16-mixed"),
        (CUDA_BF16, "cuda", "bf16-mixed"),
        (CUDA_FP16, "gpu", "16-mixed"),
        (CUDA_FP16, "auto", "16-mixed"),  # auto picks the GPU where there is one
        (CUDA_FP16, "cpu", "32-true"),  # the CPU asked for: the CPU's rule
        (CPU_BF16, "auto", "bf16-mixed"),  # no CUDA: auto is the CPU
        (CPU_AVX2, "auto", "32-true"),
        (CPU_AVX2, "gpu", "32-true"),  # no CUDA device (Lightning then refuses the GPU)
        (CPU_BF16, "mps", "32-true"),  # other accelerators: fp32
    ],
)
def test_auto_asks_for_what_the_device_computes_natively(machine, accelerator, expected):
    chosen = training_precision("auto", accelerator, machine)
    assert chosen.precision == expected
    assert chosen.reason.startswith("auto: ") and chosen.warning is None


@pytest.mark.parametrize("requested", ["32-true", "16-mixed", "bf16-mixed", "64-true", 32])
def test_an_explicit_precision_is_kept(requested):
    for machine in (CPU_BF16, CPU_AVX2, CUDA_BF16):
        assert training_precision(requested, "cpu", machine).precision == str(requested)
    assert training_precision(None, "cpu", CPU_BF16).precision == "32-true"  # Lightning's


@pytest.mark.parametrize("requested", ["bf16-mixed", "bf16-true"])
def test_bf16_asked_where_it_is_emulated_warns_in_one_line(requested):
    for machine, accelerator in ((CPU_AVX2, "cpu"), (CPU_AVX512, "cpu"), (CUDA_FP16, "gpu")):
        chosen = training_precision(requested, accelerator, machine)
        assert chosen.precision == requested  # going on as asked
        assert chosen.warning and "\n" not in chosen.warning
        assert requested in chosen.warning and "emulate" in chosen.warning
    avx2 = training_precision(requested, "cpu", CPU_AVX2).warning
    assert "AVX2" in avx2 and "about 30 times" in avx2 and "32-true" in avx2
    assert "16-mixed" in training_precision(requested, "gpu", CUDA_FP16).warning
    for machine, accelerator in ((CPU_BF16, "cpu"), (CUDA_BF16, "gpu")):
        assert training_precision(requested, accelerator, machine).warning is None


def test_the_cpu_flags_decide_where_pytorch_has_no_check(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_tile\n")
    assert {"avx2", "avx512_bf16"} <= cpu_flags(cpuinfo)
    assert cpu_flags(tmp_path / "absent") == frozenset()
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported", raising=False)
    monkeypatch.setattr(precision_module, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    assert cpu_has_native_bf16() is False
    monkeypatch.setattr(precision_module, "cpu_flags", lambda: frozenset({"avx2", "amx_bf16"}))
    assert cpu_has_native_bf16() is True


def test_pytorchs_own_checks_decide_where_it_has_them(monkeypatch):
    monkeypatch.setattr(precision_module, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    assert cpu_has_native_bf16() is False
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)
    assert cpu_has_native_bf16() is True


def fake_machine(monkeypatch: pytest.MonkeyPatch, machine: Machine) -> None:
    monkeypatch.setattr(Machine, "this", staticmethod(lambda: machine))


def test_the_trainer_resolves_auto_and_warns_once(monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="seq2seq")
    fake_machine(monkeypatch, CPU_BF16)
    quiet = {"accelerator": "cpu", "logger": False, "enable_checkpointing": False}
    assert AutoPrecisionTrainer(precision="auto", **quiet).precision == "bf16-mixed"
    fake_machine(monkeypatch, CPU_AVX2)
    trainer = AutoPrecisionTrainer(precision="auto", **quiet)
    assert trainer.precision == "32-true" and "AVX2" in trainer.precision_choice.reason
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert AutoPrecisionTrainer(precision="bf16-mixed", **quiet).precision == "bf16-mixed"
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning.startswith("trainer.precision bf16-mixed asked for") and "AVX2" in warning


def tiny_fit_config(tmp_path: Path, **trainer: object) -> Path:
    corpus = tmp_path / "corpus"
    write_corpus(corpus, seed=3, sizes=SIZES)
    config = tiny_config(tmp_path, corpus)
    config["trainer"].update(trainer)
    return write_config(tmp_path / "tiny.yaml", config)


def messages(caplog: pytest.LogCaptureFixture, start: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(start)]


def test_a_run_cut_short_by_max_time_says_where_it_stopped(tmp_path, caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger="seq2seq")
    fake_machine(monkeypatch, CPU_AVX2)
    config = tiny_fit_config(tmp_path, max_epochs=500, max_time="00:00:00:02", precision="auto")
    main(["fit", "--config", str(config)])
    (start,) = messages(caplog, "training RNNSeq2Seq")
    assert start.endswith(
        "in 32-true (auto: this AVX2 CPU, which has no bf16 instructions, so fp32)"
    )
    (end,) = messages(caplog, "fit finished")
    assert "; stopped by max_time (0:00:02) after " in end and " of 500 epochs (step " in end
    assert "--trainer.max_time null" in end


def test_a_whole_schedule_ends_without_a_cut_short_note(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="seq2seq")
    main(["fit", "--config", str(tiny_fit_config(tmp_path, max_epochs=1))])
    (end,) = messages(caplog, "fit finished")
    assert "stopped" not in end
    (start,) = messages(caplog, "training RNNSeq2Seq")
    assert start.endswith("in 32-true (Lightning's default)")


def test_a_run_resumed_on_another_kind_of_machine_resolves_its_precision_again(
    tmp_path, caplog, capsys, monkeypatch
):
    caplog.set_level(logging.INFO, logger="seq2seq")
    config = tiny_fit_config(tmp_path, max_epochs=-1, max_steps=2, precision="auto")
    fake_machine(monkeypatch, CPU_AVX2)
    main(["fit", "--config", str(config)])
    last = tmp_path / "run/checkpoints/last.ckpt"
    assert torch.load(last, weights_only=True)["seq2seq"]["precision"] == "32-true"
    fake_machine(monkeypatch, CPU_BF16)
    capsys.readouterr()
    main(["fit", "--config", str(config), "--trainer.max_steps", "3", "--ckpt_path", "last"])
    err = capsys.readouterr().err
    assert "the run trained in 32-true until now and goes on in bf16-mixed (auto: " in err
    assert messages(caplog, "training RNNSeq2Seq")[-1].endswith(
        "in bf16-mixed (auto: this AVX512 CPU, which has bf16 instructions)"
    )


def test_a_bf16_search_where_bf16_is_emulated_warns_once(trained_run, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="seq2seq")
    warn_once_if_bf16_emulated.cache_clear()
    fake_machine(monkeypatch, CPU_AVX2)
    model = seq2seq.load(trained_run["ckpt"], bf16=True)
    model.translate("forty-two", beam=2)
    model.translate("forty-two", beam=2, bf16=True)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith("bf16 asked for, but this AVX2 CPU")
    warn_once_if_bf16_emulated.cache_clear()
    fake_machine(monkeypatch, CPU_BF16)
    seq2seq.load(trained_run["ckpt"], bf16=True).translate("forty-two", beam=2)
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1
