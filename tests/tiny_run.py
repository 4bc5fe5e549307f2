"""A tiny corpus and config for end-to-end runs of the CLI in tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
import yaml

from seq2seq.inference.translator import Translation

SIZES = {"train": 400, "val": 24, "test": 24}


def tiny_config(root: Path, corpus: Path) -> dict:
    return {
        "seed_everything": 1,
        "trainer": {
            "accelerator": "cpu",
            "devices": 1,
            "max_epochs": 2,
            "default_root_dir": str(root / "run"),
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "num_sanity_val_steps": 0,
            "log_every_n_steps": 5,
        },
        "checkpoint": {"dirpath": str(root / "run" / "checkpoints")},
        "model": {
            "network": {
                "class_path": "seq2seq.rnn.RNNSeq2Seq",
                "init_args": {"embed_size": 16, "hidden_size": 16, "dropout": 0.0},
            },
            "lr": 0.005,
            "warmup_steps": 10,
            "test_beam": 2,
        },
        "data": {
            "source": str(corpus),
            "src_lang": "en",
            "tgt_lang": "de",
            "vocab_size": 400,
            "max_piece_length": 7,
            "max_tokens": 800,
            "cache_dir": str(root / "cache"),
        },
    }


def write_config(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


def run_seq2seq(*args: str, stdin: str = "", timeout: float = 300) -> subprocess.CompletedProcess:
    """`seq2seq ARGS` in a child process; configs may name classes from the tests folder
    (e.g. a callback in test_nonfinite_loss), which is put on its PYTHONPATH.

    The command runs in a session of its own: at the timeout, every process it started
    (e.g. the other DDP processes) is killed with it, and TimeoutExpired is raised."""
    tests = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    with subprocess.Popen(
        [sys.executable, "-m", "seq2seq", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    ) as process:
        try:
            stdout, stderr = process.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def cut_into_pieces(line: str) -> str:
    """``line`` as subword-nmt might cut it: each word of two letters or more in two pieces,
    its first letter (``@@`` marking that the word goes on) and the rest."""
    return " ".join(f"{w[:1]}@@ {w[1:]}" if len(w) > 1 else w for w in line.split())


# The tiny RNN of the `trained_run` fixture, trained for seconds, writes "" for every source:
# two lists of its translations are equal whatever the code did. What differs between two
# models, or two searches, that differ is each hypothesis's pieces and log-probability (the
# hypotheses after the first are not empty): compare those.


def hypotheses(translations: Iterable[Translation]) -> list[list[list[int]]]:
    """The pieces of each translation's n-best hypotheses."""
    return [[list(h.tokens) for h in t.hypotheses] for t in translations]


def logprobs(translations: Iterable[Translation]) -> torch.Tensor:
    """The log-probability of every hypothesis of ``translations``, in order, as one tensor."""
    return torch.tensor([h.logprob for t in translations for h in t.hypotheses])


def assert_same_search(
    got: Sequence[Translation], expected: Sequence[Translation], atol: float = 1e-5
) -> None:
    """The same n-best pieces, with the same log-probabilities within ``atol``, line by line;
    at least one hypothesis is not empty (so that the pieces compared say something)."""
    assert hypotheses(got) == hypotheses(expected)
    assert any(tokens for line in hypotheses(expected) for tokens in line), "all empty"
    torch.testing.assert_close(logprobs(got), logprobs(expected), atol=atol, rtol=0)


def nbest_rows(translations: Iterable[Translation]) -> list[str]:
    """What `seq2seq translate --n-best N` prints for ``translations``: each hypothesis's
    line index, score (4 decimals) and text."""
    return [
        f"{i}\t{h.score:.4f}\t{text}"
        for i, t in enumerate(translations)
        for text, h in zip(t.texts, t.hypotheses, strict=True)
    ]
