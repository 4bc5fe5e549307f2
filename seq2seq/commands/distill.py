"""``seq2seq distill``: the teacher's half of sequence-level knowledge distillation (Kim &
Rush, 2016). A teacher (a checkpoint, an ensemble or an export) translates every training
source of a corpus folder; the result is a corpus folder that ``seq2seq fit`` reads as the
student's data (``data.source``), its other splits copied unchanged. docs/distillation.md
walks the whole path.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from tqdm.auto import tqdm

from seq2seq.commands.decoding import (
    BEAM_SEARCH,
    NO_MODEL,
    DecodeSettings,
    ModelSettings,
    open_model,
)
from seq2seq.commands.options import check_parallel, command
from seq2seq.common.atomic import atomic_folder
from seq2seq.common.errors import DataError, OutputError, UsageError
from seq2seq.text.lines import iter_lines
from seq2seq.translation_model import TranslationModel

MANIFEST = "distill.json"


def split_file(folder: Path, split: str, lang: str) -> Path | None:
    """``folder/{split}.{lang}`` or its ``.gz``, as the data module finds it (None: neither)."""
    found = [p for p in (folder / f"{split}.{lang}", folder / f"{split}.{lang}.gz") if p.is_file()]
    if len(found) == 2:
        raise DataError(f"both {found[0]} and {found[1]} exist; remove one")
    return found[0] if found else None


def other_splits(folder: Path, train: str, src_lang: str, tgt_lang: str) -> list[Path]:
    """The files of every split but ``train`` that has both sides of the pair."""
    stems = {path.name.split(".")[0] for path in folder.iterdir() if path.is_file()} - {train}
    files = []
    for split in sorted(stems):
        src, tgt = [split_file(folder, split, lang) for lang in (src_lang, tgt_lang)]
        if src is not None and tgt is not None:
            files += [src, tgt]
    return files


def one_line(text: str) -> str:
    """A translation as one line of the corpus: a line break the model wrote (a byte piece
    can spell one) would split it in two and shift every later pair."""
    return text.replace("\r", " ").replace("\n", " ")


def check_folders(data: Path, out: Path) -> None:
    """--data is a folder; --out does not exist yet or is an empty folder."""
    if not data.is_dir():
        raise DataError(f"--data {data}: not a folder of {{split}}.{{lang}} files")
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out} is a file; give a new folder")
    if out.is_dir() and any(out.iterdir()):
        raise OutputError(f"--out {out} already holds files; give a new folder or remove it")


@command
def distill(
    data: str,
    out: str,
    src_lang: str,
    tgt_lang: str,
    model: ModelSettings = NO_MODEL,
    decode: DecodeSettings = BEAM_SEARCH,
    train_split: str = "train",
    keep_originals: bool = False,
) -> None:
    """Write a student's corpus: the training sources translated by a teacher.

    Writes --out as a corpus folder that `seq2seq fit` reads (--data.source OUT): the
    training sources, the teacher's translation of each as its target (line i of one file
    translates line i of the other; a blank source gives a blank target, which training
    skips), and every other split of the pair copied byte for byte, so that the student is
    chosen on the human references. The folder appears only when complete.

    Args:
        data: corpus folder of {split}.{lang} files (or .gz), as data.source reads it
        out: the new corpus folder (must not exist, or be empty)
        src_lang: source language code, as in the file names
        tgt_lang: target language code; the teacher's own, if its checkpoint records one
        model: the teacher: checkpoints (several: an ensemble) or an export
        decode: the teacher's search and its batches
        train_split: the split whose sources are translated
        keep_originals: append the original pairs after the distilled ones
    """
    data_dir, out_dir = Path(data), Path(out)
    check_folders(data_dir, out_dir)
    sources = split_file(data_dir, train_split, src_lang)
    if sources is None:
        raise DataError(f"{data_dir}: no {train_split}.{src_lang} or {train_split}.{src_lang}.gz")
    targets = split_file(data_dir, train_split, tgt_lang)
    if keep_originals and targets is None:
        raise DataError(f"{data_dir}: --keep-originals needs {train_split}.{tgt_lang} (or .gz)")
    count = count_lines(sources)  # reads it all: bad UTF-8 stops us before any work
    if keep_originals:
        assert targets is not None  # checked above
        check_parallel(str(sources), range(count), str(targets), range(count_lines(targets)))
    copies = other_splits(data_dir, train_split, src_lang, tgt_lang)
    teacher = open_model("distill", model, decode)
    if teacher.tgt_lang not in (None, tgt_lang):
        raise UsageError(f"--tgt-lang {tgt_lang}: the teacher translates into {teacher.tgt_lang}")
    with atomic_folder(out_dir) as folder:
        src_out, tgt_out = (folder / f"{train_split}.{lang}" for lang in (src_lang, tgt_lang))
        write_distilled(teacher, sources, count, src_out, tgt_out)
        if keep_originals:
            assert targets is not None  # checked above
            append_lines(sources, src_out)
            append_lines(targets, tgt_out)
        for path in copies:
            shutil.copyfile(path, folder / path.name)
        manifest = {
            "data": str(data_dir),
            "train_split": train_split,
            "distilled": count,
            "keep_originals": keep_originals,
            "teacher": model.model or model.ckpt or model.ctranslate2,
            "ensemble_weights": model.ensemble_weights,
            "search": dataclasses.asdict(teacher.search),
            "copied": sorted(path.name for path in copies),
        }
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    print(f"{out_dir}: {count} distilled pairs" + (" and the originals" if keep_originals else ""))


def count_lines(path: Path) -> int:
    """The lines of a corpus file, as the data module counts them."""
    return sum(1 for _ in iter_lines(path))


def write_distilled(
    teacher: TranslationModel, sources: Path, count: int, src_out: Path, tgt_out: Path
) -> None:
    """Each of the ``count`` lines of ``sources`` to ``src_out`` and the teacher's
    translation of it to ``tgt_out``, pair by pair, with a progress bar."""
    written = 0
    with (
        open(src_out, "w", encoding="utf-8", newline="\n") as src_file,
        open(tgt_out, "w", encoding="utf-8", newline="\n") as tgt_file,
        tqdm(total=count, desc="distilling", unit="sent") as bar,
    ):
        for translation in teacher.stream(iter_lines(sources), progress=False):
            src_file.write(translation.source + "\n")
            tgt_file.write(one_line(translation.text) + "\n")
            written += 1
            bar.update()
    if written != count:  # translate_stream yields one translation per line, in order
        raise DataError(f"{sources}: {count} lines but {written} translations")


def append_lines(path: Path, out: Path) -> None:
    """The lines of ``path`` (as the data module reads them) after those of ``out``."""
    with open(out, "a", encoding="utf-8", newline="\n") as file:
        file.writelines(line + "\n" for line in iter_lines(path))
