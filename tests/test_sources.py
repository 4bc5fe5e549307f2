"""Reading corpora: every source form gives the same pairs; every bad input its DataError."""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from seq2seq.common.errors import DataError
from seq2seq.training.data import sources as sources_module
from seq2seq.training.data.sources import load_split
from seq2seq.training.data.split_text import SplitText

CACHE: list[Path] = []  # this test's cache folder, set by the fixture below


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    CACHE[:] = [tmp_path_factory.mktemp("cache")]
    return CACHE[0]


def read_pairs(source: str, split: str, src_lang: str, tgt_lang: str) -> SplitText:
    return load_split(source, split, src_lang, tgt_lang, CACHE[0])


SRC = ["A dog runs.", "Two cats\u2028sleep.", "", "Ünïcode ✓ 🐕", "x"]
TGT = ["Ein Hund läuft.", "Zwei Katzen schlafen.", "leer", "Ünïcode ✓ 🐕", "z"]


def write(path: Path, text: str) -> Path:
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


@pytest.fixture
def sources(tmp_path: Path) -> dict[str, str]:
    """The same two splits as a folder, gzipped folder, TSV, JSONL and Hub-style JSONL."""
    splits = {"train": (SRC, TGT), "val": (SRC[:2], TGT[:2])}
    for kind in ("plain", "gz"):
        (tmp_path / kind).mkdir()
    for split, (src, tgt) in splits.items():
        write(tmp_path / "plain" / f"{split}.en", text(src))
        write(tmp_path / "plain" / f"{split}.de", text(tgt))
        write(tmp_path / "gz" / f"{split}.en.gz", text(src))
        write(tmp_path / "gz" / f"{split}.de.gz", text(tgt))
        write(tmp_path / f"{split}.tsv", text([f"{s}\t{t}" for s, t in zip(src, tgt, strict=True)]))
        rows = [{"de": t, "en": s} for s, t in zip(src, tgt, strict=True)]
        write(tmp_path / f"{split}.jsonl", text([json.dumps(r) for r in rows]))
        hub = [json.dumps({"translation": r}, ensure_ascii=False) for r in rows]
        write(tmp_path / f"{split}.hub.jsonl.gz", text(hub))
    return {
        "folder": str(tmp_path / "plain"),
        "gzipped folder": str(tmp_path / "gz"),
        "tsv": str(tmp_path / "{split}.tsv"),
        "jsonl": str(tmp_path / "{split}.jsonl"),
        "hub-style jsonl.gz": str(tmp_path / "{split}.hub.jsonl.gz"),
    }


def test_every_source_form_gives_the_same_pairs(sources: dict[str, str]) -> None:
    for split, count in [("train", len(SRC)), ("val", 2)]:
        for name, source in sources.items():
            pairs = read_pairs(source, split, "en", "de")
            assert (pairs.src, pairs.tgt) == (SRC[:count], TGT[:count]), name
            assert len(pairs) == count


def test_missing_split_lists_what_was_found(sources: dict[str, str]) -> None:
    folder = sources["folder"]
    with pytest.raises(
        DataError, match=r"no test\.en or test\.en\.gz .*found for en-de: train, val"
    ):
        read_pairs(folder, "test", "en", "de")
    with pytest.raises(DataError, match=r"no train\.fr .*files: train\.de, train\.en, val\.de"):
        read_pairs(folder, "train", "en", "fr")
    with pytest.raises(DataError, match=r"test\.tsv: no such file \(splits found: train, val\)"):
        read_pairs(sources["tsv"], "test", "en", "de")


def test_plain_and_gzipped_twins_are_ambiguous(sources: dict[str, str]) -> None:
    write(Path(sources["folder"]) / "train.en.gz", "A\n")
    with pytest.raises(DataError, match=r"both .*train\.en and .*train\.en\.gz exist"):
        read_pairs(sources["folder"], "train", "en", "de")


def test_misaligned_files_give_both_counts(tmp_path: Path) -> None:
    write(tmp_path / "train.en", "a\nb\nc\n")
    write(tmp_path / "train.de", "a\nb\n")
    with pytest.raises(DataError, match=r"train\.en has 3 lines but .*train\.de has 2"):
        read_pairs(str(tmp_path), "train", "en", "de")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("train.tsv", "a\tb\nno tab here\n", r"train\.tsv: line 2 has 1 tab-separated fields"),
        ("train.tsv", "a\tb\tc\n", r"train\.tsv: line 1 has 3 tab-separated fields"),
        ("train.jsonl", '{"en": "a", "de": "b"}\n{"en": "a",\n', r"line 2 is not valid JSON"),
        ("train.jsonl", '{"en": "a", "fr": "b"}\n', r"train\.jsonl: line 1 is not \{\"en\""),
        ("train.jsonl", '{"translation": {"en": "a", "de": 3}}\n', r"line 1 is not \{\"en\""),
        ("train.jsonl", '["en", "de"]\n', r"train\.jsonl: line 1 is not"),
    ],
)
def test_malformed_rows_name_file_and_line(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    write(tmp_path / name, content)
    pattern = str(tmp_path / name.replace("train", "{split}"))
    with pytest.raises(DataError, match=message):
        read_pairs(pattern, "train", "en", "de")


def test_a_tsv_without_the_split_placeholder_is_explained(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"placeholder \{split\}"):
        read_pairs(str(write(tmp_path / "all.tsv", "a\tb\n")), "train", "en", "de")
    with pytest.raises(DataError, match=r"expected a file pattern ending in \.tsv"):
        read_pairs(str(tmp_path / "{split}.txt"), "train", "en", "de")


def test_an_unreachable_hub_dataset_is_a_data_error() -> None:
    if os.environ.get("HF_DATASETS_OFFLINE") != "1":
        pytest.skip("only run offline: this test must not reach the network")
    with pytest.raises(DataError, match="neither-a-folder.*Hugging Face Hub"):
        read_pairs("no-such-user/neither-a-folder", "train", "en", "de")


def test_multi30k_layout(multi30k_dir: Path) -> None:
    pairs = read_pairs(str(multi30k_dir), "val", "en", "de")
    assert len(pairs) == 1014 and all(pairs.src) and all(pairs.tgt)
    assert pairs.origin.endswith("val.de.gz")


def test_a_bad_byte_deep_in_a_large_gzipped_file_is_reported_on_its_line(tmp_path: Path) -> None:
    lines = [f"sentence number {i}".encode() for i in range(200_000)]
    lines[150_000] = b"broken \xc3\x28 byte"
    (tmp_path / "train.en.gz").write_bytes(gzip.compress(b"\n".join(lines) + b"\n", 1))
    write(tmp_path / "train.de", text(["satz"] * len(lines)))
    with pytest.raises(DataError, match=r"train\.en\.gz: line 150001 is not valid UTF-8"):
        read_pairs(str(tmp_path), "train", "en", "de")
    assert not list(CACHE[0].rglob("*.arrow"))  # nothing half-written is left to be found


def test_text_is_found_again_by_file_identity_without_reading(
    sources: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = read_pairs(sources["gzipped folder"], "train", "en", "de")
    assert first.files and all(Path(f).is_relative_to(CACHE[0]) for f in first.files)

    def fail(path: object) -> None:
        raise AssertionError(f"read {path} again")

    monkeypatch.setattr(sources_module, "iter_lines", fail)
    again = read_pairs(sources["gzipped folder"], "train", "en", "de")
    assert (again.key, again.src, again.tgt) == (first.key, SRC, TGT)


@pytest.mark.parametrize("size", [0, 2, 5, 50])
def test_a_sample_is_drawn_in_file_order_and_the_same_for_a_seed(
    sources: dict[str, str], size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sources_module, "RECORD_BATCH_ROWS", 2)  # a sample across batches
    text = read_pairs(sources["folder"], "train", "en", "de")
    assert len(text.rows.data.to_batches()) == 3
    src, tgt = text.sample(size, seed=3)
    assert len(src) == len(tgt) == (min(size, len(SRC)) or len(SRC))
    positions = [SRC.index(s) for s in src]
    assert positions == sorted(positions) and [TGT[i] for i in positions] == tgt
    assert text.sample(size, seed=3) == (src, tgt)
    hub_view = replace(text, files=None)  # the same rows read through the memory map
    assert hub_view.sample(size, seed=3) == (src, tgt)
