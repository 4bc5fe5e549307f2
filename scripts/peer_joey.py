"""Measure Joey NMT 2.3 on Multi30k beside seq2seq: training target tokens/s, decoding sentences/s.

Joey NMT is a reference to measure against, never a dependency: it lives in its own virtual
environment under a cache folder (default ``~/.cache/seq2seq-bench``), built once with
``pip install torch==<pinned>`` first (so pip keeps the CPU wheel instead of pulling CUDA)
and then ``pip install joeynmt importlib_metadata``. The configurations and the launcher
``joey.py`` (a shim for sentencepiece 0.2.x) come from the peers folder.

Steps, each skipped when its result already exists (the JSON is the record):

1. ``env``: the virtual environment.
2. ``data``: plain-text train/val/test_2016_flickr .en/.de from the gzipped corpus and a joint
   unigram 8k SentencePiece model (cased, trained on train.en + train.de) with Joey's special
   ids (unk 0, pad 1, bos 2, eos 3), plus its piece list as Joey's vocabulary file.
3. ``train``: ``python joey.py train CONFIG`` for a wall-clock budget, then SIGINT (Joey
   catches it and saves the current weights, which decoding needs), SIGTERM if it lingers.
   Throughput is the median of Joey's "Tokens per Sec" log lines (real target tokens over
   each logging interval, the same quantity as seq2seq's ``train/device/items_per_sec``),
   the first interval left out as warm-up.
4. ``decode``: ``python joey.py test CONFIG`` with beam 5 and greedy over test_2016 (dev is
   cut to one sentence so that only the test set costs time); sentences/s from Joey's
   "Generation took" line, peak RSS from ``getrusage`` of the child.

Usage::

    python scripts/peer_joey.py --model transformer --train-minutes 2 --decode greedy
    python scripts/peer_joey.py --model rnn --train-minutes 1 --out bench/joey.json
    python scripts/peer_joey.py --train-minutes 0 --decode beam5 --checkpoint BEST.ckpt

The JSON holds one entry per model with ``train``, ``beam5`` and ``greedy``; an entry that
is there is not measured again (``--force`` redoes the chosen model's). Decoding uses the
weights the timed training left unless ``--checkpoint`` names a trained one: after a short
budget the hypotheses' lengths are not those of a trained model, nor are the sentences/s.

Run it with ``nice -n 19 OMP_NUM_THREADS=1`` beside other work; figures taken that way are
checks that the pipeline runs, not benchmark numbers.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
from operator import methodcaller
from pathlib import Path
from typing import Any

from seq2seq.atomic import write_atomically

REPO = Path(__file__).resolve().parent.parent
PEERS = REPO.parent / "shared" / "peers" / "joeynmt"
CACHE = Path.home() / ".cache" / "seq2seq-bench"
TORCH_PIN = "torch==2.13.0"
SPLITS = ("train", "val", "test_2016_flickr")
LANGS = ("en", "de")
SPM_NAME = "spm8k"

TOKENS_PER_SEC = re.compile(r"Step:\s+(\d+),.*Tokens per Sec:\s+([\d.]+)")
GENERATION = re.compile(r"Generation took ([\d.]+)\[sec\]")
DECODING_ON = re.compile(r"Decoding on (\w+) set")


def log(message: str) -> None:
    """Progress on stderr, so that stdout stays the JSON."""
    print(f"[peer_joey {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- environment -------------------------------------------------------------------------


def venv_python(venv: Path) -> Path:
    """The interpreter of a virtual environment."""
    return venv / "bin" / "python"


def ensure_venv(venv: Path) -> Path:
    """Create Joey NMT's environment unless it already imports joeynmt; return its python."""
    python = venv_python(venv)
    if python.exists() and _imports_joey(python):
        return python
    log(f"creating {venv} (torch first, then joeynmt)")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, TORCH_PIN], check=True)
    subprocess.run([*pip, "joeynmt", "importlib_metadata"], check=True)
    if not _imports_joey(python):
        raise RuntimeError(f"joeynmt does not import in {venv}")
    return python


def _imports_joey(python: Path) -> bool:
    probe = subprocess.run([str(python), "-c", "import joeynmt, torch"], capture_output=True)
    return probe.returncode == 0


# --- data --------------------------------------------------------------------------------


def prepare_data(corpus: Path, data_dir: Path, vocab_size: int = 8000) -> Path:
    """Plain-text splits and the joint SentencePiece model + vocabulary in ``data_dir``."""
    data_dir.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        for lang in LANGS:
            _gunzip(corpus / f"{split}.{lang}.gz", data_dir / f"{split}.{lang}")
    for lang in LANGS:  # one-sentence dev set, so that `test` spends its time on test_2016
        first = (data_dir / f"val.{lang}").read_text(encoding="utf-8").splitlines()[0]
        (data_dir / f"dev1.{lang}").write_text(first + "\n", encoding="utf-8")
    if not (data_dir / f"{SPM_NAME}.model").exists():
        train_sentencepiece(data_dir, vocab_size)
    write_vocab(data_dir / f"{SPM_NAME}.model", data_dir / f"{SPM_NAME}.vocab")
    return data_dir


def _gunzip(source: Path, target: Path) -> None:
    if target.exists():
        return
    with gzip.open(source, "rb") as f:
        write_atomically(target, functools.partial(shutil.copyfileobj, f))


def train_sentencepiece(data_dir: Path, vocab_size: int) -> None:
    """Joint unigram model, cased, on train.en + train.de, with Joey's special ids."""
    import sentencepiece as spm

    log(f"training a joint unigram {vocab_size} SentencePiece model")
    spm.SentencePieceTrainer.train(
        input=[str(data_dir / f"train.{lang}") for lang in LANGS],
        model_prefix=str(data_dir / f"{SPM_NAME}.tmp"),
        vocab_size=vocab_size,
        model_type="unigram",
        character_coverage=1.0,
        unk_id=0,
        pad_id=1,
        bos_id=2,
        eos_id=3,
        num_threads=1,
    )
    (data_dir / f"{SPM_NAME}.tmp.model").replace(data_dir / f"{SPM_NAME}.model")
    (data_dir / f"{SPM_NAME}.tmp.vocab").unlink()


def write_vocab(model: Path, target: Path) -> None:
    """Joey reads a vocabulary file as one token per line: the pieces in id order."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    target.write_text("\n".join(pieces) + "\n", encoding="utf-8")


# --- configs -----------------------------------------------------------------------------


def rewrite_config(
    text: str,
    data_dir: Path,
    model_dir: Path,
    overrides: dict[str, str] | None = None,
) -> str:
    """Fill in DATA_DIR / MODEL_DIR and replace ``key: value`` lines named in ``overrides``.

    Overrides match a key at any indentation and keep the indentation (the whole value,
    comment included, is replaced): ``{"logging_freq": "10"}`` turns
    ``    logging_freq: 100`` into ``    logging_freq: 10``. A key that is absent is an error,
    so that a renamed option in the peers' configs cannot be silently ignored.
    """
    text = text.replace("DATA_DIR", str(data_dir)).replace("MODEL_DIR", str(model_dir))
    for key, value in (overrides or {}).items():
        pattern = re.compile(rf"^(\s*{re.escape(key)}:).*$", re.MULTILINE)
        line = f" {value}"
        text, count = pattern.subn(lambda m, line=line: m.group(1) + line, text)
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
    model: str,
    data_dir: Path,
    work: Path,
    name: str,
    overrides: dict[str, str],
    checkpoint: Path | None = None,
) -> Path:
    """Write a Joey config for ``model`` (transformer | rnn) under ``work``; return its path."""
    source = (PEERS / f"{model}.yaml").read_text(encoding="utf-8")
    path = work / "configs" / f"{model}.{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = rewrite_config(source, data_dir, work / "models", overrides)
    if checkpoint is not None:
        text = with_test_checkpoint(text, checkpoint)
    path.write_text(text, "utf-8")
    return path


# --- log parsing -------------------------------------------------------------------------


def parse_train_log(text: str, skip: int = 1) -> dict[str, Any]:
    """Joey's "Tokens per Sec" lines -> steps and median target tokens/s (first ``skip`` out)."""
    rows = [(int(step), float(rate)) for step, rate in TOKENS_PER_SEC.findall(text)]
    rates = [rate for _, rate in rows[skip:]] or [rate for _, rate in rows]
    return {
        "steps": rows[-1][0] if rows else 0,
        "intervals": len(rows),
        "target_tokens_per_sec": statistics.median(rates) if rates else None,
        "target_tokens_per_sec_all": [rate for _, rate in rows],
        "warmup_included": 0 < len(rows) <= skip,  # too short a run to leave warm-up out
    }


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


# --- runs --------------------------------------------------------------------------------


def default_sigint() -> None:
    """In the child before exec: SIGINT back to its default. A job started in the background
    (``make bench &``, nohup) inherits SIGINT ignored, and Python then never raises the
    KeyboardInterrupt on which Joey saves its weights."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_joey(
    python: Path,
    mode: str,
    config: Path,
    log_path: Path,
    minutes: float | None = None,
    options: tuple[str, ...] = (),
) -> tuple[str, float, float]:
    """Run ``joey.py MODE CONFIG [OPTIONS]``; stop it after ``minutes``.

    Returns (log, seconds, peak GB)."""
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    command = [str(python), str(PEERS / "joey.py"), mode, str(config), *options]
    log(f"{' '.join(command)}" + (f" for {minutes} min" if minutes else ""))
    start = time.monotonic()
    deadline = start + minutes * 60 if minutes else None
    with log_path.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=default_sigint
        )
        code, usage = wait_child(process, deadline)
    seconds = time.monotonic() - start
    if code != 0 and not minutes:
        raise RuntimeError(f"joey {mode} failed ({code}); see {log_path}")
    return log_path.read_text(encoding="utf-8"), seconds, usage.ru_maxrss / 2**20


def wait_child(
    process: subprocess.Popen[bytes], deadline: float | None
) -> tuple[int, resource.struct_rusage]:
    """Reap ``process`` with its own rusage (peak RSS); stop it at ``deadline``."""
    stopping = False
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return process.returncode, usage
        if deadline is not None and time.monotonic() > deadline and not stopping:
            stopping = True
            stop(process)
        time.sleep(0.5)


def stop(process: subprocess.Popen[bytes], grace: float = 60.0) -> None:
    """SIGINT first (Joey saves its weights on KeyboardInterrupt), then SIGTERM, then kill.

    Does not reap the child (``wait_child`` does, to keep its rusage): it only waits
    for it to become a zombie, seen through ``/proc``.
    """
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        process.send_signal(sig)
        end = time.monotonic() + grace
        while time.monotonic() < end:
            if _exited(process.pid):
                return
            time.sleep(0.5)


def _exited(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return True
    return state in ("Z", "X")


def conditions() -> dict[str, Any]:
    """What the figures were taken beside: date, niceness, threads, load."""
    return {
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "nice": os.nice(0),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "cpus": os.cpu_count(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def measure_train(
    python: Path, model: str, data_dir: Path, work: Path, minutes: float, log_every: int
) -> dict:
    """Train for ``minutes`` of wall clock and read the throughput from Joey's log."""
    # No validation inside a timed run; Joey wants validation_freq a multiple of logging_freq.
    overrides = {"logging_freq": str(log_every), "validation_freq": str(log_every * 100_000)}
    config = write_config(model, data_dir, work, "train", overrides)
    text, seconds, peak_gb = run_joey(python, "train", config, work / f"{model}.train.log", minutes)
    result = parse_train_log(text)
    if result["target_tokens_per_sec"] is None:
        raise RuntimeError(f"no throughput in Joey's log; see {work / f'{model}.train.log'}")
    return {
        **result,
        "wall_seconds": round(seconds, 1),
        "peak_rss_gb": round(peak_gb, 2),
        "config": str(config),
    }


def test_subset(data_dir: Path, lines: int | None) -> Path:
    """Prefix of the test files: test_2016 itself, or its first ``lines`` sentences."""
    if lines is None:
        return data_dir / "test_2016_flickr"
    prefix = data_dir / f"test{lines}"
    for lang in LANGS:
        text = (data_dir / f"test_2016_flickr.{lang}").read_text(encoding="utf-8")
        (prefix.parent / f"{prefix.name}.{lang}").write_text(
            "".join(line + "\n" for line in text.splitlines()[:lines]), encoding="utf-8"
        )
    return prefix


def measure_decode(
    python: Path,
    model: str,
    data_dir: Path,
    work: Path,
    beam: int,
    checkpoint: Path | None,
    test_lines: int | None = None,
) -> dict:
    """Decode test_2016 (``checkpoint`` or the timed training's last weights); sentences/s."""
    name = f"beam{beam}"
    test = test_subset(data_dir, test_lines)
    overrides = {"dev": f'"{data_dir}/dev1"', "test": f'"{test}"', "beam_size": str(beam)}
    if checkpoint is not None:  # Joey's test insists that model_dir exists; it logs there
        model_dir = work / "models" / f"decode-{name}"
        model_dir.mkdir(parents=True, exist_ok=True)
        overrides["model_dir"] = f'"{model_dir}"'
    config = write_config(model, data_dir, work, name, overrides, checkpoint)
    output = work / f"{model}.{name}.hyp"  # Joey writes the test hypotheses to OUTPUT.test
    log_path = work / f"{model}.{name}.log"
    text, _, peak_gb = run_joey(
        python, "test", config, log_path, options=("--output-path", str(output))
    )
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


# --- driver ------------------------------------------------------------------------------


def load_results(path: Path) -> dict[str, Any]:
    """The measurements recorded so far (empty when none)."""
    return json.loads(path.read_text("utf-8")) if path.exists() else {}


def save_results(path: Path, results: dict[str, Any]) -> None:
    """Write the JSON atomically, so that an interrupted run leaves the last good record."""
    text = json.dumps(results, indent=2) + "\n"
    write_atomically(path, methodcaller("write", text.encode("utf-8")))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("transformer", "rnn"), default="transformer")
    parser.add_argument("--corpus", type=Path, default=REPO / "data" / "multi30k")
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--train-minutes", type=float, default=2.0)
    parser.add_argument(
        "--log-every", type=int, default=10, help="Joey's logging_freq: steps per throughput line"
    )
    parser.add_argument(
        "--decode",
        nargs="*",
        choices=("beam5", "greedy"),
        default=["beam5", "greedy"],
        help="decoding measurements to take (none: training only)",
    )
    parser.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="a trained Joey checkpoint to decode (default: the timed training's weights)",
    )
    parser.add_argument("--test-lines", type=int, help="decode only the first N test sentences")
    parser.add_argument("--out", type=Path, default=None, help="JSON (default: CACHE/joey.json)")
    parser.add_argument(
        "--force", action="store_true", help="redo this model's finished measurements"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    out = args.out or args.cache / "joey.json"
    results = load_results(out)
    if args.force:
        results.pop(args.model, None)
    python = ensure_venv(args.cache / "joeynmt-venv")
    data_dir = prepare_data(args.corpus, args.cache / "joey-data" / "multi30k-en-de")
    work = args.cache / "joey-runs" / args.model
    work.mkdir(parents=True, exist_ok=True)
    entry = results.setdefault(args.model, {})
    if "train" not in entry and args.train_minutes > 0:  # 0: decode --checkpoint only
        train = measure_train(
            python, args.model, data_dir, work, args.train_minutes, args.log_every
        )
        entry["train"] = {**train, "minutes": args.train_minutes, "conditions": conditions()}
        save_results(out, results)
    for name in args.decode:
        if name not in entry:
            beam = 5 if name == "beam5" else 1
            decode = measure_decode(
                python, args.model, data_dir, work, beam, args.checkpoint, args.test_lines
            )
            entry[name] = {**decode, "conditions": conditions()}
            save_results(out, results)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
