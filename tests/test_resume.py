"""Resuming with the shipped configs' checkpoint layout: every kind of stop, then
``fit --ckpt_path last``, ends with the weights of a run that was never stopped."""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import redirect_stderr
from pathlib import Path

import pytest
import torch
import yaml
from cli_errors import cli_error
from test_recipes import printed_config, recipe_files

from seq2seq.commands.main import main
from seq2seq.text.demo_corpus import write_corpus
from seq2seq.training.checkpoint_io import SafeCheckpointIO

pytestmark = pytest.mark.slow  # fits stopped and resumed

REPO = Path(__file__).resolve().parents[1]
EPOCHS = 3


def shipped_copy(
    folder: Path, corpus: Path, recipe: tuple[str, str] = ("en-de", "bahdanau")
) -> Path:
    """A shipped recipe as its config files compose it (checkpoint block included), pointed
    at the tiny corpus with small sizes, and its run root inside ``folder``."""
    settings = printed_config(recipe_files(*recipe))
    settings["seed_everything"] = 7
    trainer = settings["trainer"]
    trainer.pop("max_time", None)
    trainer.update(
        max_epochs=EPOCHS,
        precision="32-true",
        default_root_dir=str(folder / "run"),
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        log_every_n_steps=1,
    )
    settings["early_stopping"] = {"patience": 100}
    model = settings["model"]
    model["network"]["init_args"].update(embed_size=16, hidden_size=16)
    model["network"]["init_args"]["attention"]["init_args"]["hidden_size"] = 16
    model.update(lr=0.003, warmup_steps=5)
    settings["data"].update(
        source=str(corpus),
        val_split="val",
        test_split="test",
        vocab_size=400,
        max_tokens=400,
        cache_dir=str(corpus.parent / "cache"),
    )
    path = folder / "config.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(settings))
    return path


def with_callback(config: Path, **pause: object) -> Path:
    """The config with a PauseAt callback (tests/pause_at.py) in place of any earlier one."""
    settings = yaml.safe_load(config.read_text())
    kept = [
        callback
        for callback in settings["trainer"].get("callbacks") or []
        if callback["class_path"] != "pause_at.PauseAt"
    ]
    settings["trainer"]["callbacks"] = [
        *kept,
        {"class_path": "pause_at.PauseAt", "init_args": pause},
    ]
    config.write_text(yaml.safe_dump(settings))
    return config


def fit_here(config: Path, *extra: str) -> None:
    """``seq2seq fit`` in this process: the runs a test compares are computed alike, and
    no interpreter is started for a run that no signal stops."""
    main(["fit", "--config", str(config), *extra])


def fit_child(config: Path, *extra: str) -> subprocess.Popen:
    """``seq2seq fit`` in a child process, for a test to signal; with this process's number
    of threads, so that its arithmetic is that of the runs made here."""
    tests = str(Path(__file__).parent)
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(torch.get_num_threads()),
        "PYTHONPATH": f"{tests}:{os.getcwd()}",
    }
    command = [sys.executable, "-m", "seq2seq", "fit", "--config", str(config), *extra]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)


def last(folder: Path) -> dict:
    return torch.load(folder / "run/checkpoints/last.ckpt", weights_only=True)


def assert_same_weights(expected: dict, got: dict) -> None:
    """Two checkpoints hold the same weights (to float rounding)."""
    for key, value in expected["state_dict"].items():
        assert torch.allclose(value, got["state_dict"][key], atol=1e-6), key


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("resume") / "corpus"
    write_corpus(path, seed=5, sizes={"train": 240, "val": 12, "test": 12})
    return path


@pytest.fixture(scope="module")
def straight(corpus) -> dict:
    """The uninterrupted run: its final checkpoint."""
    folder = corpus.parent / "straight"
    fit_here(shipped_copy(folder, corpus))
    return last(folder)


def wait_for(marker: Path, run: subprocess.Popen) -> None:
    while not marker.exists():
        assert run.poll() is None, run.stderr.read().decode()[-3000:]
        time.sleep(0.05)


def stop(kind: str, config: Path, steps_per_epoch: int) -> None:
    """Run ``config`` until stopped by ``kind`` in the middle of the second epoch: a step or
    time limit, or a signal. SIGINT and SIGTERM reach a fit in this process (its handlers
    are the command's); SIGKILL, which no process outlives, a child's."""
    middle = steps_per_epoch + steps_per_epoch // 2
    if kind == "max_steps":
        fit_here(config, "--trainer.max_steps", str(middle))
    elif kind == "max_time":  # steps of at least 0.4 s, a limit of 2 s: stops mid-run
        fit_here(with_callback(config, sleep=0.4), "--trainer.max_time", "00:00:00:02")
    elif kind == "sigkill":
        marker = config.parent / "paused"
        run = fit_child(with_callback(config, step=middle, marker=str(marker)))
        wait_for(marker, run)
        run.send_signal(signal.SIGKILL)
        marker.unlink()
        run.wait()
    else:
        signum = {"sigint": signal.SIGINT, "sigterm": signal.SIGTERM}[kind]
        with pytest.raises(SystemExit) as stopped, redirect_stderr(io.StringIO()) as err:
            fit_here(with_callback(config, step=middle, signal=int(signum)))
        assert stopped.value.code == 128 + signum, err.getvalue()[-3000:]
        said = err.getvalue()
        assert f"at step {middle}: " in said and "last.ckpt" in said, said[-2000:]
        # no validation of the unfinished second epoch, so none of its checkpoints
        checkpoints = [p.name for p in (config.parent / "run/checkpoints").iterdir()]
        assert not [name for name in checkpoints if "epoch01" in name], checkpoints


@pytest.mark.parametrize("kind", ["max_steps", "max_time", "sigint", "sigterm", "sigkill"])
def test_a_stopped_run_resumes_to_the_uninterrupted_weights(
    corpus, straight, tmp_path, run_here, kind
):
    total = int(straight["global_step"])
    config = shipped_copy(tmp_path, corpus)
    stop(kind, config, total // EPOCHS)
    stopped = last(tmp_path)
    stopped_at = int(stopped["global_step"])
    assert 0 < stopped_at < total, stopped_at
    if kind != "sigkill":  # a stop that can write last.ckpt writes it at the step it stopped
        assert stopped_at % (total // EPOCHS), "the stop is not mid-epoch"
    with_callback(config)  # no pause, no sleep
    run = run_here("fit", "--config", str(config), "--ckpt_path", "last",
                   "--trainer.max_time", "null")  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    err = run.stderr
    assert f"resuming from {tmp_path / 'run/checkpoints/last.ckpt'} at step {stopped_at}" in err
    resumed = last(tmp_path)
    assert resumed["global_step"] == total
    assert_same_weights(straight, resumed)


def test_a_run_with_subword_sampling_resumes_to_the_uninterrupted_weights(corpus, tmp_path):
    """data.subword_nbest draws each epoch's segmentations from (seed, epoch, row): a run
    stopped mid-epoch and resumed trains on the same draws as a run never stopped."""
    runs = {}
    for name in ("straight", "stopped"):
        config = shipped_copy(tmp_path / name, corpus)
        settings = yaml.safe_load(config.read_text())
        settings["data"].update(subword_nbest=16, subword_alpha=0.1)
        config.write_text(yaml.safe_dump(settings))
        runs[name] = config
    fit_here(runs["straight"])
    straight = last(tmp_path / "straight")
    total = int(straight["global_step"])
    stop("max_steps", runs["stopped"], total // EPOCHS)
    fit_here(runs["stopped"], "--ckpt_path", "last")
    resumed = last(tmp_path / "stopped")
    assert resumed["global_step"] == total
    assert_same_weights(straight, resumed)


def test_a_signal_stop_names_last_ckpt_when_the_recipe_keeps_recent_epochs(
    corpus, straight, tmp_path
):
    """luong-concat-hour keeps its recent epochs through a ModelCheckpoint of its own, which
    Lightning lists before the resumable one: the stop still names last.ckpt, and writes
    no recent-*.ckpt of the unfinished epoch (averaging would take it for a whole one)."""
    config = shipped_copy(tmp_path, corpus, ("en-de", "luong-concat-hour"))
    stop("sigterm", config, int(straight["global_step"]) // EPOCHS)
    assert (tmp_path / "run/checkpoints/recent-epoch00.ckpt").is_file()


def test_resume_finds_the_newest_last_checkpoint_of_the_root(corpus, tmp_path, run_here):
    config = shipped_copy(tmp_path, corpus)
    fit_here(config, "--trainer.max_epochs", "1")
    # the layout of older versions: checkpoints inside the log version folder
    old = tmp_path / "run/logs/version_0/checkpoints"
    (tmp_path / "run/checkpoints").rename(old)
    again = run_here("fit", "--config", str(config), "--ckpt_path", "last")
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resuming from {old / 'last.ckpt'} at step " in again.stderr
    assert int(last(tmp_path)["epoch"]) == EPOCHS - 1  # continued into the stable folder


def test_resume_with_nothing_to_resume_is_one_line(corpus, tmp_path, capsys):
    config = shipped_copy(tmp_path, corpus)
    status, error = cli_error(
        capsys, "fit", "--config", str(config), "--ckpt_path", "last", alone=True
    )
    assert status == 1
    assert "no checkpoint to resume from" in error and "leave out --ckpt_path" in error
    assert not (tmp_path / "run/logs").exists()


def test_demo_checkpoints_follow_the_root_dir(corpus, tmp_path):
    root = tmp_path / "elsewhere"
    fit_here(
        REPO / "configs/demo.yaml", "--trainer.default_root_dir", str(root),
        "--trainer.max_epochs", "1", "--trainer.enable_progress_bar", "false",
        "--data.source", str(corpus), "--data.vocab_size", "400",
        "--data.cache_dir", str(tmp_path / "cache"), "--model.network.init_args.embed_size", "16",
    )  # fmt: skip
    assert (root / "checkpoints/best.ckpt").is_file() and (root / "checkpoints/last.ckpt").is_file()


def test_fit_writes_checkpoints_through_the_atomic_writer(trained_run, tmp_path, monkeypatch):
    saved: list[str] = []
    write = SafeCheckpointIO.save_checkpoint

    def recording(self, checkpoint, path, storage_options=None):
        saved.append(Path(path).name)
        write(self, checkpoint, path, storage_options)

    monkeypatch.setattr(SafeCheckpointIO, "save_checkpoint", recording)
    from tiny_run import tiny_config, write_config

    settings = tiny_config(tmp_path, trained_run["corpus"])
    settings["trainer"]["max_epochs"] = 1
    main(["fit", "--config", str(write_config(tmp_path / "one.yaml", settings))])
    assert "last.ckpt" in saved
    checkpoints = (tmp_path / "run/checkpoints").iterdir()
    assert sorted(p.name for p in checkpoints if p.suffix == ".ckpt") == sorted(set(saved))


def test_every_checkpoint_callback_writes_into_the_runs_checkpoint_folder(trained_run, tmp_path):
    """A second ModelCheckpoint without a folder of its own (the Transformer configs keep the
    last epochs as recent-*.ckpt for averaging) writes beside the run's other checkpoints,
    not into the log version folder."""
    from tiny_run import tiny_config, write_config

    settings = tiny_config(tmp_path, trained_run["corpus"])
    del settings["checkpoint"]  # the shipped configs name no folder
    settings["trainer"].update(max_epochs=2, default_root_dir=str(tmp_path / "run"))
    settings["trainer"]["callbacks"] = [
        {
            "class_path": "pytorch_lightning.callbacks.ModelCheckpoint",
            "init_args": {"monitor": "epoch", "mode": "max", "save_top_k": 5,
                          "filename": "recent-epoch{epoch:02d}", "auto_insert_metric_name": False},
        }
    ]  # fmt: skip
    main(["fit", "--config", str(write_config(tmp_path / "recent.yaml", settings))])
    recent = sorted(p.name for p in (tmp_path / "run/checkpoints").glob("recent-*.ckpt"))
    assert recent == ["recent-epoch00.ckpt", "recent-epoch01.ckpt"]
    assert not list((tmp_path / "run/logs").glob("version_*/checkpoints"))


# -- a new run in a folder that holds one ------------------------------------------------------
@pytest.fixture(scope="module")
def one_run(corpus, tmp_path_factory) -> Path:
    """A run of the shipped layout trained for one epoch: its root (``run/``)."""
    folder = tmp_path_factory.mktemp("one-run")
    main(["fit", "--config", str(shipped_copy(folder, corpus)), "--trainer.max_epochs", "1"])
    return folder / "run"


def held_by(folder: Path) -> dict[str, bytes]:
    """The checkpoints in ``folder``, by name, with their content."""
    return {path.name: path.read_bytes() for path in sorted(folder.glob("*.ckpt"))}


@pytest.mark.parametrize("resuming", ["nothing", "another run's checkpoint"])
def test_a_new_fit_into_a_folder_holding_a_run_is_refused_before_any_work(
    corpus, one_run, tmp_path, run_here, resuming
):
    config = shipped_copy(tmp_path, corpus)
    folder = shutil.copytree(one_run, tmp_path / "run") / "checkpoints"
    held = held_by(folder)
    last_ckpt = folder / "last.ckpt"
    saved = time.strftime("%Y-%m-%d %H:%M", time.localtime(last_ckpt.stat().st_mtime))
    step = torch.load(last_ckpt, weights_only=True)["global_step"]
    unused_cache = tmp_path / "unused-cache"
    args = ["fit", "--config", str(config), "--data.cache_dir", str(unused_cache)]
    if resuming != "nothing":  # the same step as the folder's own: only the folder tells
        args += ["--ckpt_path", str(one_run / "checkpoints/last.ckpt")]
    refused = run_here(*args)
    status, err = refused.returncode, refused.stderr
    assert status == 2
    [line] = err.splitlines()
    assert line.startswith(
        f"seq2seq: error: {folder} holds the checkpoints of another run "
        f"(last.ckpt: step {step}, saved {saved}); continue that run with --ckpt_path last, "
        "train into another folder with --trainer.default_root_dir DIR, or delete its "
        "checkpoints and start over with --replace_checkpoints"
    ), line
    assert held_by(folder) == held
    assert not unused_cache.exists()  # refused before any data were read
    assert [p.name for p in (tmp_path / "run/logs").iterdir()] == ["version_0"]


def test_replace_checkpoints_deletes_the_held_run_and_trains_anew(
    corpus, one_run, tmp_path, capsys
):
    config = shipped_copy(tmp_path, corpus)
    folder = shutil.copytree(one_run, tmp_path / "run") / "checkpoints"
    replaced = held_by(folder)
    main(["fit", "--config", str(config), "--replace_checkpoints", "--trainer.max_steps", "2"])
    err = capsys.readouterr().err
    deleted = f"--replace_checkpoints: deleted the {len(replaced)} checkpoints of the earlier run"
    assert f"{deleted} in {folder}" in err
    assert list(held_by(folder)) == ["last.ckpt"]  # stopped at step 2, before any validation
    new = last(tmp_path)
    assert new["global_step"] == 2
    assert "replace_checkpoints" not in yaml.safe_load(new["seq2seq"]["config"])  # nor a copy


def test_a_smoke_run_leaves_the_checkpoints_of_the_folder_as_they_were(corpus, one_run, tmp_path):
    """fast_dev_run checkpoints nothing (Lightning wrote last.ckpt at its end, as last-v1.ckpt
    beside a run's own, which --ckpt_path last then took for the newest)."""
    config = shipped_copy(tmp_path, corpus)
    folder = shutil.copytree(one_run, tmp_path / "run") / "checkpoints"
    held = held_by(folder)
    main(["fit", "--config", str(config), "--trainer.fast_dev_run", "1"])
    assert held_by(folder) == held
