"""Encoding sentence pairs on worker processes."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

from seq2seq.text.tokenizer import Tokenizer, VocabSettings
from seq2seq.training.data.encode_pool import EncodePool

SENTENCES = ["the dog runs", "a small cat sits", "on the red house", "under a big blue street"]


def test_workers_leave_ctrl_c_to_the_parent():
    """A terminal's Ctrl-C reaches every process of the group: the workers go on (no
    traceback of theirs), and the parent, which takes the signal, ends them."""
    model = Tokenizer.train(SENTENCES * 10, VocabSettings(vocab_size=300))
    batch = (["the dog sits"], ["a red cat"])
    with EncodePool(model, model, processes=2) as pool:
        expected = list(pool.encode([batch]))
        workers = multiprocessing.active_children()
        assert len(workers) == 2
        for worker in workers:
            os.kill(worker.pid, signal.SIGINT)
        time.sleep(1)
        assert all(worker.is_alive() for worker in workers)
        [encoded] = pool.encode([batch])
    assert [a.tolist() for a in encoded] == [a.tolist() for a in expected[0]]


def test_a_ctrl_c_while_the_workers_start_ends_none_of_them():
    """Workers ignore Ctrl-C from the moment they are forked, not only once their start-up
    code has run: a Ctrl-C in between used to end one with a traceback (and could hang the
    pool). The window is short, so the test tries it ten times."""
    model = Tokenizer.train(SENTENCES * 10, VocabSettings(vocab_size=300))
    batch = (["the dog sits"], ["a red cat"])
    for _ in range(10):
        with EncodePool(model, model, processes=2) as pool:
            workers = multiprocessing.active_children()
            assert len(workers) == 2  # the Ctrl-C reaches both
            for worker in workers:
                os.kill(worker.pid, signal.SIGINT)
            time.sleep(0.1)
            assert all(worker.is_alive() for worker in workers)
            assert len(list(pool.encode([batch]))) == 1
