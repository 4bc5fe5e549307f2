"""Tokenised splits on disk: ids in an Arrow file, lengths in a NumPy file beside it.

    <folder>/<key>.arrow         rows {"id", "src_ids", "tgt_ids"}, ids as int32 lists
    <folder>/<key>.lengths.npy   [N, 2] int32: source and target pieces of each row

Written once per (text, vocabulary): the text is read in record batches with plain file
reads (see ``SplitText.iter_batches``), encoded on ``num_proc`` processes
(``seq2seq.encode_pool``) and appended to the Arrow file, so memory stays bounded by a
batch whatever the corpus size. Both files are written under temporary names and renamed
when complete, lengths first, so an interrupted run leaves no cache that looks whole.
Later runs memory-map the Arrow file and load the lengths without touching the ids.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
from datasets import Dataset, Features, List, Value
from datasets.arrow_writer import ArrowWriter
from tqdm.auto import tqdm

from seq2seq.encode_pool import EncodePool
from seq2seq.sources import RECORD_BATCH_ROWS, SplitText
from seq2seq.tokenizer import Vocabulary

FEATURES = Features(
    {"id": Value("int64"), "src_ids": List(Value("int32")), "tgt_ids": List(Value("int32"))}
)
BATCH_PAIRS = 1000  # pairs a worker encodes at a time


def _list_array(lengths: np.ndarray, values: np.ndarray) -> pa.ListArray:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))


def _write(
    text: SplitText, vocab: Vocabulary, arrow: Path, lengths: Path, num_proc: int, desc: str
) -> None:
    part = f".{os.getpid()}.part"  # two runs writing at once each write their own
    arrow_part, lengths_part = arrow.with_suffix(part), lengths.with_suffix(f"{part}.npy")
    collected: list[np.ndarray] = []
    first = 0
    models = (vocab.src.to_bytes(), vocab.tgt.to_bytes())
    with (
        EncodePool(*models, processes=num_proc) as pool,
        ArrowWriter(
            path=str(arrow_part), features=FEATURES, writer_batch_size=RECORD_BATCH_ROWS
        ) as writer,
        tqdm(total=len(text), desc=desc, unit=" pairs", unit_scale=True) as progress,
    ):
        pending: list[pa.RecordBatch] = []  # written RECORD_BATCH_ROWS at a time
        for src_lens, src_ids, tgt_lens, tgt_ids in pool.encode(text.iter_batches(BATCH_PAIRS)):
            count = len(src_lens)
            ids = pa.array(np.arange(first, first + count, dtype=np.int64))
            columns = [ids, _list_array(src_lens, src_ids), _list_array(tgt_lens, tgt_ids)]
            pending.append(pa.RecordBatch.from_arrays(columns, names=list(FEATURES)))
            collected.append(np.stack([src_lens, tgt_lens], axis=1))
            first += count
            progress.update(count)
            if sum(batch.num_rows for batch in pending) >= RECORD_BATCH_ROWS:
                writer.write_table(pa.Table.from_batches(pending).combine_chunks())
                pending = []
        if pending:
            writer.write_table(pa.Table.from_batches(pending).combine_chunks())
        writer.finalize()
    np.save(lengths_part, np.concatenate(collected) if collected else np.zeros((0, 2), np.int32))
    os.replace(lengths_part, lengths)
    os.replace(arrow_part, arrow)


def load_or_tokenise(
    text: SplitText, vocab: Vocabulary, folder: Path, key: str, num_proc: int, desc: str
) -> tuple[Dataset, np.ndarray]:
    """The tokenised rows of ``text`` (memory-mapped) and their lengths [N, 2], from
    ``folder/<key>.*`` if there, else written there first."""
    folder.mkdir(parents=True, exist_ok=True)
    arrow, lengths = folder / f"{key}.arrow", folder / f"{key}.lengths.npy"
    if not arrow.is_file():
        _write(text, vocab, arrow, lengths, num_proc, desc)
    return Dataset.from_file(str(arrow)), np.load(lengths)
