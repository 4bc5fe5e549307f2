"""``seq2seq models``: the released models, one line each, with the figures of their cards."""

from __future__ import annotations

from typing import Any

from seq2seq.commands.options import command
from seq2seq.inference.released import MODELS_ENV, models_folder, released_names, resolve


def model_row(results: dict[str, Any]) -> list[str]:
    """A released model's cells, from its card's figures (``results.json``)."""
    if not results:
        return ["", "", "not benchmarked yet", ""]
    test = results["test_2016_flickr"]
    sacre = f" / {test['bleu']:.2f}" if test.get("cased") else " / (lowercase)"
    speed = f"{results['beam5_sentences_per_sec']:.0f} on {results['cpu_kind']}"
    return [results["parameters"], f"{results['file_mib']:.1f} MiB",
            f"{test['bleu_literature']:.2f}{sacre}", speed]  # fmt: skip


@command
def models() -> None:
    """List the released models: languages, size, test_2016 BLEU, decoding speed.

    Each loads by name: `seq2seq translate --model NAME`, `seq2seq.load(NAME)`. Its card
    is the README.md in its folder; the figures here are the card's. The folder is
    `models/` beside the package, or the one $SEQ2SEQ_MODELS names.
    """
    folder = models_folder()
    header = ["name", "languages", "parameters", "file", "test_2016 BLEU (lit. / sacre)",
              "beam 5, sentences/s (2 threads)"]  # fmt: skip
    rows = [header]
    for name in released_names(folder):
        released = resolve(name, folder)
        rows.append([name, f"{released.src_lang}->{released.tgt_lang}",
                     *model_row(released.results)])  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    print(f"({len(rows) - 1} in {folder}; {MODELS_ENV} names another folder)")
