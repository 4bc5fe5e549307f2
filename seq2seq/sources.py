"""Reading parallel corpora, strictly: every problem is a DataError naming the file.

A source is one string:

- a folder of parallel text files ``{split}.{lang}`` or ``{split}.{lang}.gz``, one
  sentence per line, aligned line by line (the Multi30k layout);
- a file pattern with the literal placeholder ``{split}``, one file per split:
  ``data/{split}.tsv`` (source<TAB>target on each line, no quoting) or
  ``data/{split}.jsonl`` (each line ``{"en": ..., "de": ...}`` or the Hub's
  ``{"translation": {"en": ..., "de": ...}}``), optionally gzipped (``.tsv.gz``);
- anything else: a Hugging Face Hub dataset id with a ``translation`` column.

Lines are split on ``\\n`` only (a trailing ``\\r`` is removed), so a sentence containing
another Unicode line separator stays one sentence.
"""

from __future__ import annotations

import glob
import gzip
import json
import zlib
from dataclasses import dataclass
from pathlib import Path

import datasets

from seq2seq.errors import DataError

SPLIT = "{split}"
PATTERN_SUFFIXES = (".tsv", ".tsv.gz", ".jsonl", ".jsonl.gz")


@dataclass
class Pairs:
    """The sentence pairs of one split, in file order, and where they came from."""

    src: list[str]
    tgt: list[str]
    origin: str  # e.g. "data/train.en.gz + data/train.de.gz", for messages

    def __len__(self) -> int:
        return len(self.src)


def read_lines(path: str | Path) -> list[str]:
    """The lines of a UTF-8 text file (gzipped if its name ends in ``.gz``)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except OSError as error:
        raise DataError(f"cannot read {path}: {error.strerror}") from error
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as error:
            raise DataError(f"{path}: not a readable gzip file ({error})") from error
    return decode_lines(data, str(path))


def decode_lines(data: bytes, name: str) -> list[str]:
    """The lines of UTF-8 ``data``; ``name`` (a path, ``<stdin>``) is for the error message."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise DataError(f"{name}: line {line} is not valid UTF-8 ({error.reason})") from None
    if not text:
        return []
    lines = text.removeprefix("\ufeff").removesuffix("\n").split("\n")
    return [line.removesuffix("\r") for line in lines]


def read_pairs(
    source: str, split: str, src_lang: str, tgt_lang: str, hub_config: str | None = None
) -> Pairs:
    """The pairs of ``split`` from ``source`` (see the module docstring for the forms)."""
    if SPLIT in source:
        return _pattern_pairs(source, split, src_lang, tgt_lang)
    if Path(source).is_dir():
        return _folder_pairs(Path(source), split, src_lang, tgt_lang)
    if source.endswith(PATTERN_SUFFIXES):
        raise DataError(
            f"{source}: a TSV or JSON-lines source names one file per split with the literal "
            f"placeholder {SPLIT}, e.g. data/{SPLIT}.tsv"
        )
    return _hub_pairs(source, split, src_lang, tgt_lang, hub_config)


def _folder_file(folder: Path, split: str, lang: str, src_lang: str, tgt_lang: str) -> Path:
    candidates = [folder / f"{split}.{lang}", folder / f"{split}.{lang}.gz"]
    found = [path for path in candidates if path.is_file()]
    if len(found) == 1:
        return found[0]
    if found:
        raise DataError(f"both {found[0]} and {found[1]} exist; remove one")
    names = sorted(path.name for path in folder.iterdir() if path.is_file())
    splits = sorted(
        {
            name.split(".")[0]
            for name in names
            if name.removesuffix(".gz").endswith(f".{src_lang}")
            and any(name.split(".")[0] + f".{tgt_lang}" + gz in names for gz in ("", ".gz"))
        }
    )
    shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
    raise DataError(
        f"{folder}: no {split}.{lang} or {split}.{lang}.gz (splits found for "
        f"{src_lang}-{tgt_lang}: {', '.join(splits) or 'none'}; files: {shown or 'none'})"
    )


def _folder_pairs(folder: Path, split: str, src_lang: str, tgt_lang: str) -> Pairs:
    src_path = _folder_file(folder, split, src_lang, src_lang, tgt_lang)
    tgt_path = _folder_file(folder, split, tgt_lang, src_lang, tgt_lang)
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise DataError(
            f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}; "
            "parallel files must be aligned line by line"
        )
    return Pairs(src, tgt, f"{src_path} + {tgt_path}")


def _pattern_pairs(pattern: str, split: str, src_lang: str, tgt_lang: str) -> Pairs:
    if not pattern.endswith(PATTERN_SUFFIXES):
        raise DataError(
            f"{pattern}: expected a file pattern ending in {', '.join(PATTERN_SUFFIXES)}"
        )
    path = Path(pattern.replace(SPLIT, split))
    if not path.is_file():
        prefix, suffix = pattern.split(SPLIT, 1)
        matches = glob.glob(glob.escape(prefix) + "*" + glob.escape(suffix))
        splits = sorted(match[len(prefix) : len(match) - len(suffix)] for match in matches)
        raise DataError(f"{path}: no such file (splits found: {', '.join(splits) or 'none'})")
    lines = read_lines(path)
    if pattern.removesuffix(".gz").endswith(".tsv"):
        src, tgt = _parse_tsv(lines, path)
    else:
        src, tgt = _parse_jsonl(lines, path, src_lang, tgt_lang)
    return Pairs(src, tgt, str(path))


def _parse_tsv(lines: list[str], path: Path) -> tuple[list[str], list[str]]:
    src, tgt = [], []
    for number, line in enumerate(lines, 1):
        fields = line.split("\t")
        if len(fields) != 2:
            raise DataError(
                f"{path}: line {number} has {len(fields)} tab-separated fields, "
                "expected 2 (source<TAB>target)"
            )
        src.append(fields[0])
        tgt.append(fields[1])
    return src, tgt


def _parse_jsonl(
    lines: list[str], path: Path, src_lang: str, tgt_lang: str
) -> tuple[list[str], list[str]]:
    src, tgt = [], []
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataError(
                f"{path}: line {number} is not valid JSON ({error.msg}, column {error.colno})"
            ) from None
        if isinstance(record, dict) and isinstance(record.get("translation"), dict):
            record = record["translation"]
        texts = [
            record.get(lang) if isinstance(record, dict) else None for lang in (src_lang, tgt_lang)
        ]
        if not all(isinstance(text, str) for text in texts):
            raise DataError(
                f'{path}: line {number} is not {{"{src_lang}": "...", "{tgt_lang}": "..."}} '
                'nor such an object under "translation"'
            )
        src.append(texts[0])
        tgt.append(texts[1])
    return src, tgt


def _hub_pairs(
    source: str, split: str, src_lang: str, tgt_lang: str, hub_config: str | None
) -> Pairs:
    try:
        dataset = datasets.load_dataset(source, hub_config, split=split)
    except Exception as error:  # offline, unknown dataset or split: datasets raises many kinds
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise DataError(
            f"{source!r} is not a folder, nor a {SPLIT}.tsv/.jsonl pattern, and loading it from "
            f"the Hugging Face Hub failed: {reason}"
        ) from error
    origin = f"{source} ({hub_config or 'default'}, {split})"
    if "translation" not in dataset.column_names:
        raise DataError(f"{origin} has no translation column (columns: {dataset.column_names})")
    src, tgt = [], []
    for number, record in enumerate(dataset["translation"]):
        if not isinstance(record.get(src_lang), str) or not isinstance(record.get(tgt_lang), str):
            raise DataError(f"{origin}: row {number} has no {src_lang}-{tgt_lang} pair: {record}")
        src.append(record[src_lang])
        tgt.append(record[tgt_lang])
    return Pairs(src, tgt, origin)
