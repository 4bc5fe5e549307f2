"""Resuming exactly: a run killed mid-epoch and resumed ends with the same weights."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from tiny_run import tiny_config, write_config

from seq2seq.checkpoint_io import SafeCheckpointIO
from seq2seq.cli import main
from seq2seq.corpus import write_corpus

EPOCHS = 3


def config(root: Path, corpus: Path, schedule: str) -> Path:
    """The tiny run with dropout on, three epochs and a fresh `last` after every step."""
    settings = tiny_config(root, corpus)
    settings["seed_everything"] = 7
    settings["trainer"].update(max_epochs=EPOCHS, default_root_dir=str(root), log_every_n_steps=1)
    settings["checkpoint"] = {
        "dirpath": str(root / "checkpoints"),
        "every_n_train_steps": 1,  # a fresh `last` after every step: kills land mid-epoch
        "save_top_k": 0,
    }
    settings["model"]["model"]["init_args"]["dropout"] = 0.3
    settings["model"].update(lr=0.003, warmup_steps=5, schedule=schedule)
    settings["data"].update(max_tokens=400, cache_dir=str(root.parent / "cache"))
    return write_config(root.with_suffix(".yaml"), settings)


def fit(cfg: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "seq2seq.cli", "fit", "--config", str(cfg), *extra]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)


def final_weights(root: Path) -> dict[str, torch.Tensor]:
    return torch.load(root / "checkpoints/last.ckpt", weights_only=True)["state_dict"]


def step_of(checkpoint: Path) -> int:
    try:
        return int(torch.load(checkpoint, weights_only=True)["global_step"])
    except (FileNotFoundError, RuntimeError, EOFError):
        return -1


@pytest.mark.parametrize("schedule", ["inverse_sqrt", "cosine"])
def test_sigkill_mid_epoch_then_resume_gives_the_uninterrupted_weights(tmp_path, schedule):
    corpus = tmp_path / "corpus"
    write_corpus(corpus, seed=5, sizes={"train": 240, "val": 12, "test": 12})

    straight = tmp_path / "straight"
    run = fit(config(straight, corpus, schedule))
    assert run.wait(timeout=300) == 0, run.stderr.read().decode()[-2000:]
    total_steps = int(
        torch.load(straight / "checkpoints/last.ckpt", weights_only=True)["global_step"]
    )
    steps_per_epoch = total_steps // EPOCHS

    killed = tmp_path / "killed"
    cfg = config(killed, corpus, schedule)
    run = fit(cfg)
    target = steps_per_epoch + steps_per_epoch // 2  # the middle of the second epoch
    while step_of(killed / "checkpoints/last.ckpt") < target:
        assert run.poll() is None, "training ended before it could be killed"
        time.sleep(0.05)
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    stopped_at = step_of(killed / "checkpoints/last.ckpt")
    assert 0 < stopped_at < total_steps and stopped_at % steps_per_epoch, "not mid-epoch"

    resumed = fit(cfg, "--ckpt_path", "last")
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read().decode()[-2000:]
    expected, actual = final_weights(straight), final_weights(killed)
    assert expected.keys() == actual.keys()
    largest = max(float((expected[k].float() - actual[k].float()).abs().max()) for k in expected)
    print(f"killed at step {stopped_at} of {total_steps}; largest weight difference {largest:.1e}")
    for key in expected:
        assert torch.allclose(expected[key], actual[key], atol=1e-6), key


def test_fit_writes_checkpoints_through_the_atomic_writer(trained_run, tmp_path, monkeypatch):
    saved: list[str] = []
    write = SafeCheckpointIO.save_checkpoint

    def recording(self, checkpoint, path, storage_options=None):
        saved.append(Path(path).name)
        write(self, checkpoint, path, storage_options)

    monkeypatch.setattr(SafeCheckpointIO, "save_checkpoint", recording)
    settings = tiny_config(tmp_path, trained_run["corpus"])
    settings["trainer"]["max_epochs"] = 1
    main(["fit", "--config", str(write_config(tmp_path / "one.yaml", settings))])
    assert "last.ckpt" in saved
    assert sorted(p.name for p in (tmp_path / "run/checkpoints").iterdir()) == sorted(set(saved))
