"""Joey NMT 2.3 as the peer the benchmarks measure against (never a dependency): its own
virtual environment under a cache folder (CPU torch first), plain-text Multi30k En-De with a
joint cased unigram 8k SentencePiece model (Joey's ids: unk 0, pad 1, bos 2, eos 3), the
peers folder's configs and launcher, its runs and logs; and the A B A B comparison loop.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from scripts.bench.benchkit import REPO, alternate, load_json, run, save_json
from seq2seq.common.atomic import write_atomically

PEERS = REPO.parent / "shared" / "peers" / "joeynmt"
CACHE = Path.home() / ".cache" / "seq2seq-bench"
TORCH_PIN = "torch==2.13.0"
SPLITS = ("train", "val", "test_2016_flickr")
LANGS = ("en", "de")
SPM_NAME = "spm8k"
TOOLKITS = ("joey", "seq2seq")  # the order of each round

TOKENS_PER_SEC = re.compile(r"Step:\s+(\d+),.*Tokens per Sec:\s+([\d.]+)")
GENERATION = re.compile(r"Generation took ([\d.]+)\[sec\]")
DECODING_ON = re.compile(r"Decoding on (\w+) set")


def log(message: str) -> None:
    """Progress on stderr, so that stdout stays the JSON."""
    print(f"[joey {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def ensure_venv(venv: Path) -> Path:
    """Create Joey NMT's environment unless it already imports joeynmt; return its python."""
    python = venv / "bin" / "python"

    def imports_joey() -> bool:
        probe = [str(python), "-c", "import joeynmt, torch"]
        return python.exists() and subprocess.run(probe, capture_output=True).returncode == 0

    if imports_joey():
        return python
    log(f"creating {venv} (torch first, then joeynmt)")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, TORCH_PIN], check=True)
    subprocess.run([*pip, "joeynmt", "importlib_metadata"], check=True)
    if not imports_joey():
        raise RuntimeError(f"joeynmt does not import in {venv}")
    return python


def prepare_data(corpus: Path, data_dir: Path, vocab_size: int = 8000) -> Path:
    """Plain-text splits, a one-sentence dev set (so that ``test`` spends its time on the
    test set) and the SentencePiece model and Joey vocabulary, in ``data_dir``."""
    import sentencepiece as spm

    data_dir.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        for lang in LANGS:
            if not (target := data_dir / f"{split}.{lang}").exists():
                with gzip.open(corpus / f"{split}.{lang}.gz", "rb") as f:
                    write_atomically(target, partial(shutil.copyfileobj, f))
    for lang in LANGS:
        first = (data_dir / f"val.{lang}").read_text(encoding="utf-8").splitlines()[0]
        (data_dir / f"dev1.{lang}").write_text(first + "\n", encoding="utf-8")
    model = data_dir / f"{SPM_NAME}.model"
    if not model.exists():
        log(f"training a joint unigram {vocab_size} SentencePiece model")
        spm.SentencePieceTrainer.train(
            input=[str(data_dir / f"train.{lang}") for lang in LANGS],
            model_prefix=str(data_dir / f"{SPM_NAME}.tmp"), vocab_size=vocab_size,
            model_type="unigram", character_coverage=1.0, unk_id=0, pad_id=1, bos_id=2,
            eos_id=3, num_threads=1,
        )  # fmt: skip
        (data_dir / f"{SPM_NAME}.tmp.model").replace(model)
        (data_dir / f"{SPM_NAME}.tmp.vocab").unlink()
    sp = spm.SentencePieceProcessor(model_file=str(model))  # Joey's vocabulary: the pieces
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    (data_dir / f"{SPM_NAME}.vocab").write_text("\n".join(pieces) + "\n", encoding="utf-8")
    return data_dir


def rewrite_config(
    text: str, data_dir: Path, model_dir: Path, overrides: dict[str, str] | None = None
) -> str:
    """Fill in DATA_DIR / MODEL_DIR and replace the value (comment included) of each
    ``key: value`` line named in ``overrides``, at any indentation. An absent key is an
    error, so that a renamed option in the peers' configs is not silently ignored."""
    text = text.replace("DATA_DIR", str(data_dir)).replace("MODEL_DIR", str(model_dir))
    for key, value in (overrides or {}).items():
        pattern = re.compile(rf"^(\s*{re.escape(key)}:).*$", re.MULTILINE)
        text, count = pattern.subn(lambda m, value=value: f"{m.group(1)} {value}", text)
        if count == 0:
            raise KeyError(f"config has no `{key}:` line to override")
    return text


def with_test_checkpoint(text: str, checkpoint: Path) -> str:
    """Make ``joey.py test`` decode ``checkpoint`` (``testing.load_model``), not model_dir's."""
    if not re.search(r"^testing:\s*$", text, re.MULTILINE):
        raise KeyError("config has no `testing:` section")
    line = f'    load_model: "{checkpoint}"'
    return re.sub(r"^testing:\s*$", lambda m: f"{m.group(0)}\n{line}", text, flags=re.MULTILINE)


def write_config(
    model: str, data_dir: Path, work: Path, name: str, overrides: dict[str, str],
    checkpoint: Path | None = None,
) -> Path:  # fmt: skip
    """Write the peers' config of ``model`` (transformer | rnn) under ``work``."""
    text = rewrite_config((PEERS / f"{model}.yaml").read_text("utf-8"), data_dir,
                          work / "models", overrides)  # fmt: skip
    path = work / "configs" / f"{model}.{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(with_test_checkpoint(text, checkpoint) if checkpoint else text, "utf-8")
    return path


def parse_train_log(text: str, skip: int = 1) -> dict[str, Any]:
    """Joey's "Tokens per Sec" lines: steps and the median target tokens/s of the logging
    intervals, the first ``skip`` left out as warm-up (unless there are no others)."""
    rows = [(int(step), float(rate)) for step, rate in TOKENS_PER_SEC.findall(text)]
    return {
        "steps": rows[-1][0] if rows else 0,
        "intervals": len(rows),
        "target_tokens_per_sec": steady_rate([rate for _, rate in rows], skip),
        "target_tokens_per_sec_all": [rate for _, rate in rows],
        "warmup_included": 0 < len(rows) <= skip,
    }


def steady_rate(rates: list[float], skip: int = 1) -> float | None:
    """The median of a run's interval rates with the first ``skip`` (warm-up) left out,
    unless there are no others."""
    counted = rates[skip:] or rates
    return statistics.median(counted) if counted else None


def parse_test_log(text: str) -> dict[str, float]:
    """Seconds of generation per data set ("Decoding on test set" ... "Generation took")."""
    seconds: dict[str, float] = {}
    current = None
    for line in text.splitlines():
        if found := DECODING_ON.search(line):
            current = found.group(1)
        elif (found := GENERATION.search(line)) and current is not None:
            seconds[current] = float(found.group(1))
            current = None
    return seconds


def run_joey(
    python: Path, mode: str, config: Path, log_path: Path, minutes: float | None = None,
    options: tuple[str, ...] = (),
) -> tuple[str, float, float]:  # fmt: skip
    """``joey.py MODE CONFIG [OPTIONS]``, stopped after ``minutes``: SIGINT first (Joey saves
    its weights on KeyboardInterrupt), then SIGTERM, then SIGKILL. Its log, seconds and
    peak RSS in GB."""
    command = [str(python), str(PEERS / "joey.py"), mode, str(config), *options]
    log(" ".join(command) + (f" for {minutes} min" if minutes else ""))
    usage = run(
        command, log_path, env={"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")},
        timeout=minutes * 60 if minutes else None,
        stop=(signal.SIGINT, signal.SIGTERM, signal.SIGKILL),
    )  # fmt: skip
    if usage.status != 0 and not minutes:
        raise RuntimeError(f"joey {mode} failed ({usage.status}); see {log_path}")
    peak_gb = usage.peak_rss_mb / 1024
    return log_path.read_text(encoding="utf-8"), usage.seconds, peak_gb


def measure_train(
    python: Path, model: str, data_dir: Path, work: Path, minutes: float, log_every: int
) -> dict[str, Any]:
    """Train for ``minutes`` of wall clock, validation off; the throughput of Joey's log."""
    # Joey wants validation_freq a multiple of logging_freq
    overrides = {"logging_freq": str(log_every), "validation_freq": str(log_every * 100_000)}
    config = write_config(model, data_dir, work, "train", overrides)
    log_path = work / f"{model}.train.log"
    text, seconds, peak_gb = run_joey(python, "train", config, log_path, minutes)
    result = parse_train_log(text)
    if result["target_tokens_per_sec"] is None:
        raise RuntimeError(f"no throughput in Joey's log; see {log_path}")
    return {**result, "wall_seconds": round(seconds, 1), "peak_rss_gb": round(peak_gb, 2),
            "config": str(config)}  # fmt: skip


def test_subset(data_dir: Path, lines: int | None) -> Path:
    """The prefix of the test files: test_2016 itself, or its first ``lines`` sentences."""
    if lines is None:
        return data_dir / "test_2016_flickr"
    for lang in LANGS:
        text = (data_dir / f"test_2016_flickr.{lang}").read_text(encoding="utf-8")
        cut = "".join(line + "\n" for line in text.splitlines()[:lines])
        (data_dir / f"test{lines}.{lang}").write_text(cut, encoding="utf-8")
    return data_dir / f"test{lines}"


def measure_decode(
    python: Path, model: str, data_dir: Path, work: Path, beam: int, checkpoint: Path | None,
    test_lines: int | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Decode the test set (``checkpoint``, or the timed training's last weights) with
    ``joey.py test``; sentences/s from Joey's own clock around generation."""
    name = f"beam{beam}"
    test = test_subset(data_dir, test_lines)
    overrides = {"dev": f'"{data_dir}/dev1"', "test": f'"{test}"', "beam_size": str(beam)}
    if checkpoint is not None:  # Joey's test insists that model_dir exists; it logs there
        model_dir = work / "models" / f"decode-{name}"
        model_dir.mkdir(parents=True, exist_ok=True)
        overrides["model_dir"] = f'"{model_dir}"'
    config = write_config(model, data_dir, work, name, overrides, checkpoint)
    output, log_path = work / f"{model}.{name}.hyp", work / f"{model}.{name}.log"
    options = ("--output-path", str(output))  # Joey writes the hypotheses to OUTPUT.test
    text, _, peak_gb = run_joey(python, "test", config, log_path, options=options)
    seconds = parse_test_log(text).get("test")
    if seconds is None:
        raise RuntimeError(f"no test generation time in {log_path}")
    sentences = len(test.with_name(f"{test.name}.en").read_text("utf-8").splitlines())
    return {
        "beam": beam,
        "sentences": sentences,
        "seconds": seconds,
        "sentences_per_sec": round(sentences / seconds, 2),
        "peak_rss_gb": round(peak_gb, 2),
        "hypotheses": str(output.with_name(f"{output.name}.test")),
        "checkpoint": str(checkpoint) if checkpoint else "last weights of the timed training",
    }


# -- the comparisons with seq2seq ------------------------------------------------------------
def add_comparison_arguments(parser: argparse.ArgumentParser, out: str) -> None:
    """What both comparisons with Joey NMT take: rounds, threads, corpus, cache, output."""
    parser.add_argument("--rounds", type=int, default=2, help="A B rounds")
    parser.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS of both")
    parser.add_argument("--corpus", type=Path, default=REPO / "data" / "multi30k")
    parser.add_argument("--cache", type=Path, default=CACHE, help="Joey's environment and runs")
    parser.add_argument("--out", type=Path, default=Path(out))


def check_comparison_arguments(
    parser: argparse.ArgumentParser, args: argparse.Namespace, corpus_file: str
) -> None:
    if args.rounds < 1 or args.threads < 1:
        parser.error("--rounds and --threads must be positive")
    if not (args.corpus / corpus_file).exists():
        parser.error(f"no Multi30k corpus in {args.corpus} (run `make multi30k`)")


def joey_environment(args: argparse.Namespace) -> tuple[Path, Path]:
    """The threads of both toolkits' runs (they inherit them); Joey NMT's python and data."""
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    python = ensure_venv(args.cache / "joeynmt-venv")
    return python, prepare_data(args.corpus, args.cache / "joey-data" / "multi30k-en-de")


def summarize(rounds: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """Medians of ``key`` over the rounds where both toolkits ran, their ratio and each
    round's."""
    paired = [r for r in rounds if set(TOOLKITS) <= set(r)]
    if not paired:
        return {}
    ours, joey = ([r[toolkit][key] for r in paired] for toolkit in ("seq2seq", "joey"))
    return {
        "paired_rounds": len(paired),
        "seq2seq_median": statistics.median(ours),
        "joey_median": statistics.median(joey),
        "ratio": statistics.median(ours) / statistics.median(joey),
        "ratio_per_round": [round(a / b, 2) for a, b in zip(ours, joey, strict=True)],
    }


def compare(
    out: Path, names: list[str], rounds: int, key: str,
    measure: Callable[[str, str, int], dict[str, Any]], **settings: Any,
) -> None:  # fmt: skip
    """A B A B: in each round, for each name, Joey NMT's run (``measure("joey", name,
    round)``) and then seq2seq's. ``out[name]["rounds"]`` keeps every run, saved as each
    ends, beside the medians of ``key`` (``summarize``) and ``settings``; a run there already
    is not redone."""
    results = load_json(out)
    for count in range(1, rounds + 1):
        for name in names:
            entry = results.setdefault(name, {"rounds": []})
            alternate(
                entry["rounds"], count, TOOLKITS,
                lambda toolkit, index, name=name: measure(toolkit, name, index),
                lambda: save_json(out, results),
            )  # fmt: skip
            entry.update(summarize(entry["rounds"], key))
            save_json(out, results)
            print(f"[{name} round {count - 1}] ratios {entry.get('ratio_per_round')}", flush=True)
    for entry in results.values():
        entry.update(settings)
    save_json(out, results)
    summary = {name: {k: v for k, v in e.items() if k != "rounds"} for name, e in results.items()}
    print(json.dumps(summary, indent=2))
