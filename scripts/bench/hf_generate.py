"""transformers translating a file with a MarianMT folder, in an environment without seq2seq.

Run by ``bench_outside.py`` with the Python of a virtual environment that has torch,
transformers and sentencepiece and not seq2seq (it fails at once if seq2seq is importable,
so that nothing of ours can help). It imports nothing from this repository. For each
search it prints nothing and writes, into ``--out`` (JSON), the translations of ``--src``
(one sentence a line) in input order:

- ``matched``: ``generate(num_beams=B, length_penalty=0, early_stopping=True)``, the
  ranking and the stopping rule of seq2seq's beam search at length penalty 0;
- ``defaults``: ``generate()`` with the export's own generation config.

    .../hf-venv/bin/python scripts/bench/hf_generate.py --model DIR --src test.en --out hf.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path

import torch
import transformers


def translate(model, tokenizer, lines: list[str], batch: int, **options) -> list[str]:
    """``lines`` translated in batches of ``batch`` sentences of similar length (fewer pads),
    returned in input order."""
    order = sorted(range(len(lines)), key=lambda i: len(lines[i]))
    out: list[str] = [""] * len(lines)
    for start in range(0, len(order), batch):
        chunk = order[start : start + batch]
        encoded = tokenizer([lines[i] for i in chunk], padding=True, return_tensors="pt")
        with torch.inference_mode():
            ids = model.generate(**encoded, **options)
        texts = tokenizer.batch_decode(ids, skip_special_tokens=True)
        for i, text in zip(chunk, texts, strict=True):
            out[i] = text
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="a MarianMT folder")
    parser.add_argument("--src", type=Path, required=True, help="one sentence a line")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if importlib.util.find_spec("seq2seq") is not None:
        raise SystemExit("seq2seq is importable here: this must run without it")
    torch.set_num_threads(args.threads)
    lines = args.src.read_text(encoding="utf-8").splitlines()
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.model)
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(args.model).eval()
    beam = model.generation_config.num_beams
    results = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "generation_config": model.generation_config.to_diff_dict(),
    }
    searches = {
        "matched": {"num_beams": beam, "length_penalty": 0.0, "early_stopping": True},
        "defaults": {},
    }
    for name, options in searches.items():
        start = time.perf_counter()
        results[name] = translate(model, tokenizer, lines, args.batch, **options)
        results[f"{name}_seconds"] = time.perf_counter() - start
    args.out.write_text(json.dumps(results, ensure_ascii=False, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
