"""Ctrl-C and SIGTERM while `seq2seq fit` prepares its data (training the vocabulary,
tokenizing the splits): the command ends at once, in one line, with 128 + the signal; it
leaves no cache that looks whole, and the next run trains. The fits run in this process, the
signal sent from the paused step."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tiny_run import SIZES, tiny_config, write_config

import seq2seq.text.tokenizer as tokenizer
import seq2seq.training.data.encode_pool as encode_pool
from seq2seq.commands.main import main
from seq2seq.text.demo_corpus import write_corpus

pytestmark = pytest.mark.slow  # fits


def paused_step(signum: signal.Signals, released: threading.Event) -> Callable[..., None]:
    """A step of the data preparation that signals the fit (this process) and waits until
    ``released``, as a step would go on working while the signal arrives."""

    def paused(*args: object) -> None:
        os.kill(os.getpid(), signum)
        released.wait(600)

    return paused


ENDED_WITHIN = 120  # seconds (a loaded machine is slow)


def fit_config(tmp_path: Path) -> Path:
    write_corpus(tmp_path / "corpus", seed=3, sizes=SIZES)
    config = tiny_config(tmp_path, tmp_path / "corpus")
    config["trainer"].update(max_steps=1, limit_val_batches=0)
    return write_config(tmp_path / "tiny.yaml", config)


@pytest.mark.parametrize(
    ("phase", "signum"),
    [("vocabulary", signal.SIGINT), ("tokenizing", signal.SIGTERM)],
    ids=["ctrl-c-while-training-the-vocabulary", "sigterm-while-tokenizing"],
)
def test_a_signal_while_preparing_the_data_ends_fit_in_one_line(
    tmp_path, phase, signum, monkeypatch, capsys
):
    """The step paused is the vocabulary's training (on a thread of its own) or the encoding
    of the training split's first batch, in a fit in this process."""
    config = fit_config(tmp_path)
    released = threading.Event()
    paused = paused_step(signum, released)
    if phase == "vocabulary":
        monkeypatch.setattr(tokenizer, "_train_model", paused)
    else:
        encode = encode_pool.encode_pairs

        def encode_pairs(*args: Any) -> Any:
            encoded = encode(*args)  # the first batch is written, then the wait
            paused()
            return encoded

        monkeypatch.setattr(encode_pool, "encode_pairs", encode_pairs)
    started = time.monotonic()
    with pytest.raises(SystemExit) as stopped:
        main(["fit", "--config", str(config)])
    assert time.monotonic() - started < ENDED_WITHIN
    released.set()  # the vocabulary's thread, left waiting, ends
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert stopped.value.code == 128 + signum, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert err.splitlines()[-1] == (
        f"seq2seq: stopped by {signal.Signals(signum).name} while preparing the data; nothing "
        "half-written is kept, and the next run reuses what was finished"
    )
    cache = tmp_path / "cache"
    vocabularies = list(cache.glob("spm/*/*.model"))  # a vocabulary trained whole, or none
    assert len(vocabularies) == (phase == "tokenizing")
    assert not [p.name for p in cache.glob("tokens/*") if p.name.endswith((".part", ".npy"))]

    main(["fit", "--config", str(config)])  # the next run, in this process
    assert (tmp_path / "run/checkpoints/last.ckpt").is_file()
    assert len(list(cache.glob("tokens/*.lengths.npy"))) == 2  # train and val, whole
