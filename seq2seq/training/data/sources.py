"""Reading parallel corpora into memory-mapped Arrow, strictly: every problem is a DataError
naming the file (and the line, where there is one).

A source is one string:

- a folder of parallel text files ``{split}.{lang}`` or ``{split}.{lang}.gz``, one
  sentence per line, aligned line by line (the Multi30k layout);
- a file pattern with the literal placeholder ``{split}``, one file per split:
  ``data/{split}.tsv`` (source<TAB>target on each line, no quoting) or
  ``data/{split}.jsonl`` (each line ``{"en": ..., "de": ...}`` or the Hub's
  ``{"translation": {"en": ..., "de": ...}}``), optionally gzipped (``.tsv.gz``);
- a dataset folder of the Hub's shape (a ``README.md`` naming its configs, or Parquet
  files), or anything else: a Hugging Face Hub dataset id with a ``translation`` column.

Local files are streamed line by line into an Arrow file under ``cache_dir/text``, keyed on
what identifies the files (path, size, modification time) rather than on their text, so a
later run finds it without reading the corpus. Hub datasets already are Arrow: their
``translation`` column is flattened into ``src``/``tgt`` without copying.

Lines are read as ``seq2seq.text.lines`` reads them: split on ``\\n`` only, so a sentence
containing another Unicode line separator stays one sentence.
"""

from __future__ import annotations

import glob
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Any

import datasets
import pyarrow.compute as pc

from seq2seq.common.errors import DataError
from seq2seq.text.lines import iter_lines
from seq2seq.training.data.split_text import SplitText

SPLIT = "{split}"
PATTERN_SUFFIXES = (".tsv", ".tsv.gz", ".jsonl", ".jsonl.gz")
TEXT_FORMAT = 1  # part of every text cache key: bump when reading changes what it yields
# Rows per Arrow record batch. Opening a memory-mapped file reads every batch's header,
# and the kernel maps the pages around each read into the process: few, large batches keep
# that a few megabytes whatever the corpus size (1000-row batches: a quarter of the file).
RECORD_BATCH_ROWS = 20_000
FEATURES = datasets.Features({"src": datasets.Value("string"), "tgt": datasets.Value("string")})

Row = dict[str, str]


# -- rows of each local format, streamed -----------------------------------------------------
def parallel_rows(src_path: str, tgt_path: str) -> Iterator[Row]:
    """Pairs of two files aligned line by line; different line counts are an error."""
    src_lines, tgt_lines = iter_lines(src_path), iter_lines(tgt_path)
    for paired, (src, tgt) in enumerate(zip_longest(src_lines, tgt_lines)):
        if src is None or tgt is None:
            src_count = paired + (src is not None) + sum(1 for _ in src_lines)
            tgt_count = paired + (tgt is not None) + sum(1 for _ in tgt_lines)
            raise DataError(
                f"{src_path} has {src_count} lines but {tgt_path} has {tgt_count}; "
                "parallel files must be aligned line by line"
            )
        yield {"src": src, "tgt": tgt}


def tsv_rows(path: str) -> Iterator[Row]:
    """Pairs of ``source<TAB>target`` lines."""
    for number, line in enumerate(iter_lines(path), 1):
        fields = line.split("\t")
        if len(fields) != 2:
            raise DataError(
                f"{path}: line {number} has {len(fields)} tab-separated fields, "
                "expected 2 (source<TAB>target)"
            )
        yield {"src": fields[0], "tgt": fields[1]}


def jsonl_rows(path: str, src_lang: str, tgt_lang: str) -> Iterator[Row]:
    """Pairs of ``{src_lang: ..., tgt_lang: ...}`` lines, optionally under ``translation``."""
    for number, line in enumerate(iter_lines(path), 1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataError(
                f"{path}: line {number} is not valid JSON ({error.msg}, column {error.colno})"
            ) from None
        if isinstance(record, dict) and isinstance(record.get("translation"), dict):
            record = record["translation"]
        src, tgt = [
            record.get(lang) if isinstance(record, dict) else None for lang in (src_lang, tgt_lang)
        ]
        if not (isinstance(src, str) and isinstance(tgt, str)):
            raise DataError(
                f'{path}: line {number} is not {{"{src_lang}": "...", "{tgt_lang}": "..."}} '
                'nor such an object under "translation"'
            )
        yield {"src": src, "tgt": tgt}


# -- finding the files of a split -------------------------------------------------------------
@dataclass(frozen=True)
class LocalSplit:
    """The files of one split and the generator of its rows (not read yet)."""

    files: tuple[Path, ...]
    rows: Callable[..., Iterator[Row]]
    rows_kwargs: dict[str, str]

    @property
    def origin(self) -> str:
        return " + ".join(str(path) for path in self.files)

    def key(self, src_lang: str, tgt_lang: str) -> str:
        """What identifies the text: each file's resolved path, size and modification time."""
        identity: list[Any] = [TEXT_FORMAT, self.rows.__name__, src_lang, tgt_lang]
        for path in self.files:
            stat = path.stat()
            identity.append([str(path.resolve()), stat.st_size, stat.st_mtime_ns])
        return hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:32]


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


def _folder_split(folder: Path, split: str, src_lang: str, tgt_lang: str) -> LocalSplit:
    src_path = _folder_file(folder, split, src_lang, src_lang, tgt_lang)
    tgt_path = _folder_file(folder, split, tgt_lang, src_lang, tgt_lang)
    kwargs = {"src_path": str(src_path), "tgt_path": str(tgt_path)}
    return LocalSplit((src_path, tgt_path), parallel_rows, kwargs)


def _pattern_split(pattern: str, split: str, src_lang: str, tgt_lang: str) -> LocalSplit:
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
    if pattern.removesuffix(".gz").endswith(".tsv"):
        return LocalSplit((path,), tsv_rows, {"path": str(path)})
    kwargs = {"path": str(path), "src_lang": src_lang, "tgt_lang": tgt_lang}
    return LocalSplit((path,), jsonl_rows, kwargs)


def is_dataset_folder(folder: Path) -> bool:
    """A folder ``datasets.load_dataset`` reads as a dataset (the Hub's repository layout)."""
    return (folder / "README.md").is_file() or any(
        next(folder.glob(pattern), None) for pattern in ("*.parquet", "*/*.parquet")
    )


# -- reading a split --------------------------------------------------------------------------
def load_split(
    source: str,
    split: str,
    src_lang: str,
    tgt_lang: str,
    cache_dir: str | Path,
    hub_config: str | None = None,
) -> SplitText:
    """The pairs of ``split`` from ``source`` (see the module docstring for the forms).

    Local files are read once into ``cache_dir/text``; a later call with the same files
    (same paths, sizes and modification times) maps that copy without reading them.
    """
    if SPLIT in source:
        local = _pattern_split(source, split, src_lang, tgt_lang)
    elif Path(source).is_dir() and not is_dataset_folder(Path(source)):
        local = _folder_split(Path(source), split, src_lang, tgt_lang)
    elif source.endswith(PATTERN_SUFFIXES):
        raise DataError(
            f"{source}: a TSV or JSON-lines source names one file per split with the literal "
            f"placeholder {SPLIT}, e.g. data/{SPLIT}.tsv"
        )
    else:
        return _hub_split(source, split, src_lang, tgt_lang, hub_config, Path(cache_dir))
    key = local.key(src_lang, tgt_lang)
    try:
        rows = datasets.Dataset.from_generator(
            local.rows,
            features=FEATURES,
            gen_kwargs=local.rows_kwargs,
            cache_dir=str(Path(cache_dir) / "text"),
            fingerprint=key,
            split=datasets.NamedSplit(split),
            writer_batch_size=RECORD_BATCH_ROWS,
        )
    except datasets.exceptions.DatasetGenerationError as error:
        if isinstance(error.__cause__, DataError):
            raise error.__cause__ from None
        raise
    except ValueError as error:  # read without error, but no row: datasets keeps no table
        if "corresponds to no data" not in str(error):
            raise
        rows = datasets.Dataset.from_dict({"src": [], "tgt": []}, features=FEATURES)
    files = tuple(file["filename"] for file in rows.cache_files)
    return SplitText(rows, local.origin, key, files)


def _hub_split(
    source: str,
    split: str,
    src_lang: str,
    tgt_lang: str,
    hub_config: str | None,
    cache_dir: Path,
) -> SplitText:
    try:
        dataset = datasets.load_dataset(
            source, hub_config, split=split, cache_dir=str(cache_dir / "hub")
        )
    except Exception as error:  # offline, unknown dataset or split: datasets raises many kinds
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise DataError(
            f"{source!r} is not a folder of parallel files, nor a {SPLIT}.tsv/.jsonl pattern, "
            f"and loading it with datasets (a local dataset folder or the Hugging Face Hub) "
            f"failed: {reason}"
        ) from error
    origin = f"{source} ({hub_config or 'default'}, {split})"
    if "translation" not in dataset.column_names:
        raise DataError(f"{origin} has no translation column (columns: {dataset.column_names})")
    columns = {f"translation.{src_lang}": "src", f"translation.{tgt_lang}": "tgt"}
    flat = dataset.select_columns(["translation"]).flatten()  # Arrow columns: no copy
    missing = [name for name in columns if name not in flat.column_names]
    if missing:
        raise DataError(
            f"{origin}: the translation column has no {src_lang}-{tgt_lang} pair "
            f"(languages: {', '.join(c.split('.', 1)[1] for c in flat.column_names)})"
        )
    rows = flat.select_columns(list(columns)).rename_columns(columns)
    for name, column in columns.items():
        nulls = rows.data.column(column).null_count
        if nulls:
            first = pc.index(pc.is_null(rows.data.column(column)), True).as_py()
            lang = name.split(".", 1)[1]
            raise DataError(f"{origin}: row {first} has no {lang} text ({nulls} rows in all)")
    key = hashlib.sha256(f"{TEXT_FORMAT} hub {dataset._fingerprint} {columns}".encode())
    return SplitText(rows, origin, key.hexdigest()[:32])
