"""scripts/bench/bench_corpus.py: its corpora, built from a made-up Multi30k, and its
processes' roles."""

from __future__ import annotations

import gzip
from pathlib import Path
from types import ModuleType

import pytest
from test_bench_scripts import load_script

LINES = 50


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench/bench_corpus")


TRAIN = {
    "en": [f"a dog runs {i} ." for i in range(LINES)],
    "de": [f"ein Hund läuft {i} ." for i in range(LINES)],
}
TRAIN["en"][1], TRAIN["de"][1] = TRAIN["en"][0], TRAIN["de"][0]  # the same pair twice
TRAIN["en"][2] = "a dog runs"  # a word-prefix of the others: "a dog runs" + " 5 ..." is ambiguous
LEFT_OUT = {0, 1, 2}


@pytest.fixture
def multi30k(tmp_path: Path) -> Path:
    """A Multi30k folder of 50 training pairs, with lines the corpora must not draw on."""
    folder = tmp_path / "multi30k"
    folder.mkdir()
    splits = {"train": slice(None), "val": slice(0, 5), "test_2016_flickr": slice(5, 9)}
    for split, lines in splits.items():
        for lang in ("en", "de"):
            text = "\n".join(TRAIN[lang][lines]) + "\n"
            (folder / f"{split}.{lang}.gz").write_bytes(gzip.compress(text.encode()))
    return folder


def read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def halves(line: str, lang: str) -> tuple[int, int]:
    """The (a, b) of a corpus line ``x[a] + " " + x[b]``."""
    index = {sentence: i for i, sentence in enumerate(TRAIN[lang])}
    splits = [(line[:at], line[at + 1 :]) for at, c in enumerate(line) if c == " "]
    found = [(index[a], index[b]) for a, b in splits if a in index and b in index]
    assert len(found) == 1, line
    return found[0]


def test_a_corpus_has_distinct_aligned_joined_pairs(
    bench: ModuleType, multi30k: Path, tmp_path: Path
):
    folder = bench.build_corpus(multi30k, tmp_path / "out", 600, seed=3, chunk=70)
    assert folder == tmp_path / "out" / "data" / "pairs-600"
    en, de = read(folder / "train.en"), read(folder / "train.de")
    assert len(en) == len(de) == 600
    assert len(set(en)) == len(set(de)) == 600
    for en_line, de_line in zip(en, de, strict=True):
        pair = halves(en_line, "en")
        assert halves(de_line, "de") == pair  # line i of both: the same (a, b)
        assert pair[0] != pair[1] and not LEFT_OUT & set(pair)
    for name in ("val.en.gz", "val.de.gz", "test_2016_flickr.en.gz", "test_2016_flickr.de.gz"):
        assert (folder / name).read_bytes() == (multi30k / name).read_bytes()
    assert not list((tmp_path / "out" / "data").glob("*.part"))


def test_a_corpus_depends_on_its_seed_only_and_is_built_once(
    bench: ModuleType, multi30k: Path, tmp_path: Path
):
    first = bench.build_corpus(multi30k, tmp_path / "a", 300, seed=3, chunk=1000)
    again = bench.build_corpus(multi30k, tmp_path / "b", 300, seed=3, chunk=7)
    other = bench.build_corpus(multi30k, tmp_path / "c", 300, seed=4, chunk=1000)
    assert (first / "train.en").read_bytes() == (again / "train.en").read_bytes()
    assert (first / "train.de").read_bytes() == (again / "train.de").read_bytes()
    assert (first / "train.en").read_bytes() != (other / "train.en").read_bytes()
    written = (first / "train.en").stat().st_mtime_ns
    assert bench.build_corpus(multi30k, tmp_path / "a", 300, seed=3) == first
    assert (first / "train.en").stat().st_mtime_ns == written  # complete: not built again


def test_ddp_ranks_are_told_from_forked_workers(bench: ModuleType):
    """The command is rank 0; a process started anew with its command line and its own
    LOCAL_RANK is another rank; a fork that inherits its parent's environment is a worker."""
    command = "python -m seq2seq fit"
    processes = [
        bench.Process(10, 1, cmdline=command),
        bench.Process(11, 10, cmdline=command, rank="1"),  # DDP's second rank
        bench.Process(12, 11, cmdline=command, rank="1"),  # a data worker forked by rank 1
        bench.Process(13, 10, cmdline="python -c pass"),
    ]
    roles = [bench.role(process, processes, root=10) for process in processes]
    assert roles == ["rank 0", "rank 1", "worker", "worker"]
