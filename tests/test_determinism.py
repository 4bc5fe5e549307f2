"""The same seed gives the same loss curve, weights and translations on CPU."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch
from tiny_run import tiny_config, write_config

from seq2seq.commands.main import main
from seq2seq.inference.checkpoint import load_trained
from seq2seq.inference.search import SearchSettings
from seq2seq.inference.translator import translate_lines

pytestmark = pytest.mark.slow  # two fits


def fit(trained_run: dict, root: Path) -> Path:
    """Two short epochs with dropout (so the RNG streams matter), every step logged."""
    root.mkdir()
    config = tiny_config(root, trained_run["corpus"])
    config["data"]["cache_dir"] = str(trained_run["root"] / "cache")
    config["model"]["network"]["init_args"]["dropout"] = 0.3
    config["trainer"].update(limit_train_batches=6, log_every_n_steps=1)
    main(["fit", "--config", str(write_config(root / "config.yaml", config))])
    return root / "run"


def step_losses(run: Path) -> list[tuple[int, float]]:
    with open(run / "logs/version_0/metrics.csv") as f:
        return [
            (int(row["step"]), float(row["train_loss_step"]))
            for row in csv.DictReader(f)
            if row["train_loss_step"]
        ]


def test_same_seed_same_losses_weights_and_translations(trained_run: dict, tmp_path: Path) -> None:
    first, second = fit(trained_run, tmp_path / "a"), fit(trained_run, tmp_path / "b")

    losses = step_losses(first)
    assert [step for step, _ in losses] == list(range(12))  # every step of both epochs
    assert len({loss for _, loss in losses}) > 1
    assert step_losses(second) == losses  # exactly, not within a tolerance

    weights = [
        torch.load(run / "checkpoints/last.ckpt", weights_only=True)["state_dict"]
        for run in (first, second)
    ]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][key], weights[1][key]) for key in weights[0])

    sources = (trained_run["corpus"] / "test.en").read_text().splitlines()
    search = SearchSettings(beam=3, n_best=2)
    outputs = []
    for run in (first, second):
        translations = translate_lines(load_trained(run / "checkpoints/last.ckpt"), sources, search)
        outputs.append([(t.texts, [h.score for h in t.hypotheses]) for t in translations])
    assert outputs[0] == outputs[1]
