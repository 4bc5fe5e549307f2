"""A released model outside seq2seq: exported to transformers and run where seq2seq is not
installed, and exported to CTranslate2 (float32 and int8) beside seq2seq's own search.

On Multi30k's test_2016 (``--data``), for the released model ``--name``:

- **transformers.** ``seq2seq export --model NAME --to huggingface`` into ``WORK/hf``; a
  virtual environment ``WORK/hf-venv`` with torch, transformers and sentencepiece at the
  versions installed beside seq2seq, and without seq2seq; there ``hf_generate.py`` translates
  the test sources with ``AutoModelForSeq2SeqLM.generate``, once under seq2seq's ranking
  (``num_beams`` of the export, ``length_penalty=0``, ``early_stopping=True``) and once with
  the export's own generation config. Here, seq2seq's beam search on the shipped file at
  length penalty 0: how many translations are equal to transformers' (k of n); and the
  BLEU of transformers' default output beside the shipped model's own.
- **CTranslate2.** ``seq2seq export --model NAME --to ctranslate2`` in float32 and in int8;
  the shipped file in seq2seq and both exports translate the test sources at beam 5 with
  the model's search, each run a process of its own with ``--threads`` threads,
  ``--rounds`` rounds alternating A B C A B C: sentences/s (median; loading left out) and
  the BLEU of each.

A lowercase model's translations are scored as its card scores them: the literature's
BLEU, and sacreBLEU and chrF of the output recased by the model's casing table. The figures
go into ``WORK/outside.json`` and into the model's ``results.json`` and card (``make
bench-models`` keeps them).

    python -m scripts.bench.bench_outside --name multi30k-en-de --data data/multi30k \\
        --work runs/bench/outside --rounds 3
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import seq2seq
from scripts.bench.benchkit import (
    REPO,
    SEQ2SEQ,
    alternate,
    cpu_model,
    load_json,
    medians,
    run_engine,
    save_json,
    test_files,
    write_card,
)
from seq2seq.common.precision import Machine
from seq2seq.inference.released import RESULTS, Released, resolve
from seq2seq.text.lines import read_lines
from seq2seq.text.metrics import score_translations

HF_PACKAGES = ("torch", "transformers", "sentencepiece")  # what the clean environment gets
CT2_ENGINES = ("seq2seq-fp32", "ct2-float32", "ct2-int8")  # bench_engines.py's names


def scores(hyps: list[str], refs: list[str], released: Released) -> dict[str, float]:
    """Literature BLEU, sacreBLEU and chrF of ``hyps`` as the card scores the model's
    output: recased by its casing table first when it has one."""
    if released.casing is not None:
        recaser = seq2seq.Recaser.load(released.casing)
        hyps = [recaser.recase(line) for line in hyps]
    found = score_translations(hyps, refs, released.tgt_lang)
    return {name: round(found[name]["score"], 2) for name in ("bleu_literature", "bleu", "chrf")}


def export(name: str, to: str, out: Path, *options: str) -> Path:
    """``seq2seq export --model NAME`` into ``out``, once."""
    if not out.is_dir():
        subprocess.run([*SEQ2SEQ, "export", "--model", name, "--to", to, "--out", str(out),
                        *options], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    return out


def clean_environment(folder: Path) -> Path:
    """A virtual environment with ``HF_PACKAGES`` at the versions installed here (torch's
    CPU wheel as the Makefile installs it) and no seq2seq: its Python."""
    python = folder / "bin/python"
    if (folder / ".installed").is_file():
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(folder)], check=True)
    pins = [f"{p}=={importlib.metadata.version(p).split('+')[0]}" for p in HF_PACKAGES]
    quiet = ["--quiet", "--disable-pip-version-check"]
    subprocess.run([str(python), "-m", "pip", "install", *quiet, pins[0]], check=True)
    uv = Path(sys.executable).parent / "uv"
    if uv.is_file():
        subprocess.run([str(uv), "pip", "install", "--quiet", "--python", str(python),
                        *pins[1:]], check=True)  # fmt: skip
    else:
        subprocess.run([str(python), "-m", "pip", "install", *quiet, *pins[1:]], check=True)
    (folder / ".installed").write_text("\n".join(pins) + "\n")
    return python


def in_transformers(args: argparse.Namespace, released: Released, src: Path, ref: Path) -> dict:
    """The transformers half (see the module's docstring)."""

    folder = export(args.name, "huggingface", args.work / "hf")
    python = clean_environment(args.work / "hf-venv")
    lines, refs = read_lines(src), read_lines(ref)
    plain = args.work / "test.src.txt"
    plain.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    generated = args.work / "hf-generated.json"
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "PYTHONPATH": ""}
    subprocess.run([str(python), str(REPO / "scripts/bench/hf_generate.py"), "--model",
                    str(folder), "--src", str(plain), "--out", str(generated), "--threads",
                    str(args.threads)], check=True, env=env, cwd=args.work)  # fmt: skip
    hf = load_json(generated)
    model = seq2seq.load(args.name, recase=False)
    ours = model.translate(lines, length_penalty=0.0)
    shipped = model.translate(lines)  # its own search, lowercase: recased by ``scores``
    equal = sum(a == b for a, b in zip(ours, hf["matched"], strict=True))
    print(f"transformers: {equal} of {len(lines)} beam translations equal to seq2seq's "
          "(length penalty 0 in both)", file=sys.stderr)  # fmt: skip
    return {
        "transformers": hf["transformers"],
        "equal_lines": equal,
        "lines": len(lines),
        "generation_config": {key: hf["generation_config"].get(key)
                              for key in ("num_beams", "length_penalty", "max_length")},
        "defaults": scores(hf["defaults"], refs, released),
        "seq2seq": scores(shipped, refs, released),
    }  # fmt: skip


def in_ctranslate2(args: argparse.Namespace, released: Released, src: Path, ref: Path) -> dict:
    """The CTranslate2 half (see the module's docstring)."""
    for quantization in ("float32", "int8"):
        export(args.name, "ctranslate2", args.work / f"ct2-{quantization}",
               "--quantization", quantization)  # fmt: skip
    refs = read_lines(ref)
    engine_args = argparse.Namespace(ckpt=released.checkpoint, src=src, ref=ref, out=args.work,
                                     threads=args.threads, max_tokens=4096)  # fmt: skip

    def measure(engine: str, index: int) -> dict[str, Any]:
        result = run_engine(engine_args, engine, "beam5")
        result.update(scores(result.pop("hypotheses"), refs, released))
        print(
            f"round {index + 1} {engine:12s} {result['sentences_per_s']:7.1f} sent/s  "
            f"BLEU (lit.) {result['bleu_literature']:.2f}",
            file=sys.stderr,
            flush=True,
        )
        return result

    rounds = alternate([], args.rounds, CT2_ENGINES, measure)
    median = {engine: medians([done[engine] for done in rounds]) for engine in CT2_ENGINES}
    base = median["seq2seq-fp32"]["sentences_per_s"]
    return {
        "ctranslate2": importlib.metadata.version("ctranslate2"),
        "rounds": args.rounds,
        "threads": args.threads,
        "engines": {engine: {**{k: round(v, 2) for k, v in figures.items()},
                             "speed_ratio": round(figures["sentences_per_s"] / base, 2)}
                    for engine, figures in median.items()},
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", default="multi30k-en-de", help="a released model")
    parser.add_argument("--data", type=Path, default=Path("data/multi30k"))
    parser.add_argument("--work", type=Path, default=Path("runs/bench/outside"))
    parser.add_argument("--rounds", type=int, default=3, help="CTranslate2 rounds (median)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--parts", nargs="+", choices=["transformers", "ctranslate2"],
                        default=["transformers", "ctranslate2"])  # fmt: skip
    args = parser.parse_args()
    released = resolve(args.name)  # its sha256 checked
    src, ref = test_files(args.data, released.src_lang, released.tgt_lang)
    args.work = (args.work / args.name).resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    record_path = args.work / "outside.json"
    record = load_json(record_path, {})
    record["cpu"] = f"{cpu_model()} ({Machine.this().cpu_kind()})"
    if "transformers" in args.parts:
        record["in_transformers"] = in_transformers(args, released, src, ref)
    if "ctranslate2" in args.parts:
        record["in_ctranslate2"] = in_ctranslate2(args, released, src, ref)
    save_json(record_path, record)
    results = load_json(released.folder / RESULTS, {})
    results["outside"] = record
    save_json(released.folder / RESULTS, results)
    write_card(released.folder, results)


if __name__ == "__main__":
    main()
