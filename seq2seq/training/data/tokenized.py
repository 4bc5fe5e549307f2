"""Tokenized splits on disk, read row by row with plain reads.

    <folder>/<key>.src.ids       int32: every row's source ids, rows in order
    <folder>/<key>.src.offsets   int64 [N + 1]: where row i's source ids start in .src.ids
    <folder>/<key>.tgt.ids, <folder>/<key>.tgt.offsets   the same for the target side
    <folder>/<key>.lengths.npy   int32 [N, 2]: each row's source and target length

Written once per (text, vocabulary): the text is read in batches with plain file reads
(see ``SplitText.iter_batches``), encoded on ``num_proc`` processes
(``encode_pool``) and appended, so memory stays bounded by a batch whatever the corpus
size. Every file is written under a temporary name and renamed when complete, the
lengths last: an interrupted run leaves no cache that looks whole.

Training reads rows with ``os.pread`` rather than through a memory map. Pages of a mapped
file count in the resident memory of the process that touches them, and the kernel maps
the cached pages around each touched one too, heading for the whole file in an epoch
(docs/benchmarks/speed.md, "Measurements behind choices in the code"). Read this way, the
pages stay in the kernel's page cache, shared by every process and counted in none.
"""

from __future__ import annotations

import copy
import os
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
from torch.utils.data import Dataset
from tqdm.auto import tqdm

from seq2seq.text.tokenizer import AnyVocabulary
from seq2seq.training.data.encode_pool import EncodePool
from seq2seq.training.data.split_text import SplitText

BATCH_PAIRS = 1000  # pairs a worker encodes at a time
SIDES = ("src", "tgt")
ID_BYTES, OFFSET_BYTES = 4, 8  # int32 ids, int64 offsets


def cache_files(folder: Path, key: str) -> dict[str, Path]:
    """The files of one tokenized split, by role (``src.ids``, ..., ``lengths``)."""
    names = [f"{side}.{kind}" for side in SIDES for kind in ("ids", "offsets")]
    return {
        **{name: folder / f"{key}.{name}" for name in names},
        "lengths": folder / f"{key}.lengths.npy",
    }


class TokenizedRows(Dataset):
    """Rows ``{"id", "src_ids", "tgt_ids"}`` (ids as int32 arrays, no specials) of a
    tokenized split, or of the subset ``rows`` (row numbers) of it. ``id`` is the row's
    number in its split. Files are opened on first read in each process (DataLoader
    workers included)."""

    def __init__(self, files: dict[str, Path], rows: np.ndarray | None = None) -> None:
        self.files = files
        self.lengths = np.load(files["lengths"])  # [N, 2] int32
        self.rows = rows
        self._open: tuple[int, dict[str, int]] | None = None  # (pid, descriptors)

    def select(self, rows: np.ndarray) -> TokenizedRows:
        """The subset of ``rows`` (row numbers of the whole split, [M]), sharing the lengths."""
        subset = copy.copy(self)
        subset.rows, subset._open = rows.astype(np.int32), None
        return subset

    def __len__(self) -> int:
        return len(self.lengths) if self.rows is None else len(self.rows)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: list[int]) -> list[dict[str, Any]]:
        """The DataLoader's batched read: one ``pread`` per offset pair and per side."""
        descriptors = self._descriptors()
        examples = []
        for index in indices:
            row = int(index if self.rows is None else self.rows[index])
            if not 0 <= row < len(self.lengths):
                raise IndexError(f"row {row} of a split of {len(self.lengths)}")
            example: dict[str, Any] = {"id": row}
            for side in SIDES:
                offsets = descriptors[f"{side}.offsets"]
                bounds = os.pread(offsets, 2 * OFFSET_BYTES, row * OFFSET_BYTES)
                start, end = np.frombuffer(bounds, dtype=np.int64).tolist()
                data = os.pread(
                    descriptors[f"{side}.ids"], (end - start) * ID_BYTES, start * ID_BYTES
                )
                example[f"{side}_ids"] = np.frombuffer(data, dtype=np.int32)
            examples.append(example)
        return examples

    def _descriptors(self) -> dict[str, int]:
        if self._open is None or self._open[0] != os.getpid():  # new, or a forked worker
            names = [name for name in self.files if name != "lengths"]
            self._open = (
                os.getpid(),
                {name: os.open(self.files[name], os.O_RDONLY) for name in names},
            )
        return self._open[1]

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_open": None}  # descriptors do not travel to workers

    def __del__(self) -> None:
        if self._open is not None and self._open[0] == os.getpid():
            for descriptor in self._open[1].values():
                os.close(descriptor)


def _write(
    text: SplitText, vocab: AnyVocabulary, files: dict[str, Path], num_proc: int, desc: str
) -> None:
    suffix = f".{os.getpid()}.part"  # two runs writing at once each write their own
    parts = {name: path.with_name(path.name + suffix) for name, path in files.items()}
    collected: list[np.ndarray] = []
    written = {side: 0 for side in SIDES}
    with ExitStack() as files_open:
        outputs = {
            name: files_open.enter_context(open(path, "wb"))
            for name, path in parts.items()
            if name != "lengths"
        }
        for side in SIDES:
            outputs[f"{side}.offsets"].write(np.zeros(1, np.int64).tobytes())
        with (
            EncodePool(vocab.src, vocab.tgt, processes=num_proc) as pool,
            tqdm(total=len(text), desc=desc, unit=" pairs", unit_scale=True) as progress,
        ):
            for encoded in pool.encode(text.iter_batches(BATCH_PAIRS)):
                src_lens, src_ids, tgt_lens, tgt_ids = encoded
                for side, lens, ids in [("src", src_lens, src_ids), ("tgt", tgt_lens, tgt_ids)]:
                    outputs[f"{side}.ids"].write(ids.tobytes())
                    ends = written[side] + np.cumsum(lens, dtype=np.int64)
                    outputs[f"{side}.offsets"].write(ends.tobytes())
                    written[side] += int(lens.sum())
                collected.append(np.stack([src_lens, tgt_lens], axis=1))
                progress.update(len(src_lens))
    with open(parts["lengths"], "wb") as output:  # np.save would add .npy to a path
        np.save(output, np.concatenate(collected) if collected else np.zeros((0, 2), np.int32))
    renames = [name for name in parts if name != "lengths"] + ["lengths"]
    for name in renames:  # the lengths last: their presence marks a whole cache
        os.replace(parts[name], files[name])


def load_or_tokenize(
    text: SplitText, vocab: AnyVocabulary, folder: Path, key: str, num_proc: int, desc: str
) -> TokenizedRows:
    """The tokenized rows of ``text``, from ``folder/<key>.*`` if there, else written there
    first."""
    folder.mkdir(parents=True, exist_ok=True)
    files = cache_files(folder, key)
    if not files["lengths"].is_file():
        try:
            _write(text, vocab, files, num_proc, desc)
        except BaseException:  # an error or Ctrl-C: leave no partial files behind
            for part in folder.glob(f"{key}.*.{os.getpid()}.part"):
                part.unlink(missing_ok=True)
            raise
    return TokenizedRows(files)
