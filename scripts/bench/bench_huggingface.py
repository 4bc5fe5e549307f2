"""A transformers MarianMT model searched by seq2seq against transformers' own generate:
how equal their outputs are, and how fast each translates, alternating A B A B.

On ``--src`` (one sentence a line): the largest difference between the two's
log-probabilities in forced decoding of transformers' greedy translations; how many
greedy translations are equal; how many beam-``--beam`` n-best lists are equal with no
length penalty (``length_penalty=0`` in both, ``early_stopping=True``); then beam
``--beam`` sentences/s of each, ``--rounds`` times in turn, on the same threads (seq2seq
with its own batching, transformers in batches of ``--batch`` sentences). Writes ``--out``
(JSON) and prints a summary.

    python -m scripts.bench.bench_huggingface --hf DIR --src sentences.en --out hf.json
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import torch

import seq2seq
from scripts.bench.benchkit import alternate, cpu_model, save_json
from seq2seq.inference.huggingface import import_transformers
from seq2seq.text.lines import read_lines


def batches(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def generate(hf: Any, tokenizer: Any, lines: list[str], size: int, **options: Any) -> list[str]:
    """transformers' translations of ``lines``, in batches of ``size``."""
    out = []
    for chunk in batches(lines, size):
        batch = tokenizer(chunk, padding=True, return_tensors="pt")
        with torch.inference_mode():
            ids = hf.generate(**batch, do_sample=False, max_new_tokens=256, **options)
        out += tokenizer.batch_decode(ids, skip_special_tokens=True)
    return out


def equivalence(args: argparse.Namespace, hf: Any, tokenizer: Any, lines: list[str]) -> dict:
    """Log-probability difference and equal outputs, greedy and beam."""
    ours = seq2seq.load(args.hf)
    greedy = generate(hf, tokenizer, lines, args.batch, num_beams=1)
    worst = 0.0
    trained = ours.trained
    for chunk, targets in zip(batches(lines, args.batch), batches(greedy, args.batch), strict=True):
        batch = tokenizer(chunk, text_target=targets, padding=True, return_tensors="pt")
        labels = batch.pop("labels")
        start = torch.full((len(chunk), 1), hf.config.decoder_start_token_id)
        tgt_in = torch.cat([start, labels[:, :-1]], dim=1)
        valid = labels != tokenizer.pad_token_id
        with torch.inference_mode():
            theirs = torch.log_softmax(hf(**batch, decoder_input_ids=tgt_in).logits, -1)
            logits, _ = trained.model(batch["input_ids"], batch["attention_mask"].sum(1), tgt_in,
                                      need_weights=False)  # fmt: skip
        mine = torch.log_softmax(logits, -1)
        picked = [
            x.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1) for x in (theirs, mine)
        ]
        worst = max(worst, float(((picked[0] - picked[1]).abs() * valid).max()))
    ours_greedy = ours.translate(lines, beam=1, max_len_offset=256)
    k = args.beam
    theirs_beam = generate(hf, tokenizer, lines, args.batch, num_beams=k, num_return_sequences=k,
                           length_penalty=0.0, early_stopping=True)  # fmt: skip
    ours_beam = ours.translate(lines, beam=k, n_best=k, length_penalty=0.0, max_len_offset=256)
    equal_nbest = sum(ours_beam[i] == theirs_beam[i * k : (i + 1) * k] for i in range(len(lines)))
    return {
        "max_abs_logprob_difference": worst,
        "greedy_equal": sum(a == b for a, b in zip(ours_greedy, greedy, strict=True)),
        "nbest_equal": equal_nbest,
        "lines": len(lines),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hf", required=True, help="a MarianMT model (folder or Hub id)")
    parser.add_argument("--src", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32, help="transformers' batch size")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    transformers = import_transformers()
    transformers.utils.logging.disable_progress_bar()
    hf = transformers.MarianMTModel.from_pretrained(args.hf).eval()
    tokenizer = transformers.MarianTokenizer.from_pretrained(args.hf)
    lines = read_lines(str(args.src))
    record: dict[str, Any] = {
        "cpu": cpu_model(), "threads": torch.get_num_threads(),
        "equivalence": equivalence(args, hf, tokenizer, lines),
    }  # fmt: skip
    ours = seq2seq.load(args.hf, beam=args.beam)

    def measure(name: str, _: int) -> dict[str, float]:
        start = time.perf_counter()
        if name == "seq2seq":
            ours.translate(lines)
        else:
            generate(hf, tokenizer, lines, args.batch, num_beams=args.beam)
        return {"sentences_per_sec": len(lines) / (time.perf_counter() - start)}

    rounds = alternate([], args.rounds, ["seq2seq", "transformers"], measure)
    record["rounds"] = rounds
    for name in ("seq2seq", "transformers"):
        record[f"{name}_sentences_per_sec"] = statistics.median(
            r[name]["sentences_per_sec"] for r in rounds
        )
    save_json(args.out, record)
    eq = record["equivalence"]
    print(f"log-probabilities: max |difference| {eq['max_abs_logprob_difference']:.2e}; greedy "
          f"equal on {eq['greedy_equal']} of {eq['lines']}; beam {args.beam} n-best equal on "
          f"{eq['nbest_equal']} of {eq['lines']}")  # fmt: skip
    print(f"beam {args.beam}, sentences/s (median of {args.rounds}, {record['threads']} threads): "
          f"seq2seq {record['seq2seq_sentences_per_sec']:.1f}, transformers "
          f"{record['transformers_sentences_per_sec']:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
