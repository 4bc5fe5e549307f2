"""`seq2seq fit` prints what a user can act on: no banners, advertisements, empty model
tables or internal deprecations; one summary line at the end."""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from tiny_run import run_seq2seq, tiny_config, write_config

pytestmark = pytest.mark.slow  # fits

NOISE = [
    "GPU available",
    "TPU available",
    "HPU available",
    "Tip:",
    "litlogger",
    "litmodels",
    "FLOPs",
    "Seed set",
    "site-packages",
    "is deprecated",
    "could not find the monitored key",
]
LOWERCASE_RECIPE = Path(__file__).parents[1] / "configs/multi30k/en-de/transformer-lowercase.yaml"


def summary_pattern(monitor: str) -> re.Pattern[str]:
    """fit's last line when it wrote a best checkpoint by ``monitor``: (best, score, last)."""
    return re.compile(
        rf"seq2seq: fit finished in \d+:\d\d:\d\d: best checkpoint (\S+) \({monitor} ([\d.]+)\), "
        r"last checkpoint (\S+)"
    )


def quiet_fit(
    trained_run: dict, tmp_path: Path, *args: str, run: Callable = run_seq2seq
) -> list[str]:
    """stderr lines of a one-epoch fit with Lightning's defaults (progress bar, model
    summary), in a child process unless ``run`` says otherwise; checks that none of them is
    noise."""
    config = tiny_config(tmp_path, trained_run["corpus"])
    config["data"]["cache_dir"] = str(trained_run["root"] / "cache")
    config["trainer"]["max_epochs"] = 1
    for default in ("enable_progress_bar", "enable_model_summary"):
        del config["trainer"][default]
    fit = run("fit", "--config", str(write_config(tmp_path / "c.yaml", config)), *args)
    assert fit.returncode == 0, fit.stderr[-3000:]
    printed = fit.stdout + fit.stderr
    assert [noise for noise in NOISE if noise in printed] == []
    return fit.stderr.replace("\r", "\n").splitlines()


def test_fit_ends_with_one_line_naming_the_best_and_last_checkpoints(trained_run, tmp_path):
    lines = quiet_fit(trained_run, tmp_path)
    summaries = [line for line in lines if line.startswith("seq2seq: fit finished in ")]
    assert len(summaries) == 1
    best, bleu, last = summary_pattern("val_bleu").fullmatch(summaries[0]).groups()
    assert Path(best).is_file() and Path(best).parent == tmp_path / "run/checkpoints"
    assert Path(last) == tmp_path / "run/checkpoints/last.ckpt" and Path(last).is_file()
    with open(tmp_path / "run/logs/version_0/metrics.csv") as f:
        logged = [row["val_bleu"] for row in csv.DictReader(f) if row.get("val_bleu")]
    assert bleu == f"{float(logged[-1]):.2f}"


def test_the_summary_names_the_metric_a_recipe_chooses_its_best_checkpoint_on(
    trained_run, tmp_path, run_here
):
    """The lowercase recipe chooses on the literature's BLEU: the summary says so."""
    recipe = yaml.safe_load(LOWERCASE_RECIPE.read_text())
    monitor = recipe["checkpoint"]["monitor"]
    lines = quiet_fit(trained_run, tmp_path, "--checkpoint.monitor", monitor,
                      "--checkpoint.filename", recipe["checkpoint"]["filename"],
                      run=run_here)  # fmt: skip
    [summary] = [line for line in lines if line.startswith("seq2seq: fit finished in ")]
    best = summary_pattern(monitor).fullmatch(summary)
    assert best is not None, summary
    assert Path(best.group(1)).is_file()


def test_a_fit_stopped_before_its_first_validation_says_so(trained_run, tmp_path, run_here):
    lines = quiet_fit(trained_run, tmp_path, "--trainer.max_steps", "3", run=run_here)
    last = tmp_path / "run/checkpoints/last.ckpt"
    assert any(
        line.endswith(f": no best checkpoint (no val_bleu logged), last checkpoint {last}")
        for line in lines
    )
