"""One split's sentence pairs in Arrow, and passes over them that do not grow with it.

A ``SplitText`` is what ``sources.load_split`` returns: rows with columns ``src`` and ``tgt``
in file order, memory-mapped. Passes over the whole split (every pair in
batches, a random sample) read the Arrow files with plain reads where it knows them, so the
pages they touch stay in the kernel's page cache instead of the process's resident memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import datasets
import numpy as np
import pyarrow as pa


@dataclass(frozen=True)
class SplitText:
    """The sentence pairs of one split, in file order: ``rows`` has columns ``src`` and
    ``tgt``, memory-mapped from Arrow files. ``key`` identifies the text (equal keys, equal
    text) without reading it; ``origin`` says where it came from, for messages.

    ``files``: Arrow files that hold exactly these rows, in order, as ``src`` and ``tgt``
    (read from local files), or None (a Hub dataset: a view of its own files). Passes over
    the whole split read these files with plain reads instead of the memory map, so the
    pages they touch stay in the kernel's page cache rather than in the process's memory.
    """

    rows: datasets.Dataset
    origin: str
    key: str
    files: tuple[str, ...] | None = None

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def src(self) -> list[str]:
        """The source sentences as a list: for the small splits (validation, test) only."""
        return self.rows.select_columns(["src"])[:]["src"]

    @property
    def tgt(self) -> list[str]:
        """The target sentences as a list: for the small splits (validation, test) only."""
        return self.rows.select_columns(["tgt"])[:]["tgt"]

    def iter_batches(self, size: int) -> Iterator[tuple[list[str], list[str]]]:
        """Every pair in order, as (source sentences, target sentences) of about ``size``."""
        if self.files is None:
            for batch in self.rows.iter(batch_size=size):
                yield batch["src"], batch["tgt"]
            return
        for batch in self._record_batches():
            for start in range(0, batch.num_rows, size):
                part = batch.slice(start, size)
                yield part.column("src").to_pylist(), part.column("tgt").to_pylist()

    def sample(self, size: int, seed: int) -> tuple[list[str], list[str]]:
        """Source and target sentences of ``size`` pairs drawn at random with ``seed``, in
        file order; every pair when ``size`` is 0 or at least the number of pairs."""
        if not 0 < size < len(self):
            pairs = list(self.iter_batches(10_000))
            return [s for src, _ in pairs for s in src], [t for _, tgt in pairs for t in tgt]
        picked = np.sort(np.random.default_rng(seed).choice(len(self), size, replace=False))
        if self.files is None:
            columns = self.rows.select(picked)[:]
            return columns["src"], columns["tgt"]
        src: list[str] = []
        tgt: list[str] = []
        first = 0
        for batch in self._record_batches():
            lo, hi = np.searchsorted(picked, [first, first + batch.num_rows])
            chosen = batch.take(pa.array(picked[lo:hi] - first))
            src += chosen.column("src").to_pylist()
            tgt += chosen.column("tgt").to_pylist()
            first += batch.num_rows
        return src, tgt

    def _record_batches(self) -> Iterator[pa.RecordBatch]:
        """The record batches of ``files``, read with plain reads (not memory-mapped)."""
        for path in self.files or ():
            with pa.OSFile(path) as file:
                yield from pa.ipc.open_stream(file)
