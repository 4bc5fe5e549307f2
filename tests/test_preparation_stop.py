"""Ctrl-C and SIGTERM while `seq2seq fit` prepares its data (training the vocabulary,
tokenizing the splits): the command ends at once, in one line, with 128 + the signal; it
leaves no cache that looks whole, no process behind, and the next run trains."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tiny_run import SIZES, tiny_config, write_config

from seq2seq.commands.main import main
from seq2seq.text.demo_corpus import write_corpus

pytestmark = pytest.mark.slow  # fits in child processes

# `seq2seq fit` with one step of the data preparation replaced by one that writes its
# process id into a marker file and waits: the vocabulary's training (which runs on a
# child process of its own) or the encoding of the training split's first batch.
PAUSED_FIT = """
import os, sys, time
from pathlib import Path
import seq2seq.training.data.encode_pool as encode_pool
import seq2seq.text.tokenizer as tokenizer
from seq2seq.commands.main import main

marker = Path(sys.argv[2])

def paused(*args):
    marker.write_text(str(os.getpid()))
    time.sleep(600)

if sys.argv[1] == "vocabulary":
    tokenizer._train_model = paused
else:
    encode = encode_pool.encode_pairs
    def encode_pairs(*args):
        encoded = encode(*args)  # the first batch is written, then the wait
        paused()
        return encoded
    encode_pool.encode_pairs = encode_pairs
main(["fit", "--config", sys.argv[3]])
"""
ENDED_WITHIN = 120  # seconds after the signal (a loaded machine is slow to end a Python)


def fit_config(tmp_path: Path) -> Path:
    write_corpus(tmp_path / "corpus", seed=3, sizes=SIZES)
    config = tiny_config(tmp_path, tmp_path / "corpus")
    config["trainer"].update(max_steps=1, limit_val_batches=0)
    return write_config(tmp_path / "tiny.yaml", config)


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize(
    ("phase", "signum"),
    [("vocabulary", signal.SIGINT), ("tokenizing", signal.SIGTERM)],
    ids=["ctrl-c-while-training-the-vocabulary", "sigterm-while-tokenizing"],
)
def test_a_signal_while_preparing_the_data_ends_fit_in_one_line(tmp_path, phase, signum):
    config = fit_config(tmp_path)
    marker = tmp_path / "paused"
    run = subprocess.Popen(
        [sys.executable, "-c", PAUSED_FIT, phase, str(marker), str(config)],
        stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    while not marker.exists() or not marker.read_text():
        assert run.poll() is None, run.stderr.read()[-3000:]
        time.sleep(0.1)
    paused = int(marker.read_text())
    run.send_signal(signum)
    signalled = time.monotonic()
    _, err = run.communicate(timeout=ENDED_WITHIN)
    assert time.monotonic() - signalled < ENDED_WITHIN
    assert run.returncode == 128 + signum, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert err.splitlines()[-1] == (
        f"seq2seq: stopped by {signal.Signals(signum).name} while preparing the data; nothing "
        "half-written is kept, and the next run reuses what was finished"
    )
    assert not running(paused)  # the vocabulary's child process too
    cache = tmp_path / "cache"
    vocabularies = list(cache.glob("spm/*/*.model"))  # a vocabulary trained whole, or none
    assert len(vocabularies) == (phase == "tokenizing")
    assert not [p.name for p in cache.glob("tokens/*") if p.name.endswith((".part", ".npy"))]

    main(["fit", "--config", str(config)])  # the next run, in this process
    assert (tmp_path / "run/checkpoints/last.ckpt").is_file()
    assert len(list(cache.glob("tokens/*.lengths.npy"))) == 2  # train and val, whole
